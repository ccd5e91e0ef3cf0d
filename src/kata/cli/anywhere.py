"""The commands that take the course out of this repository: `init`, `update`, `notebook`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

from kata import course_files
from kata.cli.group import cli, course_path, the_course
from kata.course import Course, CourseError, find_course
from kata.reporting import report


def _echo_written(written: course_files.Written) -> None:
    for label, names in (
        ("added", written.added),
        ("updated", written.updated),
        ("kept yours (it differs from the installed stub)", written.kept),
        ("new stub beside yours", written.new_stubs),
    ):
        if names:
            click.echo(f"  {label}: {', '.join(names)}")


@cli.command("init")
@click.argument(
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(course_files.DEFAULT_FOLDER),
)
def init_command(folder: Path) -> int:
    """Write a course folder to learn in (default ./kata-course): exercises, checks, README."""
    written = course_files.init_course(folder)
    shown = report.display_path(written.root)
    click.echo(f"Wrote the course to {shown} ({len(written.added)} files).")
    click.echo(f"Start with: cd {shown} && kata next")
    return 0


@cli.command("update")
@click.option(
    "--new-stubs",
    is_flag=True,
    help="Write the new stub beside each exercise file you changed, as NN_name.new.py.",
)
def update_command(new_stubs: bool) -> int:
    """Bring this course folder up to the installed kata: checks, manifest, new exercises."""
    written = course_files.update_course(the_course(), new_stubs=new_stubs)
    if not (written.added or written.updated or written.new_stubs):
        click.echo(f"{report.display_path(written.root)} is up to date with this kata.")
    else:
        click.echo(f"Updated {report.display_path(written.root)}:")
    _echo_written(written)
    if written.kept and not new_stubs:
        click.echo("Your exercise files were kept; `kata update --new-stubs` shows the new stubs.")
    return 0


def _course_or_shipped() -> Course:
    try:
        return find_course(course_path())
    except CourseError:
        return course_files.shipped_course()


@cli.command("notebook")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("kata-course.ipynb"),
    show_default=True,
    help="The notebook to write; an existing one is never replaced.",
)
def notebook_command(out: Path) -> int:
    """Write the course as a Jupyter notebook: lessons, hints, a %%kata cell per exercise."""
    if out.exists():
        raise click.UsageError(f"{out} exists: choose another --out, or remove it first")
    if importlib.util.find_spec("nbformat") is None:
        raise click.UsageError("kata notebook needs nbformat: pip install 'kata-jax[notebook]'")
    from kata import notebook  # imports nbformat only when writing

    notebook.write_course_notebook(_course_or_shipped(), out)
    click.echo(f"Wrote {report.display_path(out)}: open it in Jupyter or Colab and run it.")
    return 0
