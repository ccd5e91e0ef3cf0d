"""Grading a class: every submission with the course's pristine checks, into a gradebook.

A submission is a folder or a .zip of a student's `NN_name.py` files, all or some of them,
however nested, taken in by kata.reporting.intake: only files named like an exercise,
copied into a fresh folder of their own, so nothing else in a submission (a `conftest.py`,
a `checks/` folder, a symlink) ever reaches the grader. A submission is known by a stable
id derived from its whole path, and shown by its student's name, unique in the class
(kata.instructor.students): no file written here holds a path of the grading machine. A
roster's columns (student id, name, email) reach every file; a roster row with no
submission is a row of its own, nothing submitted. Submissions are graded in parallel;
each finished one is saved at once, so an interrupted run (Ctrl-C, SIGTERM, SIGHUP) keeps
its rows and `--resume` grades only what is missing. A total time budget is shared out so
that every submission and every exercise gets a verdict. Names are data: CSV cells are
neutralised against formulas, and JSON and HTML escape them. Beside the gradebook, a run
may write a CSV that Canvas's gradebook imports (kata.reporting.formats.to_canvas_csv) and
each student's feedback (kata.instructor.feedback).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kata import __version__
from kata.course import Course
from kata.instructor.class_report import class_numbers, render_html, stopped_kind
from kata.instructor.feedback import (
    Feedback,
    absent_feedback,
    feedback_of,
    page_names,
    write_feedback,
)
from kata.instructor.shards import Shard
from kata.instructor.students import (
    NO_SUBMISSION,
    NOT_ON_ROSTER,
    ROSTER_COLUMNS,
    Roster,
    Student,
    class_of,
)
from kata.reporting.formats import spreadsheet_safe, to_canvas_csv
from kata.reporting.intake import grade_upload
from kata.reporting.outputs import write_atomically
from kata.reporting.report import counted
from kata.reporting.scoring import ExerciseScore, score_exercise, total
from kata.results import Limits

# Held back from a class's time budget: what stopping the last runs and writing the
# gradebook take (a stopped run ends within a second; the files are written at once).
STOPPING_SECONDS = 10.0


@dataclass(frozen=True)
class GradedSubmission:
    student: Student
    scores: list[ExerciseScore]
    notes: list[str]
    seconds: float
    # Exercises with no file, and files equal to the exercise's stub (never worked on).
    missing: frozenset[str] = frozenset()
    not_started: frozenset[str] = frozenset()
    # Missing exercises whose upload held something meant as their file (its note says why).
    not_graded: frozenset[str] = frozenset()
    # No exercise's file, nor anything meant as one: said once, not per exercise.
    nothing_submitted: bool = False
    # What `kata check` and `kata hint` would tell the student, where it was asked for.
    feedback: Feedback | None = None

    @property
    def name(self) -> str:
        return self.student.name

    @property
    def id(self) -> str:
        return self.student.id

    @property
    def total(self) -> float:
        return total(self.scores)[0]

    @property
    def max_total(self) -> float:
        return total(self.scores)[1]

    def upload_problems(self) -> list[str]:
        """What of the upload was not graded, and why: what the intake ignored, and each
        exercise whose upload held something meant as its file."""
        return self.notes + [
            f"{s.exercise.id}: {s.note}" for s in self.scores if s.exercise.id in self.not_graded
        ]

    def all_notes(self) -> list[str]:
        notes = [NOT_ON_ROSTER] if self.student.not_on_roster else []
        notes += self.notes
        for score in self.scores:
            if score.note and not self.nothing_submitted:  # the intake's note says it once
                notes.append(f"{score.exercise.id}: {score.note}")
            stopped = Counter(
                stopped_kind(c.outcome, (c.diagnosis or {}).get("rule"), c.exception)
                for c in (checked.check for checked in score.checks)
            )
            notes += [
                f"{score.exercise.id}: {counted(count, 'check')} {kind}"
                for kind, count in stopped.items()
                if kind
            ]
        return notes


def grade_submission(
    course: Course,
    student: Student,
    limits: Limits,
    scratch: Path,
    cancel: threading.Event,
    budget: TimeBudget | None = None,
    with_feedback: bool = False,
) -> GradedSubmission:
    """Grade one student's submission (a folder or .zip) and score it; its notes name
    what of it was ignored (kata.reporting.intake); `with_feedback`, what `kata check` and
    `kata hint` would tell them. A roster's student with no submission scores nothing."""
    if student.path is None:
        return absent_submission(course, student, with_feedback)
    started = time.monotonic()

    def limits_for(files: int) -> Limits:
        if budget is None:
            return limits
        own = limits.budget_for(files)
        return dataclasses.replace(limits, run_seconds=min(own, budget.share()))

    folder = scratch / "submission"
    graded = grade_upload(course, student.path, folder, limits_for, cancel)
    results = graded.grading.results
    scores = [score_exercise(r.exercise, r) for r in results]
    return GradedSubmission(
        student,
        scores,
        graded.intake.notes(),
        time.monotonic() - started,
        missing=frozenset(e.id for e in course.exercises if e not in graded.present),
        not_started=frozenset(r.exercise.id for r in results if r.as_given),
        not_graded=frozenset(
            e.id for e in course.exercises if e.filename in graded.intake.not_graded
        ),
        nothing_submitted=graded.intake.nothing_submitted,
        feedback=feedback_of(course, graded, folder, scores) if with_feedback else None,
    )


def absent_submission(course: Course, student: Student, with_feedback: bool) -> GradedSubmission:
    """A roster's student no submission was given for: every exercise missing, said once."""
    scores = [score_exercise(e, None, NO_SUBMISSION) for e in course.exercises]
    return GradedSubmission(
        student,
        scores,
        [NO_SUBMISSION],
        0.0,
        missing=frozenset(e.id for e in course.exercises),
        nothing_submitted=True,
        feedback=absent_feedback(NO_SUBMISSION, total(scores)[1]) if with_feedback else None,
    )


class TimeBudget:
    """A class's total time, shared out as each submission starts: the time left over the
    rounds of `jobs` submissions still to start, so the last get as long as the first, and
    every run ends (and its row is written) before the budget does."""

    def __init__(self, seconds: float, submissions: int, jobs: int) -> None:
        self.deadline = time.monotonic() + seconds - STOPPING_SECONDS
        self.waiting, self.jobs = submissions, jobs
        self.lock = threading.Lock()

    def share(self) -> float:
        with self.lock:
            rounds = -(-self.waiting // self.jobs)
            self.waiting = max(0, self.waiting - 1)
        return max(1.0, (self.deadline - time.monotonic()) / max(1, rounds))


# Stopping: every signal that ends a run ends it cleanly ---------------------------------

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# How often the class's loop looks for a signal while it waits for a submission to finish.
SIGNAL_POLL_SECONDS = 0.2


class Stopped(KeyboardInterrupt):
    """A signal that ends the run (Ctrl-C, a scheduler's SIGTERM, a closed terminal's
    SIGHUP), raised where the class's loop can stop, as Ctrl-C raises KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def stopped_by_signals(cancel: threading.Event) -> Iterator[Callable[[], None]]:
    """SIGINT, SIGTERM and SIGHUP set `cancel`, so the runs end, and make the function this
    yields raise Stopped, where the caller calls it; a second signal cannot cut that short.

    The handler itself never raises: an exception raised wherever the main thread happens
    to be can leave a lock of concurrent.futures' `wait` held, and a `kata grade` of the
    suite's signal test once still ran 60 s after its SIGTERM."""
    received: list[int] = []

    def stop_point() -> None:
        if received:
            raise Stopped(received[0])

    if threading.current_thread() is not threading.main_thread():
        yield stop_point
        return

    def stop(signum: int, _frame: object) -> None:
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        received.append(signum)
        cancel.set()

    previous = {each: signal.signal(each, stop) for each in STOP_SIGNALS}
    try:
        yield stop_point
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)


# The gradebook files ---------------------------------------------------------------


class GradebookError(Exception):
    """A gradebook that cannot be continued or merged, said in one line."""


def csv_header(exercise_ids: list[str]) -> list[str]:
    """The gradebook's columns: the student's name in the class and stable id, the
    roster's columns (empty without one), a score per exercise, the total and the notes."""
    return ["submission", "id", *ROSTER_COLUMNS, *exercise_ids, "total", "max", "notes"]


def csv_row(entry: dict[str, Any], exercise_ids: list[str]) -> list[str]:
    """A JSON gradebook entry as a CSV row; every cell a spreadsheet could run is text."""
    exercises = entry["exercises"]
    roster = entry.get("roster") or {}
    cells = [
        entry["submission"],
        entry["id"],
        *(roster.get(column, "") for column in ROSTER_COLUMNS),
        *(f"{exercises[id]['score']:g}" for id in exercise_ids),
        f"{entry['total']:g}",
        f"{entry['max']:g}",
        "; ".join(entry["notes"]),
    ]
    return [spreadsheet_safe(cell) for cell in cells]


def read_csv_rows(path: Path, exercise_ids: list[str]) -> list[list[str]]:
    """The rows of a gradebook to continue; refused when its columns are not this course's."""
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    if rows and rows[0] != csv_header(exercise_ids):
        raise GradebookError(
            f"{path}'s columns are not this course's gradebook's (another course, or an "
            "older kata); grade into a new file"
        )
    return [row for row in rows[1:] if row]


def csv_text(rows: list[list[str]], exercise_ids: list[str]) -> str:
    """The whole CSV: one row per submission id (the last written wins), in name order."""
    unique = {row[1]: row for row in rows}
    stream = io.StringIO()
    writer = csv.writer(stream)
    writer.writerow(csv_header(exercise_ids))
    writer.writerows(sorted(unique.values(), key=lambda row: (row[0], row[1])))
    return stream.getvalue()


def json_entry(graded: GradedSubmission) -> dict[str, Any]:
    return {
        "submission": graded.name,
        "id": graded.id,
        "roster": graded.student.roster,
        "not_on_roster": graded.student.not_on_roster,
        "total": graded.total,
        "max": graded.max_total,
        "seconds": round(graded.seconds, 2),
        "notes": graded.all_notes(),
        "nothing_submitted": graded.nothing_submitted,
        "exercises": {
            s.exercise.id: {
                "score": s.points,
                "max": s.max_points,
                "concept": s.exercise.concept,
                "note": s.note,
                "missing": s.exercise.id in graded.missing,
                "not_graded": s.exercise.id in graded.not_graded,
                "not_started": s.exercise.id in graded.not_started,
                "checks": [
                    {
                        "name": c.check.name,
                        "task": c.check.task,
                        "outcome": c.check.outcome,
                        "score": round(c.points, 4),
                        "max": round(c.max_points, 4),
                        "speed": c.check.speed,
                        "feedback_only": c.check.feedback_only,
                        "measurements": c.check.measurements,
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


def course_identity(course: Course) -> dict[str, Any]:
    """What a gradebook was graded against: its title, exercises and a digest of the
    manifest and the checks, so gradebooks of different courses are never merged."""
    digest = hashlib.sha256()
    files = [course.root / "course.toml", *sorted(course.checks_dir.rglob("*.py"))]
    for path in files:
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(course.root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return {
        "title": course.title,
        "exercises": [e.id for e in course.exercises],
        "digest": digest.hexdigest()[:16],
    }


def class_digest(ids: Iterable[str]) -> str:
    """One digest of a class's submission ids: shards that saw different classes differ."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def gradebook_document(
    entries: list[dict[str, Any]], provenance: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON gradebook: where it came from (kata, course, shard), every submission's
    verdicts in name order, and the class report's numbers."""
    ordered = in_name_order(entries)
    return {**(provenance or {}), "submissions": ordered, "class": class_numbers(ordered)}


def read_document(json_path: Path) -> dict[str, Any]:
    """A JSON gradebook (a bare list of submissions in gradebooks before the report)."""
    try:
        document = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise GradebookError(f"cannot read {json_path}: {error}") from None
    return {"submissions": document} if isinstance(document, list) else document


def read_entries(json_path: Path) -> list[dict[str, Any]]:
    return read_document(json_path)["submissions"]


def write_report(path: Path, entries: list[dict[str, Any]], title: str) -> None:
    write_atomically(path, render_html(class_numbers(entries), title))


def in_name_order(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: (e["submission"], e.get("id", "")))


def write_gradebook(
    provenance: dict[str, Any],
    entries: list[dict[str, Any]],
    rows: list[list[str]],
    *,
    out: Path,
    json_path: Path | None,
    report_path: Path | None,
    lms_path: Path | None = None,
) -> None:
    """The finished gradebook (CSV `rows`), its JSON, its report and the CSV for Canvas's
    gradebook: what one `kata grade` writes at its end and what merging its shards writes
    are the same bytes."""
    exercise_ids = provenance["course"]["exercises"]
    write_atomically(out, csv_text(rows, exercise_ids))
    if json_path:
        write_atomically(json_path, _json_text(entries, provenance))
    if report_path:
        title = f"{provenance['course']['title']}: class report"
        write_report(report_path, in_name_order(entries), title)
    if lms_path:
        write_atomically(lms_path, to_canvas_csv(in_name_order(entries), exercise_ids))


def _json_text(entries: list[dict[str, Any]], provenance: dict[str, Any]) -> str:
    return json.dumps(gradebook_document(entries, provenance), indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class ClassPlan:
    """Which students a run grades (this shard's, less those already in the gradebook), of
    the whole class."""

    todo: list[Student]
    already: int
    provenance: dict[str, Any]
    students: list[Student] = dataclasses.field(default_factory=list)


def plan_class(
    course: Course,
    paths: list[Path],
    out: Path,
    json_path: Path | None,
    shard: Shard | None,
    roster: Roster | None = None,
) -> ClassPlan:
    """What this run grades, and the provenance its JSON gradebook records; a gradebook to
    continue that another course, kata version, shard or roster wrote is refused
    (GradebookError). A roster's student with no submission is one of the class, whom a
    shard grades as nothing submitted."""
    students = class_of(paths, roster)
    everyone = {student.id: student for student in students}
    shard = shard or Shard(1, 1)
    # In the order given: a class is graded as the instructor listed it, whatever the shard.
    picked = set(shard.pick(everyone))
    mine = {id: student for id, student in everyone.items() if id in picked}
    exercise_ids = [e.id for e in course.exercises]
    provenance = {
        "kata": __version__,
        "course": course_identity(course),
        "roster": {"digest": roster.digest} if roster else None,
        "shard": {
            "index": shard.index,
            "count": shard.count,
            "class_size": len(everyone),
            "class_digest": class_digest(everyone),
            "submissions": sorted(mine),
        },
    }
    done = {row[1] for row in read_csv_rows(out, exercise_ids)}
    if json_path and json_path.exists():
        document = read_document(json_path)
        # What it was graded with; the class itself may grow (a latecomer, with --resume).
        earlier = {**document, "shard": _numbered(document.get("shard"))}
        now = {**provenance, "shard": _numbered(provenance["shard"])}
        for key, what in WRITTEN_BY:
            if key in document and earlier[key] != now[key]:
                raise GradebookError(
                    f"{json_path} was written by another {what} ({_short(earlier[key])}); "
                    "grade into a new file"
                )
        done &= {e.get("id") for e in document["submissions"]}
    todo = [student for id, student in mine.items() if id not in done]
    return ClassPlan(todo, len(mine) - len(todo), provenance, students)


# What a gradebook was written with, which one continuing it must share (a gradebook
# written before rosters were has no `roster`, and is continued without one).
WRITTEN_BY = (
    ("kata", "kata version"),
    ("course", "course"),
    ("roster", "roster"),
    ("shard", "shard"),
)


def _numbered(shard: dict[str, Any] | None) -> str | None:
    return f"shard {shard['index']}/{shard['count']}" if shard else None


def _short(value: Any) -> str:
    """What wrote a gradebook, in a few words: a course's title, a roster's digest."""
    if isinstance(value, dict):
        return str(value.get("title") or value.get("digest"))
    return "none" if value is None else str(value)


def grade_class(
    course: Course,
    plan: ClassPlan,
    *,
    out: Path,
    json_path: Path | None,
    jobs: int,
    limits: Limits,
    report_path: Path | None = None,
    budget_seconds: float | None = None,
    on_graded: Callable[[GradedSubmission], None] | None = None,
    lms_path: Path | None = None,
    feedback_dir: Path | None = None,
) -> list[GradedSubmission]:
    """Grade the plan's submissions, saving each as it finishes (JSON first, then its CSV
    row, so a row always has its entry, then its student's feedback in `feedback_dir`),
    then write the whole gradebook in name order, the class report and the CSV for
    Canvas's gradebook.

    On SIGINT, SIGTERM or SIGHUP, running gradings are stopped, their temporary copies
    removed, the rows written so far stay, and Stopped (a KeyboardInterrupt) propagates.
    """
    exercise_ids = [e.id for e in course.exercises]
    earlier = read_entries(json_path) if json_path and json_path.exists() else []
    entries = {e["id"]: e for e in earlier if "id" in e}  # an older kata's are graded again
    new_file = not out.exists() or out.stat().st_size == 0
    cancel = threading.Event()
    budget = TimeBudget(budget_seconds, len(plan.todo), jobs) if budget_seconds else None
    pages = page_names({student.id: student.name for student in plan.students or plan.todo})
    graded: list[GradedSubmission] = []
    # A signal once every submission is graded lets the gradebook be written whole.
    if new_file:
        # Whole from its first moment: one reading the file as it grows never sees it empty.
        write_atomically(out, csv_text([], exercise_ids))
    with stopped_by_signals(cancel) as stop_point:
        with (
            out.open("a", newline="", encoding="utf-8") as stream,
            tempfile.TemporaryDirectory(prefix="kata-grade-") as scratch,
            ThreadPoolExecutor(max_workers=jobs) as pool,
        ):
            writer = csv.writer(stream)
            running: set[Future[GradedSubmission]] = {
                pool.submit(
                    grade_submission,
                    course,
                    student,
                    limits,
                    Path(scratch) / str(n),
                    cancel,
                    budget,
                    with_feedback=feedback_dir is not None,
                )
                for n, student in enumerate(plan.todo)
            }
            try:
                while running:
                    finished, running = wait(
                        running, SIGNAL_POLL_SECONDS, return_when=FIRST_COMPLETED
                    )
                    stop_point()  # before a row: what finished after a signal is not whole
                    for future in finished:
                        result = future.result()
                        entry = json_entry(result)
                        entries[result.id] = entry
                        if json_path:
                            write_atomically(
                                json_path, _json_text(list(entries.values()), plan.provenance)
                            )
                        writer.writerow(csv_row(entry, exercise_ids))
                        stream.flush()
                        if feedback_dir and result.feedback:
                            title = f"{course.title}: feedback for {result.student.shown_name}"
                            write_feedback(feedback_dir, pages[result.id], title, result.feedback)
                        graded.append(result)
                        if on_graded:
                            on_graded(result)
            except BaseException:
                cancel.set()
                for future in running:
                    future.cancel()
                raise
        # Of every submission in the JSON gradebook, or of this run's without one.
        write_gradebook(
            plan.provenance,
            list(entries.values()),
            read_csv_rows(out, exercise_ids),
            out=out,
            json_path=json_path,
            report_path=report_path,
            lms_path=lms_path,
        )
    return graded
