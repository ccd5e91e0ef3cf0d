"""The `kata` command line: parses arguments, calls the library, prints what it says.

Exit codes: 0 success (all checks passed), 1 some check failed, 2 usage error (unknown
exercise, no course found, bad option). Usage errors are one line on stderr.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from kata import (
    __version__,
    bundle,
    confinement,
    course,
    doctor,
    formats,
    gradebook,
    processes,
    progress,
    report,
    runner,
    verify,
    watching,
)
from kata.course import Course, CourseError, Exercise


class KataGroup(click.Group):
    """A click group whose usage errors are one line and exit 2, without a traceback."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as error:
            where = f" (see `{error.ctx.command_path} --help`)" if error.ctx else ""
            click.echo(f"kata: {error.format_message()}{where}", err=True)
            code = 2
        except CourseError as error:
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


def _course() -> Course:
    return course.find_course(click.get_current_context().find_root().obj)


def _progress(the_course: Course) -> progress.Progress:
    state = progress.load_progress(the_course)
    if state.warning:
        click.echo(click.style(f"kata: {state.warning}", fg="yellow"), err=True)
    return state


def _echo_lines(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


def _grade(
    the_course: Course,
    exercises: list[Exercise],
    source: Path,
    limits: runner.Limits,
    *,
    cold: bool,
) -> runner.Grading:
    """Grade on the course's warm grader (kata.worker), which the first run starts; with
    `cold`, every run in a new process and no warm grader left running."""
    _note_unconfined(the_course)
    if cold:
        return runner.grade(the_course, exercises, source, limits)
    env = processes.grading_environment(the_course.state_dir)
    with processes.warm_grader(the_course.root, env) as worker:
        return runner.grade(the_course, exercises, source, limits, worker=worker)


UNCONFINED_NOTED = "unconfined-noted"


def _note_unconfined(the_course: Course) -> None:
    """Say once per course, where code cannot be confined here, that checks run without it."""
    reason = confinement.unavailable_reason()
    marker = the_course.state_dir / UNCONFINED_NOTED
    if reason is None or marker.exists():
        return
    click.echo(
        click.style(f"kata: checks run unconfined here, with your rights ({reason})", dim=True),
        err=True,
    )
    try:
        the_course.state_dir.mkdir(exist_ok=True)
        marker.touch()
    except OSError:  # a read-only course: say it again next time
        pass


def _regrade_changed(
    the_course: Course, state: progress.Progress, *, cold: bool
) -> dict[str, runner.ExerciseResult]:
    """Bring recorded verdicts up to date with files edited since they were graded; the
    results graded, by exercise id."""
    stale = progress.needs_grading(the_course, state)
    if not stale:
        return {}
    names = ", ".join(e.id for e in stale)
    click.echo(click.style(f"checking what changed since last time: {names}…", dim=True), err=True)
    grading = _grade_own(the_course, state, stale, runner.DEFAULT_LIMITS, cold=cold)
    return {result.exercise.id: result for result in grading.results}


def _echo_current_checks(
    the_course: Course,
    state: progress.Progress,
    current: Exercise,
    regraded: dict[str, runner.ExerciseResult],
    *,
    cold: bool,
) -> None:
    """The current exercise's checks, graded now unless `_regrade_changed` just did."""
    if current.id in regraded:
        lines = report.exercise_lines(
            regraded[current.id], the_course.exercises_dir / current.filename
        )
        _echo_lines(lines[1:])
    else:
        exercises_dir = the_course.exercises_dir
        _check(the_course, state, [current], exercises_dir, True, heading=False, cold=cold)


def _grade_own(
    the_course: Course,
    state: progress.Progress,
    exercises: list[Exercise],
    limits: runner.Limits,
    *,
    cold: bool,
) -> runner.Grading:
    """Grade the learner's own files, recording each verdict against the content graded."""
    graded_content = progress.digests(the_course, exercises)
    grading = _grade(the_course, exercises, the_course.exercises_dir, limits, cold=cold)
    for result in grading.results:
        exercise = result.exercise
        progress.record_result(state, exercise, result.passed, graded_content[exercise.id])
    state.save()
    return grading


@cli.command("list")
def list_exercises() -> int:
    """Every exercise in course order, with its state and your progress."""
    the_course = _course()
    state = _progress(the_course)
    _regrade_changed(the_course, state, cold=False)
    _echo_list(the_course, state)
    return 0


def _echo_list(the_course: Course, state: progress.Progress) -> None:
    rows = progress.states(the_course, state)
    done = sum(row_state == progress.DONE for _, row_state in rows)
    click.echo(click.style(f"{the_course.title}: {done} of {len(rows)} done", bold=True))
    width = max(len(e.id) for e, _ in rows)
    for exercise, row_state in rows:
        click.echo(f"  {report.state_mark(row_state)}  {exercise.id:<{width}}  {exercise.title}")


@cli.command("next")
def next_exercise() -> int:
    """The first exercise not yet solved: its lesson, its file and its checks."""
    the_course = _course()
    state = _progress(the_course)
    regraded = _regrade_changed(the_course, state, cold=False)
    current = progress.current_exercise(the_course, state)
    if current is None:
        count = len(the_course.exercises)
        click.echo(click.style(f"All {count} exercises done. You know JAX now.", fg="green"))
        click.echo("Run `kata list` to see them, or `kata solution ID` to compare with ours.")
        return 0
    _introduce(the_course, current)
    _echo_current_checks(the_course, state, current, regraded, cold=False)
    click.echo()
    click.echo(
        f"Check it with `kata check {current.id}`, or `kata watch` to re-check on every save; "
        f"`kata hint {current.number}` gives a hint."
    )
    return 0


def _introduce(the_course: Course, exercise: Exercise) -> None:
    path = the_course.exercises_dir / exercise.filename
    position = the_course.exercises.index(exercise) + 1
    click.echo(
        report.exercise_heading(exercise) + f"   [{position} of {len(the_course.exercises)}]"
    )
    click.echo()
    text = course.lesson(path) or "(the lesson is the docstring at the top of the file)"
    for line in text.splitlines():
        click.echo(f"  {line}".rstrip())
    click.echo()
    click.echo(f"Open {click.style(report.display_path(path), bold=True)} and fix it. Its checks:")


def _check(
    the_course: Course,
    state: progress.Progress | None,
    exercises: list[Exercise],
    source: Path,
    progress_recorded: bool,
    limits: runner.Limits = runner.DEFAULT_LIMITS,
    heading: bool = True,
    *,
    cold: bool,
) -> runner.Grading:
    if progress_recorded and state is not None:
        grading = _grade_own(the_course, state, exercises, limits, cold=cold)
    else:
        grading = _grade(the_course, exercises, source, limits, cold=cold)
    for result in grading.results:
        lines = report.exercise_lines(result, source / result.exercise.filename)
        _echo_lines(lines if heading else lines[1:])
    return grading


@cli.command()
@click.argument("ids", nargs=-1)
@click.option("--solutions", is_flag=True, help="Grade solutions/ instead of exercises/.")
@click.option(
    "--dir",
    "folder",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Grade the NN_name.py files in this folder instead of exercises/.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=runner.Limits.check_seconds,
    show_default=True,
    help="Seconds one check may run before it is stopped.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "junit", "gradescope"]),
    default="text",
    show_default=True,
    help="text for a person, json for a script, junit for CI, gradescope for results.json.",
)
@click.option(
    "--cold",
    is_flag=True,
    help="Grade in a new process and leave no warm grader running (also: KATA_COLD=1).",
)
def check(
    ids: tuple[str, ...],
    solutions: bool,
    folder: Path | None,
    timeout: float,
    output_format: str,
    cold: bool,
) -> int:
    """Grade the named exercises (05_prng, 05, 5 or prng), or all of them."""
    if solutions and folder:
        raise click.UsageError("--solutions and --dir each choose what to grade; give one")
    the_course = _course()
    exercises = the_course.resolve_all(ids)
    own_work = not solutions and folder is None
    source = the_course.solutions_dir if solutions else (folder or the_course.exercises_dir)
    limits = runner.Limits(check_seconds=timeout)
    if output_format != "text":
        started = time.monotonic()
        grading = _grade(the_course, exercises, source, limits, cold=cold)
        click.echo(_render(grading, output_format, time.monotonic() - started), nl=False)
        return 0 if grading.passed else 1
    state = _progress(the_course) if own_work else None
    before = {e.id for e in exercises if state and progress.is_done(the_course, state, e)}
    grading = _check(the_course, state, exercises, source, own_work, limits, cold=cold)
    click.echo(report.summary_line(grading))
    newly_done = [r.exercise for r in grading.results if r.passed and r.exercise.id not in before]
    if own_work and newly_done and state is not None:
        upcoming = progress.current_exercise(the_course, state)
        following = (
            f"next up: `kata next` ({upcoming.id})" if upcoming else "that was the last one!"
        )
        solved = ", ".join(e.id for e in newly_done)
        click.echo(click.style(f"Well done: {solved} solved; {following}", fg="green"))
    return 0 if grading.passed else 1


def _render(grading: runner.Grading, output_format: str, seconds: float) -> str:
    if output_format == "junit":
        return formats.to_junit(grading)
    document = (
        formats.to_json(grading)
        if output_format == "json"
        else formats.to_gradescope(grading, seconds)
    )
    return json.dumps(document, indent=2) + "\n"


@cli.command()
@click.argument("exercise_id", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every hint at once.")
def hint(exercise_id: str | None, show_all: bool) -> int:
    """The next hint for an exercise (default: the current one), each more concrete."""
    the_course = _course()
    state = _progress(the_course)
    exercise = _chosen_or_current(the_course, state, exercise_id)
    hints = exercise.hints
    if show_all:
        for number, text in enumerate(hints, 1):
            click.echo(f"Hint {number} of {len(hints)}: {text}")
        return 0
    _echo_next_hint(state, exercise)
    return 0


def _echo_next_hint(state: progress.Progress, exercise: Exercise) -> None:
    hints = exercise.hints
    if not hints:
        click.echo(f"{exercise.id} has no hints.")
        return
    number = min(state.hints_shown.get(exercise.id, 0), len(hints) - 1) + 1
    click.echo(f"{exercise.id} · hint {number} of {len(hints)}: {hints[number - 1]}")
    if number == len(hints):
        click.echo(click.style("That was the last hint; `kata hint --all` repeats them.", dim=True))
    state.hints_shown[exercise.id] = number
    state.save()


def _chosen_or_current(the_course: Course, state: progress.Progress, text: str | None) -> Exercise:
    if text is not None:
        return the_course.resolve(text)
    current = progress.current_exercise(the_course, state)
    if current is None:
        raise click.UsageError("every exercise is done; name one")
    return current


@cli.command()
@click.argument("exercise_id")
def reset(exercise_id: str) -> int:
    """Restore an exercise's original stub (your file is backed up under .kata/ first)."""
    the_course = _course()
    exercise = the_course.resolve(exercise_id)
    original = course.original_stub(the_course, exercise)
    if original is None:
        raise click.ClickException(
            f"cannot find the original {exercise.filename}: the course is not a git clone"
        )
    path = the_course.exercises_dir / exercise.filename
    backup = progress.back_up(the_course, path)
    path.write_text(original, encoding="utf-8")
    if backup:
        click.echo(f"Your version is saved as {report.display_path(backup)}")
    click.echo(f"{report.display_path(path)} is the original stub again.")
    return 0


@cli.command()
@click.argument("exercise_id")
@click.option("--force", is_flag=True, help="Show it even though the exercise is unsolved.")
def solution(exercise_id: str, force: bool) -> int:
    """The reference solution, as a diff against your file (once you have solved it)."""
    the_course = _course()
    state = _progress(the_course)
    exercise = the_course.resolve(exercise_id)
    _regrade_changed(the_course, state, cold=False)
    if not force and not progress.is_done(the_course, state, exercise):
        click.echo(
            f"{exercise.id} is not solved yet: solve it first (`kata check {exercise.id}`, "
            f"`kata hint {exercise.number}`), or pass --force to look anyway."
        )
        return 1
    mine = the_course.exercises_dir / exercise.filename
    theirs = the_course.solutions_dir / exercise.filename
    lines = report.solution_diff(mine, theirs)
    if not lines:
        click.echo(f"Your {exercise.filename} is identical to the reference solution.")
    _echo_lines(lines)
    return 0


@cli.command()
@click.option(
    "--cold",
    is_flag=True,
    help="Grade each save in a new process; leave no warm grader running (also: KATA_COLD=1).",
)
def watch(cold: bool) -> int:
    """Re-check the current exercise on every save; move on when it passes."""
    the_course = _course()
    state = _progress(the_course)
    regraded = _regrade_changed(the_course, state, cold=cold)
    current = progress.current_exercise(the_course, state)
    if current is None:
        click.echo("Every exercise is done; nothing to watch.")
        return 0
    with watching.keys_without_enter() as keys:
        watcher = watching.SaveWatcher(the_course.exercises_dir, keys=keys)
        try:
            controls = "keys: h hint · l list · q quit" if keys else "Ctrl-C to stop"
            click.echo(click.style(f"Watching exercises/ ({watcher.method}); {controls}", dim=True))
            _introduce(the_course, current)
            _echo_current_checks(the_course, state, current, regraded, cold=cold)
            while current is not None:
                event = watcher.wait()
                if watcher.note:
                    click.echo(click.style(f"kata: {watcher.note}", fg="yellow"), err=True)
                    watcher.note = None
                if event in ("key:q", "key:Q"):
                    break
                if event in ("key:h", "key:H"):
                    _echo_next_hint(state, current)
                elif event in ("key:l", "key:L"):
                    _echo_list(the_course, state)
                elif (
                    event and not event.startswith("key:") and _changed(the_course, state, current)
                ):
                    current = _recheck(the_course, state, current, cold)
        except KeyboardInterrupt:
            pass
        finally:
            watcher.close()
    if current is None:
        click.echo(click.style("Every exercise is done. You know JAX now.", fg="green"))
    return 0


def _changed(the_course: Course, state: progress.Progress, exercise: Exercise) -> bool:
    """Whether the file differs from the one last graded (editors save in several steps)."""
    return progress.needs_grading(the_course, state, [exercise]) == [exercise]


def _recheck(
    the_course: Course, state: progress.Progress, current: Exercise, cold: bool
) -> Exercise | None:
    """Grade the current exercise after a save; introduce the next one once it passes."""
    click.echo(click.style(f"\nchecking {current.id}…", dim=True))
    grading = _check(the_course, state, [current], the_course.exercises_dir, True, cold=cold)
    if not grading.passed:
        return current
    upcoming = progress.current_exercise(the_course, state)
    if upcoming is not None:
        click.echo()
        _introduce(the_course, upcoming)
        _check(
            the_course, state, [upcoming], the_course.exercises_dir, True, heading=False, cold=cold
        )
    return upcoming


def _parse_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    try:
        return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size like 4G or 512M") from None


@cli.command("grade")
@click.argument(
    "submissions", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path)
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("grades.csv"),
    show_default=True,
    help="The gradebook: a row per submission, a column per exercise.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write every check's verdict and points to this JSON file.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=os.cpu_count() or 1,
    show_default=True,
    help="Submissions graded at once.",
)
@click.option("--resume", is_flag=True, help="Keep --out's rows and grade only the rest.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=runner.Limits.check_seconds,
    show_default=True,
    help="Seconds one check may run.",
)
@click.option(
    "--submission-timeout",
    type=click.FloatRange(min=1),
    default=runner.Limits.run_seconds,
    show_default=True,
    help="Seconds one submission's grading may run in all.",
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
def grade_command(
    submissions: tuple[Path, ...],
    out: Path,
    json_path: Path | None,
    jobs: int,
    resume: bool,
    timeout: float,
    submission_timeout: float,
    memory: str | None,
    unconfined: bool,
) -> int:
    """Grade a class: each SUBMISSION a folder or .zip of a student's NN_name.py files.

    Each submission runs confined (Linux's Landlock): it may write only in its own
    working folder, reach no network and leave no process behind; see `kata doctor`.
    """
    the_course = _course()
    if out.exists() and not resume:
        raise click.UsageError(f"{out} exists: pass --resume to continue it, or remove it")
    reason = confinement.unavailable_reason()
    if reason and not unconfined:
        click.echo(
            f"kata: cannot confine submissions: {reason}; pass --unconfined to grade them "
            "with your own rights anyway",
            err=True,
        )
        return 2
    limits = runner.Limits(
        check_seconds=timeout, run_seconds=submission_timeout, confined=not unconfined
    )
    if memory is not None:
        limits = dataclasses.replace(limits, memory_bytes=_parse_size(memory))
    paths = list(submissions)
    todo = len(paths) - len(
        gradebook.graded_names(out) & {gradebook.submission_name(p) for p in paths}
    )
    click.echo(
        f"Grading {todo} submissions ({len(paths) - todo} already in {out}), {jobs} at a time…",
        err=True,
    )
    bar = report.ProgressBar(todo, enabled=sys.stderr.isatty())
    try:
        graded = gradebook.grade_class(
            the_course,
            paths,
            out=out,
            json_path=json_path,
            jobs=jobs,
            limits=limits,
            on_graded=lambda g: bar.advance(f"{g.name}: {g.total:g}/{g.max_total:g}"),
        )
    except KeyboardInterrupt:
        bar.close()
        click.echo(
            f"Interrupted: the rows graded so far are in {out}; `--resume` goes on.", err=True
        )
        return 130
    bar.close()
    click.echo(
        f"Graded {len(graded)} submissions into {out}" + (f" and {json_path}" if json_path else "")
    )
    return 0


@cli.command("gradescope-bundle")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
def gradescope_bundle(out: Path) -> int:
    """Write a Gradescope autograder archive (setup.sh, run_autograder, checks, engine)."""
    the_course = _course()
    if out.suffix != ".zip":
        raise click.UsageError(f"{out} should end in .zip, as Gradescope expects")
    names = bundle.write_bundle(the_course, out)
    click.echo(f"Wrote {out} ({len(names)} files). Upload it as the autograder on Gradescope.")
    return 0


@cli.command("verify")
def verify_command() -> int:
    """Author check: every stub fails each task's checks; every solution passes them all."""
    the_course = _course()
    click.echo(f"Grading {len(the_course.exercises)} stubs and their solutions…")
    outcome = verify.verify_course(the_course)
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
    the_course = _course()
    findings = doctor.examine(the_course)
    width = max(len(f.label) for f in findings)
    for finding in findings:
        value = finding.value if finding.ok else click.style(finding.value, fg="red")
        click.echo(f"  {finding.label:<{width}}  {value}")
    return 0 if all(f.ok for f in findings) else 1


def main() -> None:
    cli(prog_name="kata")
