"""The instructor's commands: grade a class, bundle for Gradescope, verify the course."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from kata.cli.group import (
    budget_option,
    cli,
    output_errors,
    the_course,
    the_course_to_grade,
    timeout_option,
)
from kata.instructor import gradebook, gradescope, shards, students, verify
from kata.isolation import container
from kata.reporting import report
from kata.reporting.preflight import preflight
from kata.results import SECONDS_PER_EXERCISE, Limits
from kata.supervisor import doctor, runner


def _parse_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    try:
        return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size like 4G or 512M") from None


def gradebook_options(command: Any) -> Any:
    """--out, --json, --report and --lms-csv: the class's gradebook, as grading or merging
    writes it."""
    for option in reversed(
        [
            click.option(
                "--out",
                type=click.Path(dir_okay=False, path_type=Path),
                default=Path("grades.csv"),
                show_default=True,
                help="The gradebook: a row per student, a column per exercise.",
            ),
            click.option(
                "--json",
                "json_path",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Also write every check's verdict and points to this JSON file.",
            ),
            click.option(
                "--report",
                "report_path",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Also write a class report: one self-contained HTML page of what the "
                "class got wrong.",
            ),
            click.option(
                "--lms-csv",
                "lms_path",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Also write the grades as Canvas's gradebook imports them (Grades > "
                "Import): the columns Student, ID, SIS User ID, SIS Login ID, Section, then "
                "one assignment per exercise, with a Points Possible row. A roster's name, "
                "student_id and email fill Student, SIS User ID and SIS Login ID.",
            ),
        ]
    ):
        command = option(command)
    return command


@cli.command("grade")
@click.argument(
    "submissions", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path)
)
@gradebook_options
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=os.cpu_count() or 1,
    show_default=True,
    help="Submissions graded at once.",
)
@click.option("--resume", is_flag=True, help="Keep --out's rows and grade only the rest.")
@click.option(
    "--roster",
    "roster_path",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="A CSV of the class: a header row naming `submission` (each student's folder or "
    ".zip name, without .zip, as the gradebook names them) and any of `student_id`, "
    "`name` and `email`, which reach the gradebook, its JSON, the report and --lms-csv. "
    "A submission not on it still grades, noted so; a student on it with no submission "
    "is listed as nothing submitted.",
)
@click.option(
    "--feedback",
    "feedback_dir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Write each student's feedback into this folder (made if missing): NAME.html, "
    "a page, and NAME.txt, with what `kata check` and `kata hint` would have told them, "
    "exercise by exercise, and nothing of anyone else's (with --resume: of those graded "
    "now).",
)
@timeout_option("Seconds one check may run.")
@click.option(
    "--submission-timeout",
    type=click.FloatRange(min=1),
    default=None,
    help=f"Seconds one submission's grading may run in all. Default: {SECONDS_PER_EXERCISE:g} s "
    "per exercise it holds.",
)
@budget_option(
    "Seconds the whole class may take: shared out so that every submission and every "
    "exercise gets a verdict and the gradebook is written in time.",
    default=None,
)
@click.option(
    "--shard",
    "shard_text",
    metavar="K/N|auto",
    help="Grade only shard K of N (a stable share of the submissions) into a partial "
    "gradebook for `kata grade-merge`; auto reads K and N from Slurm, a Kubernetes "
    "Indexed Job or KATA_SHARD_INDEX/KATA_SHARD_COUNT. Needs --json.",
)
@click.option(
    "--memory",
    default=None,
    metavar="SIZE",
    help="Memory cap per grading process, e.g. 4G; 0 for none (default: 6G on CPU).",
)
@click.option(
    "--unconfined",
    is_flag=True,
    help="Grade even where submissions cannot be confined (they run with your rights).",
)
@click.option(
    "--allow-missing-layers",
    is_flag=True,
    help="Grade even where a run's processes or memory cannot be contained (see `kata doctor`).",
)
def grade_command(
    submissions: tuple[Path, ...],
    out: Path,
    json_path: Path | None,
    report_path: Path | None,
    lms_path: Path | None,
    jobs: int,
    resume: bool,
    roster_path: Path | None,
    feedback_dir: Path | None,
    timeout: float,
    submission_timeout: float | None,
    budget: float | None,
    shard_text: str | None,
    memory: str | None,
    unconfined: bool,
    allow_missing_layers: bool,
) -> int:
    """Grade a class: each SUBMISSION a folder or .zip of a student's NN_name.py files.

    A student is named by their folder or .zip (alice for class/alice/ or alice.zip; two
    of one name are alice and alice-2), never by its path, in every file written.
    Each submission runs confined (Linux's Landlock): it may write only in its own
    working folder, reach no network and leave no process behind; see `kata doctor`.
    """
    roster = _roster(roster_path) if roster_path else None
    if feedback_dir:
        _make_folder(feedback_dir)
    writes = (out, json_path, report_path, lms_path, feedback_dir and feedback_dir / "x.html")
    course = the_course_to_grade(writes, confine=not unconfined)
    if out.exists() and not resume:
        raise click.UsageError(f"{out} exists: pass --resume to continue it, or remove it")
    try:
        shard = shards.parse_shard(shard_text) if shard_text else None
    except shards.ShardError as error:
        raise click.UsageError(str(error)) from None
    if shard and not json_path:
        raise click.UsageError(
            "--shard writes a partial gradebook that `kata grade-merge` reads: give --json FILE"
        )
    click.echo(container.summary(confined=not unconfined), err=True)
    exposed = runner.exposed_answers(course, confined=not unconfined)
    if exposed:
        raise click.UsageError(
            f"submissions could read the reference solutions in {exposed[0]}: "
            "grade where Landlock or mount namespaces are available, or move them away"
        )
    missing = [m for m in container.missing_protections(not unconfined) if m != "files"]
    if missing and not allow_missing_layers:
        raise click.UsageError(
            f"cannot contain submissions' {' and '.join(missing)} here (see `kata doctor`); "
            "pass --allow-missing-layers to grade anyway"
        )
    limits = Limits(check_seconds=timeout, run_seconds=submission_timeout, confined=not unconfined)
    if memory is not None:
        limits = dataclasses.replace(limits, memory_bytes=_parse_size(memory))
    with gradebook_errors():
        plan = gradebook.plan_class(course, list(submissions), out, json_path, shard, roster)
    which = f"shard {shard}: " if shard else ""
    click.echo(
        f"Grading {which}{report.counted(len(plan.todo), 'submission')} "
        f"({plan.already} already in {out}), {jobs} at a time…",
        err=True,
    )
    bar = report.ProgressBar(len(plan.todo), enabled=sys.stderr.isatty())
    try:
        with gradebook_errors():
            graded = gradebook.grade_class(
                course,
                plan,
                out=out,
                json_path=json_path,
                jobs=jobs,
                limits=limits,
                report_path=report_path,
                budget_seconds=budget,
                on_graded=lambda g: bar.advance(_graded_line(g)),
                lms_path=lms_path,
                feedback_dir=feedback_dir,
            )
    except KeyboardInterrupt as stop:
        bar.close()
        click.echo(f"Stopped: the rows graded so far are in {out}; `--resume` goes on.", err=True)
        return 128 + getattr(stop, "signum", signal.SIGINT)
    bar.close()
    written = ", ".join(str(p) for p in (json_path, report_path, lms_path, feedback_dir) if p)
    click.echo(
        f"Graded {report.counted(len(graded), 'submission')} into {out}"
        + (f" and {written}" if written else "")
    )
    return 0


def _roster(path: Path) -> students.Roster:
    """The roster at `path`; one that cannot be used is a usage error, in one line."""
    try:
        return students.read_roster(path)
    except students.RosterError as error:
        raise click.UsageError(str(error)) from None


def _make_folder(folder: Path) -> None:
    """`folder`, made if missing (its parent must exist); else a usage error, in one line."""
    try:
        folder.mkdir(exist_ok=True)
    except OSError as error:
        raise click.UsageError(f"cannot make the folder {folder}: {error.strerror}") from None


def _graded_line(graded: gradebook.GradedSubmission) -> str:
    """A submission's score, and what of its upload was not graded and why."""
    problems = graded.upload_problems()
    said = f" · {'; '.join(problems)}" if problems else ""
    return f"{graded.name}: {graded.total:g}/{graded.max_total:g}{said}"


@cli.command("grade-merge")
@click.argument(
    "partials",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@gradebook_options
def grade_merge_command(
    partials: tuple[Path, ...],
    out: Path,
    json_path: Path | None,
    report_path: Path | None,
    lms_path: Path | None,
) -> int:
    """Merge the JSON gradebooks of every `kata grade --shard K/N` into the class's
    gradebook, JSON and report, as one `kata grade` of the whole class writes them."""
    preflight(writes=(out, json_path, report_path, lms_path), grades=False)
    try:
        merged = shards.merge_partials(list(partials))
    except shards.ShardError as error:
        raise click.UsageError(str(error)) from None
    exercise_ids = merged.provenance["course"]["exercises"]
    rows = [gradebook.csv_row(entry, exercise_ids) for entry in merged.entries]
    with output_errors():
        gradebook.write_gradebook(
            merged.provenance,
            merged.entries,
            rows,
            out=out,
            json_path=json_path,
            report_path=report_path,
            lms_path=lms_path,
        )
    written = ", ".join(str(p) for p in (out, json_path, report_path, lms_path) if p)
    click.echo(
        f"Merged {report.counted(len(partials), 'shard')}, "
        f"{report.counted(len(merged.entries), 'submission')}, into {written}"
    )
    return 0


@contextlib.contextmanager
def gradebook_errors() -> Iterator[None]:
    """A gradebook that cannot be continued, or written: one line and exit 2."""
    try:
        with output_errors():
            yield
    except gradebook.GradebookError as error:
        raise click.UsageError(str(error)) from None


@cli.command("gradescope-bundle")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
def gradescope_bundle(out: Path) -> int:
    """Write a Gradescope autograder archive (setup.sh, run_autograder, checks, engine)."""
    course = the_course()
    if out.suffix != ".zip":
        raise click.UsageError(f"{out} should end in .zip, as Gradescope expects")
    names = gradescope.write_bundle(course, out)
    click.echo(f"Wrote {out} ({len(names)} files). Upload it as the autograder on Gradescope.")
    return 0


@cli.command("verify")
def verify_command() -> int:
    """Author check: every stub fails each task's checks; every solution passes them all."""
    course = the_course_to_grade()
    click.echo(f"Grading {len(course.exercises)} stubs and their solutions…")
    outcome = verify.verify_course(course)
    broken = {p.exercise for p in outcome.problems}
    for stub, reference in zip(outcome.stubs.results, outcome.solutions.results, strict=True):
        exercise = stub.exercise
        if exercise.id not in broken:
            tasks = len({c.task for c in stub.checks})
            click.echo(
                f"  {report.mark(True)} {exercise.id}: the stub fails all {tasks} "
                f"tasks, the solution passes {reference.passed_count} checks"
            )
        for problem in (p for p in outcome.problems if p.exercise == exercise.id):
            click.echo(
                f"  {report.mark(False)} "
                + click.style(f"{exercise.id}: {problem.message}", fg="red")
            )
    if outcome.passed:
        click.echo(click.style("The course is sound.", fg="green", bold=True))
        return 0
    click.echo(click.style(f"{len(outcome.problems)} problems.", fg="red", bold=True))
    return 1


@cli.command("doctor")
def doctor_command() -> int:
    """Python, JAX and device versions, and whether the course files are intact."""
    course = the_course()
    findings = doctor.examine(course)
    width = max(len(f.label) for f in findings)
    for finding in findings:
        value = finding.value if finding.ok else click.style(finding.value, fg="red")
        click.echo(f"  {finding.label:<{width}}  {value}")
    return 0 if all(f.ok for f in findings) else 1
