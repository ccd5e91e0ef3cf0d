"""Grading a class: every submission with the course's pristine checks, into a gradebook.

A submission is a folder or a .zip of a student's `NN_name.py` files, all or some of them,
however nested, taken in by kata.instructor.intake: only files named like an exercise,
copied into a fresh folder of their own, so nothing else in a submission (a `conftest.py`,
a `checks/` folder, a symlink) ever reaches the grader. Submissions are
graded in parallel; each finished one is appended to the CSV at once, so an interrupted
run keeps its rows and `--resume` grades only what is missing.
"""

from __future__ import annotations

import csv
import json
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kata.course import Course
from kata.grading.runner import grade
from kata.instructor.class_report import class_numbers, render_html
from kata.instructor.intake import relative_to_upload, take_in
from kata.instructor.outputs import write_atomically
from kata.instructor.scoring import ExerciseScore, score_exercise, total
from kata.results import Limits


@dataclass
class Submission:
    name: str
    folder: Path
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GradedSubmission:
    name: str
    scores: list[ExerciseScore]
    notes: list[str]
    seconds: float

    @property
    def total(self) -> float:
        return total(self.scores)[0]

    @property
    def max_total(self) -> float:
        return total(self.scores)[1]

    def all_notes(self) -> list[str]:
        return self.notes + [f"{s.exercise.id}: {s.note}" for s in self.scores if s.note]


def submission_name(path: Path) -> str:
    return path.name.removesuffix(".zip") if path.suffix == ".zip" else path.name


def unpack_submission(course: Course, path: Path, into: Path) -> Submission:
    """Copy the exercise files of a submission (folder or .zip) into a folder of their own
    (kata.instructor.intake); its notes name what was ignored."""
    intake = take_in(course, path, into)
    return Submission(submission_name(path), into, intake.notes())


def grade_submission(
    course: Course, path: Path, limits: Limits, scratch: Path, cancel: threading.Event
) -> GradedSubmission:
    started = time.monotonic()
    submission = unpack_submission(course, path, scratch / "submission")
    present = [e for e in course.exercises if (submission.folder / e.filename).is_file()]
    grading = grade(course, present, submission.folder, limits, cancel=cancel)
    results = {r.exercise.id: r for r in relative_to_upload(grading, course).results}
    scores = [score_exercise(e, results.get(e.id)) for e in course.exercises]
    return GradedSubmission(submission.name, scores, submission.notes, time.monotonic() - started)


# The gradebook files ---------------------------------------------------------------


def csv_header(course: Course) -> list[str]:
    return ["submission", *(e.id for e in course.exercises), "total", "max", "notes"]


def csv_row(graded: GradedSubmission) -> list[str]:
    points = [f"{s.points:g}" for s in graded.scores]
    return [
        graded.name,
        *points,
        f"{graded.total:g}",
        f"{graded.max_total:g}",
        "; ".join(graded.all_notes()),
    ]


def graded_names(csv_path: Path) -> set[str]:
    if not csv_path.exists():
        return set()
    with csv_path.open(newline="", encoding="utf-8") as stream:
        return {row["submission"] for row in csv.DictReader(stream) if row.get("submission")}


def json_entry(graded: GradedSubmission) -> dict[str, Any]:
    return {
        "submission": graded.name,
        "total": graded.total,
        "max": graded.max_total,
        "seconds": round(graded.seconds, 2),
        "notes": graded.all_notes(),
        "exercises": {
            s.exercise.id: {
                "score": s.points,
                "max": s.max_points,
                "concept": s.exercise.concept,
                "note": s.note,
                "checks": [
                    {
                        "name": c.check.name,
                        "task": c.check.task,
                        "outcome": c.check.outcome,
                        "score": round(c.points, 4),
                        "max": round(c.max_points, 4),
                        "speed": c.check.speed,
                        "speedup": c.check.speedup,
                        "diagnosis": (c.check.diagnosis or {}).get("cause"),
                        "message": c.check.message[:500],
                    }
                    for c in s.checks
                ],
            }
            for s in graded.scores
        },
    }


def gradebook_document(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON gradebook: every submission's verdicts, and the class report's numbers."""
    return {"submissions": entries, "class": class_numbers(entries)}


def read_entries(json_path: Path) -> list[dict[str, Any]]:
    """The submissions of a JSON gradebook (a bare list in gradebooks before the report)."""
    document = json.loads(json_path.read_text(encoding="utf-8"))
    return document if isinstance(document, list) else document["submissions"]


def _write_json(path: Path, entries: list[dict[str, Any]]) -> None:
    write_atomically(path, json.dumps(gradebook_document(entries), indent=2, ensure_ascii=False))


def write_report(path: Path, entries: list[dict[str, Any]], title: str) -> None:
    write_atomically(path, render_html(class_numbers(entries), title))


def grade_class(
    course: Course,
    paths: list[Path],
    *,
    out: Path,
    json_path: Path | None,
    jobs: int,
    limits: Limits,
    report_path: Path | None = None,
    on_graded: Callable[[GradedSubmission], None] | None = None,
) -> list[GradedSubmission]:
    """Grade each submission not already in `out`, appending a row as each one finishes,
    then write the class report (of every submission in the JSON gradebook, or of this
    run's without one).

    On KeyboardInterrupt, running gradings are stopped, the rows written so far stay, and
    the interrupt propagates.
    """
    done_before = graded_names(out)
    todo = [p for p in paths if submission_name(p) not in done_before]
    entries = read_entries(json_path) if json_path and json_path.exists() else []
    new_file = not out.exists()
    cancel = threading.Event()
    graded: list[GradedSubmission] = []
    with (
        out.open("a", newline="", encoding="utf-8") as stream,
        tempfile.TemporaryDirectory(prefix="kata-grade-") as scratch,
        ThreadPoolExecutor(max_workers=jobs) as pool,
    ):
        writer = csv.writer(stream)
        if new_file:
            writer.writerow(csv_header(course))
        running: set[Future[GradedSubmission]] = {
            pool.submit(grade_submission, course, path, limits, Path(scratch) / str(n), cancel)
            for n, path in enumerate(todo)
        }
        try:
            while running:
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    result = future.result()
                    writer.writerow(csv_row(result))
                    stream.flush()
                    graded.append(result)
                    entries.append(json_entry(result))
                    if json_path:
                        _write_json(json_path, entries)
                    if on_graded:
                        on_graded(result)
        except BaseException:
            cancel.set()
            for future in running:
                future.cancel()
            raise
    if report_path:
        write_report(report_path, entries, f"{course.title}: class report")
    return graded
