"""The course in Jupyter or Colab: the `%kata` / `%%kata` magics and the same as functions.

`%load_ext kata`, then a cell starting `%%kata 05_prng` writes the cell's code to the
learner's `exercises/05_prng.py` (keeping code written there outside the notebook:
kata.notebook.cell_files) and grades it with the engine every front-end uses (a Session: a
time-limited child process, warm or cold; a warm grader started here ends with the
kernel), so `kata list` and the progress see it; the verdict shows as HTML (✓/✗ per
check, the diagnosis, the speedup) with a plain-text fallback, in place of the line that
said which check runs. `%kata next`, `%kata hint [ID]`, `%kata list` and
`%kata rules [NAME]` do what the commands do (a bare `%kata hint` answers for the cell this
kernel checked last, while it is unsolved); `%%kata ID -v` explains every failing check.
Magics do not work in every front-end: `check("05_prng", source=...)` is the same as a
function.

Nothing here prompts or waits for keys (a notebook has no terminal), and nothing imports
IPython: the magics are registered on the shell IPython hands to `load_ipython_extension`.
`write_course_notebook` imports nbformat (the `notebook` extra) when it is called.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kata import course_files
from kata.course import Course, CourseError, Exercise, find_course, lesson, original_stub
from kata.diagnosis import torch_to_jax
from kata.learning.session import Checked, Session
from kata.notebook.cell_files import save_cell
from kata.reporting import report
from kata.reporting.preflight import NotReady, preflight
from kata.results import CheckResult, ExerciseResult, Limits, Outcome
from kata.servers import warm

MAGIC = "kata"
USAGE = (
    "usage: `%%kata ID [--timeout S] [--cold] [-v]` over your code, "
    "or `%kata next`, `%kata hint [ID]`, `%kata list`, `%kata rules [NAME]`"
)
# Where inline code (`x.at[i].set(v)`) stands in a verdict, a hint or a lesson.
INLINE_CODE = re.compile(r"`([^`\n]+)`")
# The exercise of the cell last checked in this kernel, by course folder: what a bare
# `%kata hint` answers for (`hint`).
LAST_CHECKED: dict[Path, str] = {}


# Where the course is -----------------------------------------------------------------


def notebook_course(folder: Path | None = None) -> Course:
    """The course at `folder`, else the one around the working folder (or $KATA_COURSE),
    else `./kata-course`, written by `kata init` the first time (and said so)."""
    if folder is not None:
        return find_course(folder)
    try:
        return find_course()
    except CourseError:
        pass
    folder = Path.cwd() / course_files.DEFAULT_FOLDER
    if not (folder / "course.toml").is_file():
        course_files.init_course(folder)
        print(f"kata: wrote your course folder to {folder}; your cells are saved there.")
    return find_course(folder)


# What a cell shows -------------------------------------------------------------------


class Shown:
    """Text for the notebook: plain, and as HTML that keeps its layout."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text)

    def _repr_html_(self) -> str:
        return f"<pre>{_md(self.text)}</pre>"


@dataclass(frozen=True)
class Result:
    """A `%%kata` cell's verdict: one exercise graded and recorded."""

    checked: Checked
    path: Path  # the learner's file the cell was saved to
    verbose: bool = False  # every failing check explained, not the first of each task
    # The cell's line of the file's first line: 1 under a `%%kata` line (IPython hands the
    # cell over without it), 0 for source given to check().
    cell_offset: int | None = None
    # What saving the cell did that the learner did not ask for (kata.notebook.cell_files).
    notice: str | None = None
    # Already shown under the cell, where its progress line was: not shown again.
    shown_in_place: bool = False

    @property
    def exercise(self) -> Exercise:
        return self.outcome.exercise

    @property
    def outcome(self) -> ExerciseResult:
        return self._in_cell_lines(self.checked.grading.results[0])

    @property
    def passed(self) -> bool:
        return self.checked.passed

    def _in_cell_lines(self, result: ExerciseResult) -> ExerciseResult:
        """The result with each failing line numbered as the cell shows it."""
        if self.cell_offset is None:
            return result
        checks = [
            dataclasses.replace(
                check,
                location={
                    **check.location,
                    "place": f"cell line {check.location['line'] + self.cell_offset}",
                },
            )
            if check.location and Path(check.location["file"]).name == self.path.name
            else check
            for check in result.checks
        ]
        return dataclasses.replace(result, checks=checks)

    def _lines(self) -> list[str]:
        lines = [self.notice] if self.notice else []
        lines += report.platform_lines(self.checked.grading)
        lines += report.exercise_lines(self.outcome, self.path, verbose=self.verbose)
        lines.append(report.summary_line(self.checked.grading))
        if self.checked.newly_solved:
            lines.append(_well_done(self.checked))
        return [click.unstyle(line) for line in lines]

    def __repr__(self) -> str:
        return "\n".join(self._lines())

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def _ipython_display_(self) -> None:
        """IPython shows a cell's value through this: a verdict already shown in place of
        the cell's progress line is not shown twice."""
        if not self.shown_in_place:
            from IPython.display import display  # only ever called by a running IPython

            display(self.bundle(), raw=True)

    def bundle(self) -> dict[str, str]:
        """The verdict as IPython's displays take it: plain text and HTML."""
        return {"text/plain": repr(self), "text/html": self._repr_html_()}

    def _repr_html_(self) -> str:
        outcome = self.outcome
        mark, colour = ("✓", "green") if self.passed else ("✗", "crimson")
        exercise = outcome.exercise
        parts = [f"<p>{_e(self.notice)}</p>"] if self.notice else []
        parts.append(
            f'<div class="kata-result"><p><b style="color:{colour}">{mark}</b> '
            f"<b>{_e(exercise.id)} · {_e(exercise.title)}</b>: "
            f"{outcome.passed_count} of {len(outcome.checks)} checks passed "
            f"<small>(saved as <code>{_e(report.display_path(self.path))}</code>)</small></p>"
        )
        platform_lines = report.platform_lines(self.checked.grading)
        parts += [f"<p><small>{_e(click.unstyle(line))}</small></p>" for line in platform_lines]
        if outcome.problem is not None:
            parts.append(f"<pre>{_e(outcome.problem)}</pre>")
        parts.append('<ul style="list-style:none;padding-left:1em">')
        explained: set[str | None] = set()
        folded = 0
        for check in outcome.checks:
            in_full = check.passed or self.verbose or check.task not in explained
            parts.append(_check_html(check, in_full))
            if not check.passed:
                folded += not in_full
                explained.add(check.task)
        parts.append("</ul>")
        if folded:
            parts.append(
                f"<p><small>({folded} later failures of a task cut to one line; "
                f"<code>%%kata {_e(exercise.id)} -v</code> explains every one)</small></p>"
            )
        speed = report.reference_speed_lines(outcome)
        if speed:
            parts.append(f"<p><small>{'<br>'.join(_md(line) for line in speed)}</small></p>")
        if self.checked.newly_solved:
            parts.append(f'<p style="color:green">{_e(_well_done(self.checked))}</p>')
        return "".join(parts) + "</div>"


def _e(text: str) -> str:
    return html.escape(text, quote=False)


def _md(text: str) -> str:
    """Escaped, with `inline code` shown as code."""
    return INLINE_CODE.sub(r"<code>\1</code>", _e(text))


def _check_html(check: CheckResult, in_full: bool = True) -> str:
    mark, colour = ("✓", "green") if check.passed else ("✗", "crimson")
    if check.outcome == Outcome.SKIPPED:
        mark, colour = "•", "gray"
    label = "" if check.outcome in (Outcome.PASSED, Outcome.FAILED) else f" [{check.outcome}]"
    item = f'<li><b style="color:{colour}">{mark}</b> {_e(check.name)}{_e(label)}'
    item += "".join(f"<br><small>{_md(note)}</small>" for note in check.notes)
    message = check.message.strip()
    if not in_full:
        first = message.splitlines()[0] if message else ""
        return item + (f": <small>{_e(first[:160])}</small>" if first else "") + "</li>"
    if not check.passed and message:
        item += f"<pre>{_e(message[:2000])}</pre>"
    if not check.passed and check.location:
        item += f"<p><small>at <code>{_e(report.location_text(check.location))}</code></small></p>"
    if check.diagnosis:
        item += f"<p><b>why:</b> {_md(check.diagnosis['cause'])}<br>"
        item += f"<b>fix:</b> {_md(check.diagnosis['fix'])}</p>"
    if not check.passed and check.output.strip():
        item += f"<details><summary>your code printed</summary><pre>{_e(check.output)}</pre>"
        item += "</details>"
    return item + "</li>"


class _Progress:
    """A line under a running cell: which check runs, how many are done, then the verdict
    in its place (left empty, it showed as a blank output above the verdict). Shown only
    in a running IPython (already imported by it: nothing here imports IPython), else
    silent."""

    def __init__(self, exercise: Exercise) -> None:
        self.exercise, self.done, self.failed = exercise, 0, 0
        self.handle = None
        shell = sys.modules.get("IPython")
        if shell is not None and shell.get_ipython() is not None:
            from IPython.display import display

            self.handle = display(Shown(f"grading {exercise.id}…"), display_id=True)

    def __call__(self, check: CheckResult) -> None:
        if self.handle is None:
            return
        if check.outcome == Outcome.NOT_RUN:
            started = time.strftime("%H:%M:%S")
            text = f"running: {check.name} (since {started})"
        else:
            self.done += 1
            self.failed += not check.passed
            text = f"finished: {check.name}: {check.outcome}"
        counts = f"{self.done} checks done, {self.failed} failing"
        self.handle.update(Shown(f"grading {self.exercise.id} · {counts} · {text}"))

    def stopped(self) -> None:
        if self.handle is not None:
            self.handle.update(Shown(f"grading {self.exercise.id} stopped"))

    def finish(self, result: Result) -> Result:
        """The verdict, in place of the progress line where there is one."""
        if self.handle is None:
            return result
        self.handle.update(result.bundle(), raw=True)
        return dataclasses.replace(result, shown_in_place=True)


def _well_done(checked: Checked) -> str:
    solved = ", ".join(e.id for e in checked.newly_solved)
    upcoming = checked.upcoming
    following = f"next up: {upcoming.id}" if upcoming else "that was the last one!"
    return f"Well done: {solved} solved; {following}"


# The functions -----------------------------------------------------------------------


def check(
    exercise_id: str,
    source: str | None = None,
    *,
    timeout: float = Limits.check_seconds,
    cold: bool = False,
    verbose: bool = False,
    course: Path | None = None,
    cell_offset: int | None = None,
) -> Result:
    """Save `source` (if given) as the learner's file for the exercise, grade it, record it.
    `cell_offset`: the line of the cell that holds the file's first line (1 under `%%kata`)."""
    session = _session(course, cold=cold)
    preflight(state_dir=session.course.state_dir)  # one line, never a grading on other JAX
    exercise = session.course.resolve(exercise_id)
    LAST_CHECKED[session.course.root] = exercise.id
    path = session.exercise_file(exercise)
    notice = save_cell(session.course, exercise, path, source) if source is not None else None
    progress = _Progress(exercise)
    try:
        checked = session.check_own([exercise], Limits(check_seconds=timeout), progress)
    except BaseException:
        progress.stopped()
        raise
    return progress.finish(Result(checked, path, verbose, cell_offset, notice))


def _session(course: Path | None, *, cold: bool = False) -> Session:
    """The session of the notebook's course; a warm grader it starts ends with this
    kernel (kata.servers.warm), not 30 idle minutes later."""
    warm.end_workers_with_this_process()
    return Session.open(notebook_course(course).root, cold=cold)


def next_exercise(course: Path | None = None) -> Shown:
    """The first exercise not yet solved, with its lesson."""
    session = _session(course)
    preflight(state_dir=session.course.state_dir)
    session.regrade_changed()
    current = session.current()
    if current is None:
        return Shown(f"All {len(session.course.exercises)} exercises done. You know JAX now.")
    text = _lesson_text(session.course, current)
    return Shown(
        f"{current.id} · {current.title}\n\n{text}\n\n"
        f"Write your answer in a cell that starts with `%%kata {current.id}`; "
        f"`%kata hint {current.number}` gives a hint."
    )


def hint(exercise_id: str | None = None, course: Path | None = None) -> Shown:
    """The next hint for the exercise (default: the one of the cell this kernel checked
    last, while it is unsolved; else the current one)."""
    session = _session(course)
    named = session.course.resolve(exercise_id) if exercise_id else _last_checked(session)
    exercise = session.hint_exercise(named)
    if exercise is None:
        return Shown("Every exercise is done: no hints needed.")
    given = session.next_hint(exercise)
    if given is None:
        return Shown(f"{exercise.id} has no hints.")
    return Shown(report.hint_line(given))


def _last_checked(session: Session) -> Exercise | None:
    """The exercise of the cell this kernel checked last in the session's course, while it
    is unsolved: `%kata hint` after a failing cell answers for that cell, not for the first
    exercise left unsolved."""
    last = LAST_CHECKED.get(session.course.root)
    try:
        exercise = session.course.resolve(last) if last else None
    except CourseError:  # the course changed under the kernel
        return None
    return exercise if exercise is not None and not session.is_done(exercise) else None


def exercises(course: Path | None = None) -> Shown:
    """Every exercise in order with its state (files changed since their check re-graded)."""
    session = _session(course)
    session.regrade_changed()
    lines = report.exercise_list_lines(session.course.title, session.states())
    return Shown("\n".join(click.unstyle(line) for line in lines))


def rules(term: str | None = None, course: Path | None = None) -> Shown:
    """The cheat sheet, or the PyTorch → JAX rows for `term` (`%kata rules view`)."""
    if term is not None:
        found = torch_to_jax.translations(notebook_course(course).mapping, term)
        lines = report.translation_lines(term, found)
    else:
        session = _session(course)
        lines = report.cheat_sheet_lines(session.rules(), session.course.mapping)
    return Shown("\n".join(click.unstyle(line) for line in lines))


def _lesson_text(course: Course, exercise: Exercise) -> str:
    """The lesson: the learner's file's docstring, else the original stub's."""
    found = lesson(course.exercises_dir / exercise.filename)
    if found is None:
        stub = original_stub(course, exercise)
        found = _lesson_of(stub) if stub else None
    return found or "(no lesson found)"


# The magics --------------------------------------------------------------------------


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext kata`: register `%kata` and `%%kata` on the running IPython."""
    ipython.register_magic_function(kata_magic, magic_kind="line_cell", magic_name=MAGIC)


def kata_magic(line: str, cell: str | None = None) -> Any:
    """`%%kata ID [--timeout S] [--cold] [-v]` grades the cell; `%kata next|hint [ID]|list|
    rules [NAME]`."""
    try:
        words = shlex.split(line)
        if cell is not None:
            exercise_id, timeout, cold, verbose = _cell_options(words)
            return check(
                exercise_id, cell, timeout=timeout, cold=cold, verbose=verbose, cell_offset=1
            )
        match words:
            case ["next"]:
                return next_exercise()
            case ["hint", *named] if len(named) <= 1:
                return hint(*named)
            case ["list"]:
                return exercises()
            case ["rules", *term]:
                return rules(" ".join(term) or None)
        raise CourseError(USAGE)
    except (CourseError, NotReady) as error:
        # One line, as the command line says it: an error cell would stop "run all".
        print(f"kata: {error}")
        return None


def _cell_options(words: list[str]) -> tuple[str, float, bool, bool]:
    if not words or words[0].startswith("-"):
        raise CourseError(USAGE)
    exercise_id, options = words[0], words[1:]
    timeout, cold, verbose = Limits.check_seconds, False, False
    while options:
        option = options.pop(0)
        if option == "--cold":
            cold = True
        elif option in ("-v", "--verbose"):
            verbose = True
        elif option == "--timeout" and options:
            timeout = _seconds(options.pop(0))
        else:
            raise CourseError(f"unknown option {option!r}; {USAGE}")
    return exercise_id, timeout, cold, verbose


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if seconds < 1:
        raise CourseError(f"--timeout takes seconds, at least 1, not {text!r}")
    return seconds


# The course as a notebook ------------------------------------------------------------

SETUP_CELL = """\
# On Colab, or wherever kata is not installed yet, run this first (jax stays as it is):
# %pip install kata-jax
# (until kata-jax is on PyPI: upload its wheel, then %pip install kata_jax-*.whl)
%load_ext kata
%kata next"""

INTRODUCTION = """\
# {title}

Each exercise below is a lesson, then a cell that starts with `%%kata ID` holding the
stub: fix the code and run the cell to grade it. The checks run in a separate process
with a time limit, so a mistake never hangs the notebook. Your cells are saved in a course
folder (`./kata-course` unless you run this inside one), where `kata list` and the rest of
the command line see them too. `%kata hint` gives the next hint; `%kata list` shows where
you stand."""


def cell_code(stub: str) -> str:
    """A stub for a notebook cell: its lesson, the module docstring, goes to markdown."""
    body = ast.parse(stub).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        lines = stub.splitlines(keepends=True)
        stub = "".join(lines[body[0].end_lineno :])
    return stub.strip("\n") + "\n"


def course_cells(course: Course) -> list[tuple[str, str]]:
    """The notebook's cells in order, each as (kind, source): markdown or code."""
    cells = [
        ("markdown", INTRODUCTION.format(title=course.title)),
        ("code", SETUP_CELL),
    ]
    for exercise in course.exercises:
        stub = original_stub(course, exercise)
        if stub is None:
            stub = (course.exercises_dir / exercise.filename).read_text(encoding="utf-8")
        cells.append(("markdown", f"## {exercise.id} · {exercise.title}\n\n{_lesson_of(stub)}"))
        if exercise.hints:
            folded = "\n".join(
                f"<details><summary>Hint {number}</summary>\n\n{text}\n\n</details>"
                for number, text in enumerate(exercise.hints, 1)
            )
            cells.append(("markdown", folded))
        cells.append(("code", f"%%kata {exercise.id}\n{cell_code(stub)}"))
    return cells


def _lesson_of(stub: str) -> str:
    return ast.get_docstring(ast.parse(stub)) or ""


def write_course_notebook(course: Course, out: Path) -> None:
    """Write the course as a notebook: running it top to bottom is the whole course."""
    import nbformat  # the notebook extra; only this function needs it
    from nbformat import v4

    makers = {"markdown": v4.new_markdown_cell, "code": v4.new_code_cell}
    notebook = v4.new_notebook(
        cells=[makers[kind](source) for kind, source in course_cells(course)],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.validate(notebook)
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(out))
