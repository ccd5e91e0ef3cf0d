"""Grading a class: every submission with the course's pristine checks, into a gradebook.

A submission is a folder or a .zip of a student's `NN_name.py` files, all or some of them,
however nested. Only files named like an exercise are taken (the shallowest of each
name), copied into a fresh folder of their own, so nothing else in a submission (a
`conftest.py`, a `checks/` folder, a symlink) ever reaches the grader. Submissions are
graded in parallel; each finished one is appended to the CSV at once, so an interrupted
run keeps its rows and `--resume` grades only what is missing.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kata.course import Course, Exercise, original_stub
from kata.grading.runner import grade
from kata.instructor.class_report import class_numbers, render_html, stopped_kind
from kata.instructor.formats import relative_to_source
from kata.instructor.outputs import write_atomically
from kata.instructor.scoring import ExerciseScore, score_exercise, total
from kata.results import Limits

FILE_LIMIT_BYTES = 1024 * 1024


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
    # Exercises with no file, and files equal to the exercise's stub (never worked on).
    missing: frozenset[str] = frozenset()
    not_started: frozenset[str] = frozenset()

    @property
    def total(self) -> float:
        return total(self.scores)[0]

    @property
    def max_total(self) -> float:
        return total(self.scores)[1]

    def all_notes(self) -> list[str]:
        notes = list(self.notes)
        for score in self.scores:
            if score.exercise.id in self.not_started:
                notes.append(f"{score.exercise.id}: not started (the file is the stub as given)")
            elif score.note:
                notes.append(f"{score.exercise.id}: {score.note}")
            stopped = Counter(
                stopped_kind(c.outcome, (c.diagnosis or {}).get("rule"), c.exception)
                for c in (checked.check for checked in score.checks)
            )
            notes += [
                f"{score.exercise.id}: {count} check{'s' if count > 1 else ''} {kind}"
                for kind, count in stopped.items()
                if kind
            ]
        return notes


def submission_name(path: Path) -> str:
    return path.name.removesuffix(".zip") if path.suffix == ".zip" else path.name


def unpack_submission(course: Course, path: Path, into: Path) -> Submission:
    """Copy the exercise files of a submission (folder or .zip) into a folder of their own."""
    wanted = {e.filename for e in course.exercises}
    submission = Submission(submission_name(path), into)
    into.mkdir(parents=True)
    try:
        found = _from_zip(path, wanted) if path.suffix == ".zip" else _from_folder(path, wanted)
    except (OSError, zipfile.BadZipFile) as error:
        submission.notes.append(f"could not read the submission: {error}")
        return submission
    for filename, content in found.items():
        if content is None:
            submission.notes.append(f"{filename} is over {FILE_LIMIT_BYTES // 1024} KiB; ignored")
        else:
            (into / filename).write_bytes(content)
    return submission


def _from_zip(path: Path, wanted: set[str]) -> dict[str, bytes | None]:
    chosen: dict[str, zipfile.ZipInfo] = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = PurePosixPath(info.filename.replace("\\", "/")).name
            if info.is_dir() or name not in wanted:
                continue
            depth = info.filename.count("/")
            if name not in chosen or depth < chosen[name].filename.count("/"):
                chosen[name] = info
        # Read at most the limit, whatever the archive claims, against zip bombs.
        return {
            name: _limited(archive.open(info).read(FILE_LIMIT_BYTES + 1))
            for name, info in chosen.items()
        }


def _from_folder(path: Path, wanted: set[str]) -> dict[str, bytes | None]:
    if not path.is_dir():
        raise OSError(f"{path} is neither a folder nor a .zip")
    chosen: dict[str, Path] = {}
    for folder, subfolders, files in os.walk(path, followlinks=False):
        subfolders.sort()
        for name in sorted(set(files) & wanted):
            candidate = Path(folder) / name
            if candidate.is_symlink():
                continue
            if name not in chosen or len(candidate.parts) < len(chosen[name].parts):
                chosen[name] = candidate
    found = {}
    for name, candidate in chosen.items():
        with candidate.open("rb") as stream:
            found[name] = _limited(stream.read(FILE_LIMIT_BYTES + 1))
    return found


def _limited(content: bytes) -> bytes | None:
    return None if len(content) > FILE_LIMIT_BYTES else content


def grade_submission(
    course: Course, path: Path, limits: Limits, scratch: Path, cancel: threading.Event
) -> GradedSubmission:
    started = time.monotonic()
    submission = unpack_submission(course, path, scratch / "submission")
    present = [e for e in course.exercises if (submission.folder / e.filename).is_file()]
    grading = relative_to_source(grade(course, present, submission.folder, limits, cancel=cancel))
    results = {r.exercise.id: r for r in grading.results}
    scores = [score_exercise(e, results.get(e.id)) for e in course.exercises]
    return GradedSubmission(
        submission.name,
        scores,
        submission.notes,
        time.monotonic() - started,
        missing=frozenset(e.id for e in course.exercises if e not in present),
        not_started=frozenset(e.id for e in present if is_stub(course, e, submission.folder)),
    )


def is_stub(course: Course, exercise: Exercise, folder: Path) -> bool:
    """Whether the submitted file is the exercise's stub as the course gives it (line
    endings and trailing blank space aside, as an editor may change them)."""
    stub = original_stub(course, exercise)
    if stub is None:
        return False
    try:
        submitted = (folder / exercise.filename).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return _normalised(submitted) == _normalised(stub)


def _normalised(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().splitlines())


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
                "missing": s.exercise.id in graded.missing,
                "not_started": s.exercise.id in graded.not_started,
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
                        "fix": (c.check.diagnosis or {}).get("fix"),
                        "rule": (c.check.diagnosis or {}).get("rule"),
                        "exception": c.check.exception,
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
