"""The learner's commands: each opens a Session, calls it, and prints what it returns."""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from kata.cli.group import (
    budget_option,
    cli,
    cold_option,
    course_path,
    echo_lines,
    output_errors,
    the_course,
    timeout_option,
)
from kata.course import CourseError, Exercise, lesson
from kata.diagnosis import torch_to_jax
from kata.learning.hints import all_hints
from kata.learning.session import (
    Checked,
    GradedExercise,
    GradingProgress,
    NoOriginal,
    Session,
)
from kata.learning.watching import Key, Saved, SaveWatcher, keys_without_enter
from kata.reporting import formats, outputs, report
from kata.reporting.intake import mark_stubs_as_given, relative_to_upload
from kata.reporting.preflight import preflight
from kata.results import SECONDS_PER_EXERCISE, CheckResult, ExerciseResult, Limits


def _session(
    cold: bool = False, *, grades: bool = True, writes: tuple[Path | None, ...] = ()
) -> Session:
    """The learner's session; for a command that `grades`, refused (one line, exit 2)
    unless it passes the pre-flight (kata.reporting.preflight), the files it `writes`
    included."""
    session = Session.open(course_path(), cold=cold)
    if grades:
        preflight(writes=writes, state_dir=session.course.state_dir)
    if session.progress.warning:
        click.echo(click.style(f"kata: {session.progress.warning}", fg="yellow"), err=True)
    notice = session.unconfined_notice()
    if notice:
        click.echo(click.style(f"kata: {notice}", dim=True), err=True)
    return session


def _announce_regrading(stale: list[Exercise]) -> None:
    names = ", ".join(e.id for e in stale)
    click.echo(click.style(f"checking what changed since last time: {names}…", dim=True), err=True)


def _up_to_date(session: Session) -> dict[str, ExerciseResult]:
    return session.regrade_changed(announce=_announce_regrading)


verbose_option = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Explain every failing check in full, and show what each check measured.",
)


def _echo_result(
    session: Session, result: ExerciseResult, *, heading: bool = True, verbose: bool = False
) -> None:
    lines = report.exercise_lines(result, session.exercise_file(result.exercise), verbose=verbose)
    echo_lines(lines if heading else lines[1:])


def _introduce(session: Session, exercise: Exercise) -> None:
    path = session.exercise_file(exercise)
    exercises = session.course.exercises
    position = exercises.index(exercise) + 1
    click.echo(report.exercise_heading(exercise) + f"   [{position} of {len(exercises)}]")
    click.echo()
    text = lesson(path) or "(the lesson is the docstring at the top of the file)"
    for line in text.splitlines():
        click.echo(f"  {line}".rstrip())
    click.echo()
    click.echo(f"Open {click.style(report.display_path(path), bold=True)} and fix it. Its checks:")


def _echo_list(session: Session) -> None:
    echo_lines(report.exercise_list_lines(session.course.title, session.states()))


def _echo_hint(session: Session, exercise: Exercise) -> None:
    hint = session.next_hint(exercise)
    if hint is None:
        click.echo(f"{exercise.id} has no hints.")
        return
    click.echo(report.hint_line(hint))
    if hint.is_last and not hint.failure:
        which = f"the last hint for {hint.task}" if hint.task else "the last hint"
        click.echo(click.style(f"That was {which}; `kata hint --all` repeats them.", dim=True))


def _echo_well_done(checked: Checked) -> None:
    if not checked.newly_solved:
        return
    upcoming = checked.upcoming
    following = f"next up: `kata next` ({upcoming.id})" if upcoming else "that was the last one!"
    solved = ", ".join(e.id for e in checked.newly_solved)
    click.echo(click.style(f"Well done: {solved} solved; {following}", fg="green"))


@cli.command("list")
def list_exercises() -> int:
    """Every exercise in course order, with its state and your progress."""
    session = _session()
    _up_to_date(session)
    _echo_list(session)
    return 0


def _echo_finale(session: Session) -> None:
    course = session.course
    echo_lines(
        report.finale_lines(course.exercises, session.speedups(), session.rules(), course.mapping)
    )
    click.echo("Run `kata list` to see them, or `kata solution ID` to compare with ours.")


def _mapping_here() -> tuple[tuple[str, str], ...]:
    """The cheat sheet of the course (--course, or around the working folder); none
    outside a course."""
    try:
        return the_course().mapping
    except CourseError:
        return ()


@cli.command("rules")
@click.argument("term", required=False)
def rules(term: str | None) -> int:
    """The cheat sheet: each lesson's rule, and PyTorch → JAX; TERM searches every torch
    function, Tensor method and keyword (`kata rules view`)."""
    if term is not None:
        if not term.strip():
            raise click.UsageError("kata rules TERM: name a torch function, method or keyword")
        found = torch_to_jax.translations(_mapping_here(), term)
        echo_lines(report.translation_lines(term, found))
        return 0 if found else 1
    session = _session(grades=False)
    echo_lines(report.cheat_sheet_lines(session.rules(), session.course.mapping))
    return 0


@cli.command("next")
@verbose_option
def next_exercise(verbose: bool) -> int:
    """The first exercise not yet solved: its lesson, its file and its checks."""
    session = _session()
    regraded = _up_to_date(session)
    current = session.current()
    if current is None:
        _echo_finale(session)
        return 0
    _introduce(session, current)
    _echo_result(session, session.results_of(current, regraded), heading=False, verbose=verbose)
    click.echo()
    click.echo(
        f"Check it with `kata check {current.id}`, or `kata watch` to re-check on every save; "
        f"`kata hint {current.number}` gives a hint."
    )
    return 0


def _is_terminal() -> bool:
    """Whether what `kata check` prints goes to a terminal, where a line can be redrawn
    in place (the tests replace this)."""
    return sys.stdout.isatty()


class _LiveProgress:
    """A grading as it goes, on a terminal: a line redrawn in place naming the exercise
    being graded, its place, the checks done and failed so far and the check at hand;
    and, grading several exercises, each one's verdict in a line as the grading moves
    past it (a whole course takes 2-3 minutes cold, which printed nothing until the end).

    On stdout, with the report: the line is drawn and erased on the stream the verdicts go
    to, so no two buffers can reorder them, and one stream's being a terminal decides it
    (`kata check > file` gets the report alone, and `2> log` no carriage returns)."""

    def __init__(self, exercises: list[Exercise], each_exercise: bool) -> None:
        self.progress = GradingProgress(exercises)
        self.each_exercise = each_exercise
        self.started = time.monotonic()
        self.drawn = 0  # the width of the line on the screen now
        self.verdicts_shown = False
        first = exercises[0].id if exercises else ""
        self._draw(f"[1/{len(exercises)}] {first} · starting the checks…")

    def on_check(self, check: CheckResult) -> None:
        for graded in self.progress.seen(check):
            self._echo_verdict(graded)
        progress = self.progress
        elapsed = time.monotonic() - self.started
        self._draw(
            f"[{progress.position}/{len(progress.exercises)}] {check.exercise} · checks: "
            f"{progress.done} done, {progress.failed} failed · {elapsed:.0f} s · {check.name}"
        )

    def finish(self) -> None:
        """Once the grading has returned: the verdicts of the exercises not yet shown."""
        for graded in self.progress.finished():
            self._echo_verdict(graded)

    def close(self) -> None:
        """The line erased, and a blank line between the verdicts and the report."""
        self._erase()
        if self.verdicts_shown:
            click.echo()

    def _echo_verdict(self, graded: GradedExercise) -> None:
        if not self.each_exercise:
            return
        self._erase()
        counts = (
            f"{graded.passed} of {graded.started} checks passed"
            if graded.started
            else "no check ran (the report below says why)"
        )
        click.echo(f"{report.mark(graded.all_passed)} {graded.exercise.id}  {counts}")
        self.verdicts_shown = True

    def _draw(self, text: str) -> None:
        # One column short of the width: a line that fills it wraps on some terminals,
        # and a carriage return then redraws only its second half.
        text = text[: shutil.get_terminal_size((100, 24)).columns - 1]
        click.echo("\r" + text.ljust(self.drawn), nl=False)
        self.drawn = len(text)

    def _erase(self) -> None:
        if self.drawn:
            click.echo("\r" + " " * self.drawn + "\r", nl=False)
            self.drawn = 0


@contextlib.contextmanager
def _shown_as_graded(
    exercises: list[Exercise], output_format: str
) -> Iterator[Callable[[CheckResult], None] | None]:
    """The `on_check` that shows a grading as it goes (`_LiveProgress`): for a person's
    text on a terminal alone; None elsewhere, where nothing extra is printed."""
    if output_format != "text" or not _is_terminal():
        yield None
        return
    live = _LiveProgress(exercises, each_exercise=len(exercises) > 1)
    try:
        yield live.on_check
        live.finish()
    finally:  # stopped too (Ctrl-C): the line is erased before `kata: stopped`
        live.close()


def _echo_cold_notice(session: Session) -> None:
    """Why the grading was cold, where the session grades warm: the warm grader was still
    starting, or this grading started it (kata.servers.warm.WarmGrader.cold_notice)."""
    if session.cold_notice:
        click.echo(click.style(f"kata: {session.cold_notice}", dim=True), err=True)


@cli.command()
@click.argument("ids", nargs=-1)
@click.option("--solutions", is_flag=True, help="Grade solutions/ instead of exercises/.")
@click.option(
    "--dir",
    "folder",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Grade the NN_name.py files in this folder instead of exercises/.",
)
@timeout_option("Seconds one check may run before it is stopped.")
@budget_option(
    "Seconds the whole run may take, shared out so that every exercise gets a verdict "
    "(Gradescope's run_autograder passes one under the platform's limit). "
    f"Default: {SECONDS_PER_EXERCISE:g} s per exercise.",
    default=None,
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(formats.FORMATS),
    default="text",
    show_default=True,
    help="text for a person, json for a script, junit for CI, gradescope for results.json, "
    "classroom50 for Classroom 50's result.json.",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the --format output to this file instead of printing it.",
)
@click.option(
    "--summary",
    "summary_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also append a markdown table of exercises and points to this file "
    "(e.g. $GITHUB_STEP_SUMMARY).",
)
@cold_option
@verbose_option
def check(
    ids: tuple[str, ...],
    solutions: bool,
    folder: Path | None,
    timeout: float,
    budget: float | None,
    output_format: str,
    out_path: Path | None,
    summary_path: Path | None,
    cold: bool,
    verbose: bool,
) -> int:
    """Grade the named exercises (05_prng, 05, 5 or prng), or all of them."""
    if solutions and folder:
        raise click.UsageError("--solutions and --dir each choose what to grade; give one")
    if output_format == "text" and (out_path or summary_path):
        raise click.UsageError("--out and --summary need a --format, e.g. --format junit")
    session = _session(cold, writes=(out_path, summary_path))
    course = session.course
    exercises = course.resolve_all(ids)
    limits = Limits(check_seconds=timeout, run_seconds=budget)
    started = time.monotonic()
    checked = None
    with _shown_as_graded(exercises, output_format) as on_check:
        if solutions or folder:
            source = course.solutions_dir if solutions else folder
            grading = session.grade(exercises, source, limits, on_check)
        else:
            checked = session.check_own(exercises, limits, on_check)
            grading = checked.grading
    if output_format != "text":
        if folder:  # an upload (Classroom 50's, a student's): its paths as the student has them
            grading = relative_to_upload(grading, course)
        if not solutions:  # scored: a file that is its stub as given earns nothing
            mark_stubs_as_given(course, grading.results, folder or course.exercises_dir)
        rendered = formats.render(grading, output_format, time.monotonic() - started)
        with output_errors():
            if out_path:
                outputs.write_atomically(out_path, rendered)
            else:
                click.echo(rendered, nl=False)
            if summary_path:
                outputs.append_text(summary_path, formats.to_markdown_summary(grading))
        return 0 if grading.passed else 1
    echo_lines(report.platform_lines(grading))
    for result in grading.results:
        path = grading.source / result.exercise.filename
        echo_lines(report.exercise_lines(result, path, verbose=verbose))
    click.echo(report.summary_line(grading))
    _echo_cold_notice(session)
    if checked is not None:
        _echo_well_done(checked)
    return 0 if grading.passed else 1


@cli.command()
@click.argument("exercise_id", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every hint at once.")
def hint(exercise_id: str | None, show_all: bool) -> int:
    """The next hint for an exercise (default: the current one), each more concrete; for the
    first task your file leaves unsolved (it is checked first if it changed)."""
    session = _session()
    if show_all:
        for each in all_hints(_chosen_or_current(session, exercise_id)):
            about = f"{each.task} · hint" if each.task else "Hint"
            click.echo(f"{about} {each.number} of {each.total}: {each.text}")
        return 0
    named = None if exercise_id is None else session.course.resolve(exercise_id)
    exercise = session.hint_exercise(named, announce=_announce_regrading)
    if exercise is None:
        raise click.UsageError("every exercise is done; name one")
    _echo_hint(session, exercise)
    return 0


def _chosen_or_current(session: Session, text: str | None) -> Exercise:
    if text is not None:
        return session.course.resolve(text)
    current = session.current()
    if current is None:
        raise click.UsageError("every exercise is done; name one")
    return current


@cli.command()
@click.argument("exercise_id")
def reset(exercise_id: str) -> int:
    """Restore an exercise's original stub (your file is backed up under .kata/ first)."""
    session = _session(grades=False)
    exercise = session.course.resolve(exercise_id)
    try:
        backup = session.reset(exercise)
    except NoOriginal as error:
        raise click.ClickException(str(error)) from None
    if backup:
        click.echo(f"Your version is saved as {report.display_path(backup)}")
    click.echo(
        f"{report.display_path(session.exercise_file(exercise))} is the original stub again."
    )
    return 0


@cli.command()
@click.argument("exercise_id")
@click.option("--force", is_flag=True, help="Show it even though the exercise is unsolved.")
def solution(exercise_id: str, force: bool) -> int:
    """The reference solution, as a diff against your file (once you have solved it)."""
    session = _session()
    exercise = session.course.resolve(exercise_id)
    _up_to_date(session)
    if not force and not session.is_done(exercise):
        click.echo(
            f"{exercise.id} is not solved yet: solve it first (`kata check {exercise.id}`, "
            f"`kata hint {exercise.number}`), or pass --force to look anyway."
        )
        return 1
    mine = session.exercise_file(exercise)
    lines = report.solution_diff(mine, session.course.solutions_dir / exercise.filename)
    if not lines:
        click.echo(f"Your {exercise.filename} is identical to the reference solution.")
    echo_lines(lines)
    return 0


@cli.command()
@cold_option
@verbose_option
def watch(cold: bool, verbose: bool) -> int:
    """Re-check the current exercise on every save; move on when it passes."""
    session = _session(cold)
    regraded = _up_to_date(session)
    current = session.current()
    if current is None:
        click.echo("Every exercise is done; nothing to watch.")
        return 0
    with keys_without_enter() as keys:
        watcher = SaveWatcher(session.course.exercises_dir, keys=keys)
        try:
            controls = "keys: h hint · l list · q quit" if keys else "Ctrl-C to stop"
            click.echo(click.style(f"Watching exercises/ ({watcher.method}); {controls}", dim=True))
            _introduce(session, current)
            _echo_result(
                session, session.results_of(current, regraded), heading=False, verbose=verbose
            )
            while current is not None:
                event = watcher.wait()
                if watcher.note:
                    click.echo(click.style(f"kata: {watcher.note}", fg="yellow"), err=True)
                    watcher.note = None
                if event == Key("q"):
                    break
                if event == Key("h"):
                    _echo_hint(session, current)
                elif event == Key("l"):
                    _echo_list(session)
                elif isinstance(event, Saved) and session.changed_since_graded(current):
                    current = _recheck(session, current, verbose)
        except KeyboardInterrupt:
            pass
        finally:
            watcher.close()
    if current is None:
        _echo_finale(session)
    return 0


def _recheck(session: Session, current: Exercise, verbose: bool) -> Exercise | None:
    """Grade the current exercise after a save; introduce the next one once it passes."""
    click.echo(click.style(f"\nchecking {current.id}…", dim=True))
    checked = session.check_own([current])
    _echo_result(session, checked.grading.results[0], verbose=verbose)
    _echo_cold_notice(session)
    if not checked.passed or checked.upcoming is None:
        return current if not checked.passed else None
    click.echo()
    _introduce(session, checked.upcoming)
    _echo_result(session, session.results_of(checked.upcoming, {}), heading=False, verbose=verbose)
    return checked.upcoming
