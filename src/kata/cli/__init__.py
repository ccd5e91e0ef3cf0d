"""The `kata` command line: parses arguments, calls the library, prints what it says.

`group` holds the command group and the options commands share; `learner` the learner's
commands (each opens a kata.learning.session.Session); `instructor` the instructor's.
Exit codes: 0 success (all checks passed), 1 some check failed, 2 usage error (unknown
exercise, no course found, bad option). Usage errors are one line on stderr.
"""

from kata.cli import anywhere, instructor, learner  # noqa: F401  (each registers its commands)
from kata.cli.group import cli

__all__ = ["cli", "main"]


def main() -> None:
    cli(prog_name="kata")
