"""Feedback for each student of a class: what `kata check` and `kata hint` would have told
them, exercise by exercise, as a page and as text.

`kata grade --feedback DIR` writes, per student, DIR/NAME.html (one self-contained page
that reads on a phone) and DIR/NAME.txt. Each holds that student's own grading only: the
points, what of the upload was graded (the intake's summary, as Gradescope shows it), then
per exercise the text `kata check` prints (kata.reporting.formats.exercise_text: each
check's verdict, the message, the diagnosis's cause and fix), and the hint `kata hint`
would give next, chosen as it chooses (kata.learning.hints.next_hint) from a progress that
holds this grading alone, as a learner's would after one `kata check`. Nothing in it comes
from another student or from the reference solutions: the checks' messages, the diagnoses
and the hints are what kata tells a learner of their own file.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from html import escape
from pathlib import Path

import click

from kata.course import Course, original_stub
from kata.instructor.class_report import html_page
from kata.learning.hints import next_hint, same_definition
from kata.learning.progress import Progress, record_result
from kata.learning.session import first_failures, unsolved_tasks
from kata.reporting.formats import exercise_text
from kata.reporting.intake import GradedUpload
from kata.reporting.outputs import write_atomically
from kata.reporting.report import exercise_heading, hint_line, platform_lines, summary_line
from kata.reporting.scoring import AS_GIVEN, ExerciseScore, total
from kata.results import ExerciseResult

# A page's file name keeps a student's name readable, within what every file system takes.
PAGE_NAME_CHARS = 80
UNSAFE_IN_FILE_NAMES = re.compile(r"[^\w.-]")


@dataclass(frozen=True)
class ExerciseFeedback:
    exercise_id: str
    points: float
    max_points: float
    text: str  # what `kata check` prints of it, without colour
    hint: str | None  # what `kata hint` would answer next; None once solved


@dataclass(frozen=True)
class Feedback:
    """One student's feedback: the lines that open it (their points first), then each
    exercise's."""

    lead: tuple[str, ...]
    exercises: tuple[ExerciseFeedback, ...] = ()


class _Unsaved(Progress):
    """A learner's progress kept in memory: choosing a hint for the feedback writes
    nothing anywhere."""

    def save(self) -> None:
        return None


def feedback_of(
    course: Course, graded: GradedUpload, folder: Path, scores: list[ExerciseScore]
) -> Feedback:
    """What `kata check` and `kata hint` would tell the student of `graded`, whose files
    the intake copied into `folder` (read for the hint: a task still as its stub gets the
    hints written for the stub)."""
    grading = graded.grading
    lead = [
        points_line(*total(scores)),
        *(click.unstyle(line) for line in [*platform_lines(grading), summary_line(grading)]),
        graded.intake.summary(len(course.exercises)),
    ]
    exercises = tuple(
        ExerciseFeedback(
            result.exercise.id,
            score.points,
            score.max_points,
            _exercise_text(result),
            _hint_after(course, result, folder),
        )
        for result, score in zip(grading.results, scores, strict=True)
    )
    return Feedback(tuple(lead), exercises)


def _exercise_text(result: ExerciseResult) -> str:
    """As `kata check` prints it; a file that is its stub as given, in one line (its checks
    were not run: each would only say so again)."""
    if result.as_given:
        return "\n".join([click.unstyle(exercise_heading(result.exercise)), f"  {AS_GIVEN}"])
    return exercise_text(result)


def _hint_after(course: Course, result: ExerciseResult, folder: Path) -> str | None:
    """The hint `kata hint` gives next once `kata check` graded `result`, to a learner who
    has seen none (as `kata hint` prints it); None once the exercise passed, or where no
    file of it was graded."""
    exercise = result.exercise
    if result.passed or not result.checks:
        return None
    progress = _Unsaved(Path(os.devnull))
    record_result(
        progress,
        exercise,
        result.passed,
        None,
        unsolved=unsolved_tasks(result),
        failures=first_failures(result),
        does_not_load=None if result.checks_not_loaded else result.problem,
    )
    stub = original_stub(course, exercise)
    try:
        mine = (folder / exercise.filename).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        mine = ""
    hint = next_hint(
        progress,
        exercise,
        lambda task: stub is not None and same_definition(mine, stub, task),
    )
    return None if hint is None else hint_line(hint)


def absent_feedback(why: str, max_points: float) -> Feedback:
    """The feedback of a student kata received no files from."""
    return Feedback((points_line(0.0, max_points), why))


# The files ----------------------------------------------------------------------------


def page_stem(name: str) -> str:
    """A file name for a student's pages: their name with each character but letters,
    digits, `-`, `_` and `.` made `_`, never hidden (no leading dot), and not too long."""
    return UNSAFE_IN_FILE_NAMES.sub("_", name).lstrip(".")[:PAGE_NAME_CHARS] or "student"


def page_names(names: dict[str, str]) -> dict[str, str]:
    """Each student's page name, by id: `page_stem` of their name, and where two names
    make one (`a b`, `a_b`; case aside), each followed by its id's start."""
    stems = {id: page_stem(name) for id, name in names.items()}
    counts = Counter(stem.casefold() for stem in stems.values())
    return {
        id: stem if counts[stem.casefold()] == 1 else f"{stem}-{id[:8]}"
        for id, stem in stems.items()
    }


def points_line(points: float, max_points: float) -> str:
    return f"{points:g} of {max_points:g} point{'' if max_points == 1 else 's'}"


def feedback_text(title: str, feedback: Feedback) -> str:
    """The feedback as a text file."""
    parts = ["\n".join([title, *feedback.lead])]
    for exercise in feedback.exercises:
        hint = f"\n  Hint: {exercise.hint}" if exercise.hint else ""
        parts.append(exercise.text + hint)
    return "\n\n".join(parts) + "\n"


STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 52rem;
       color: #1d2330; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { margin-top: 2rem; font-size: 1.1rem; }
.lead { color: #556; margin-top: 0; }
.points { font-weight: 600; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f4f5f9;
      padding: .6rem .8rem; border-radius: 4px; font-size: 13px; }
.hint { border-left: 3px solid #4c6ef5; padding-left: .7rem; }
"""


def feedback_html(title: str, feedback: Feedback) -> str:
    """The feedback as one self-contained page."""
    sections = "".join(
        f"<section id='ex-{escape(e.exercise_id)}'><h2><code>{escape(e.exercise_id)}</code> "
        f"<span class='points'>{escape(points_line(e.points, e.max_points))}</span></h2>"
        f"<pre>{escape(e.text)}</pre>"
        + (f"<p class='hint'><strong>Hint:</strong> {escape(e.hint)}</p>" if e.hint else "")
        + "</section>"
        for e in feedback.exercises
    )
    points, *said = feedback.lead
    lead = f"<p class='points' id='points'>{escape(points)}</p>" + "".join(
        f"<p class='lead'>{escape(line)}</p>" for line in said
    )
    return html_page(title, STYLE, lead + sections)


def write_feedback(folder: Path, stem: str, title: str, feedback: Feedback) -> None:
    """`folder`/`stem`.html and .txt, each written whole."""
    write_atomically(folder / f"{stem}.html", feedback_html(title, feedback))
    write_atomically(folder / f"{stem}.txt", feedback_text(title, feedback))
