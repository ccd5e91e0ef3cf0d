"""The `kata` command group, its one-line usage errors, and the options commands share."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from kata import __version__
from kata.course import Course, CourseError, find_course
from kata.reporting import outputs
from kata.reporting.preflight import NotReady, preflight
from kata.results import Limits

# The modules that declare the commands, in the order a command is looked for: `kata
# check` imports the learner's commands alone, not the instructor's (gradebooks, Gradescope,
# shards, verify, doctor): 53 ms of every check (167 ms to find `check`, 220 ms with all).
COMMAND_MODULES = ("kata.cli.learner", "kata.cli.anywhere", "kata.cli.instructor")


class KataGroup(click.Group):
    """A click group whose usage errors are one line and exit 2, without a traceback, and
    whose commands are imported as they are asked for (`COMMAND_MODULES`)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        for module in COMMAND_MODULES:
            if cmd_name in self.commands:
                break
            importlib.import_module(module)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for module in COMMAND_MODULES:
            importlib.import_module(module)
        return super().list_commands(ctx)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as error:
            where = f" (see `{error.ctx.command_path} --help`)" if error.ctx else ""
            click.echo(f"kata: {error.format_message()}{where}", err=True)
            code = 2
        except (CourseError, NotReady) as error:
            click.echo(f"kata: {error}", err=True)
            code = 2
        except click.ClickException as error:
            click.echo(f"kata: {error.format_message()}", err=True)
            code = error.exit_code
        except click.Abort:
            click.echo("kata: stopped", err=True)
            code = 130
        if standalone_mode:
            sys.exit(code if isinstance(code, int) else 0)
        return code


@click.group(cls=KataGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kata")
@click.option(
    "--course",
    "course_path",
    type=click.Path(file_okay=False, path_type=Path),
    help="The course folder (default: the one containing the working folder).",
)
@click.pass_context
def cli(ctx: click.Context, course_path: Path | None) -> None:
    """kata: learn JAX by fixing small exercises, one concept at a time.

    Start with `kata next`.
    """
    ctx.obj = course_path


# Shared options ----------------------------------------------------------------------

cold_option = click.option(
    "--cold",
    is_flag=True,
    help="Grade in a new process and leave no warm grader running (also: KATA_COLD=1).",
)


def timeout_option(help_text: str) -> Any:
    return click.option(
        "--timeout",
        type=click.FloatRange(min=1),
        default=Limits.check_seconds,
        show_default=True,
        help=help_text,
    )


def budget_option(help_text: str, default: float | None) -> Any:
    return click.option(
        "--budget",
        type=click.FloatRange(min=1),
        default=default,
        show_default=default is not None,
        metavar="SECONDS",
        help=help_text,
    )


def course_path() -> Path | None:
    return click.get_current_context().find_root().obj


def the_course() -> Course:
    """The course chosen with --course, or the one around the working folder."""
    return find_course(course_path())


def the_course_to_grade(writes: tuple[Path | None, ...] = (), *, confine: bool = False) -> Course:
    """The course, once grading it here has passed the pre-flight (kata.reporting.preflight):
    what it `writes` can be written, the packages are in kata's ranges, and submissions can
    be confined where they must be."""
    course = the_course()
    preflight(writes=writes, state_dir=course.state_dir, confine=confine)
    return course


def echo_lines(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


@contextlib.contextmanager
def output_errors() -> Iterator[None]:
    """A file that cannot be written: one line and exit 2."""
    try:
        yield
    except outputs.OutputError as error:
        problem = click.ClickException(str(error))
        problem.exit_code = 2
        raise problem from None
