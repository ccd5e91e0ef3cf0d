"""The `kata` command line: parses arguments, calls the library, prints what it says.

`group` holds the command group and the options commands share; `learner` the learner's
commands (each opens a kata.learning.session.Session); `anywhere` those that take the
course out of the repository; `instructor` the instructor's. A command's module is
imported when the command is asked for (`group.COMMAND_MODULES`).
Exit codes: 0 success (all checks passed), 1 some check failed, 2 usage error (unknown
exercise, no course found, bad option). Usage errors are one line on stderr.
"""

from kata.cli.group import cli  # the commands are imported as they are asked for
from kata.quick_exit import end_now

__all__ = ["cli", "main"]


def main() -> None:
    try:
        cli(prog_name="kata")
    except SystemExit as done:
        # click ends every command so, its files closed: the rest is the interpreter's
        # shutdown (kata.quick_exit). A message instead of a code is Python's to print.
        if done.code is not None and not isinstance(done.code, int):
            raise
        end_now(done.code or 0)
