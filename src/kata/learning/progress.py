"""The learner's progress: each exercise's last verdict, and the hints shown so far.

Kept in `.kata/state.json` in the course root, written atomically (a temporary file
renamed over the old one), so an interrupted write never leaves half a file. Deleting
`.kata/` only forgets progress; a corrupt file is set aside and rebuilt, with a warning.
A verdict belongs to the file's content it was given for (its SHA-256): edit the file and
the verdict is stale, so `kata list` and `kata next` re-grade it before they answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kata.course import Course, Exercise, original_stub
from kata.results import MEASURES

STATE_FILE = "state.json"
STATE_VERSION = 1

DONE = "done"
PENDING = "pending"
CURRENT = "current"


@dataclass
class Progress:
    path: Path
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    hints_shown: dict[str, int] = field(default_factory=dict)
    warning: str | None = None  # set when the file on disk was unreadable and was rebuilt

    def save(self) -> None:
        data = {
            "version": STATE_VERSION,
            "verdicts": self.verdicts,
            "hints_shown": self.hints_shown,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".state-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(data, stream, indent=2, sort_keys=True)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def load_progress(course: Course) -> Progress:
    path = course.state_dir / STATE_FILE
    if not path.exists():
        return Progress(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        verdicts = data["verdicts"]
        hints_shown = {str(k): int(v) for k, v in data["hints_shown"].items()}
        if not all(isinstance(v.get("passed"), bool) for v in verdicts.values()):
            raise ValueError("a verdict is not a table with `passed`")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        kept = path.with_name(f"{STATE_FILE}.corrupt")
        try:
            os.replace(path, kept)
        except OSError:
            kept = path
        return Progress(
            path,
            warning=f"progress file {path} was unreadable ({error}); starting afresh "
            f"(the old file is kept as {kept.name})",
        )
    return Progress(path, verdicts=verdicts, hints_shown=hints_shown)


def _verdict(course: Course, progress: Progress, exercise: Exercise) -> bool | None:
    """The recorded verdict on the file as it is now; None if it changed since."""
    entry = progress.verdicts.get(exercise.id)
    if entry is None or entry.get("sha256") != file_digest(
        course.exercises_dir / exercise.filename
    ):
        return None
    return entry["passed"]


def is_done(course: Course, progress: Progress, exercise: Exercise) -> bool:
    return _verdict(course, progress, exercise) is True


def digests(course: Course, exercises: list[Exercise]) -> dict[str, str | None]:
    """Each exercise file's SHA-256 now: taken before grading, so that a save made while
    the checks run is not credited with the verdict on the file they graded."""
    return {e.id: file_digest(course.exercises_dir / e.filename) for e in exercises}


def record_result(
    progress: Progress,
    exercise: Exercise,
    passed: bool,
    sha256: str | None,
    unsolved: list[str] | None = None,
    measurements: dict[str, dict[str, float]] | None = None,
    failures: dict[str, dict[str, Any]] | None = None,
    does_not_load: str | None = None,
) -> None:
    """The verdict on a file's content, with the tasks it left unsolved, what each one's
    first failing check failed on (`failures`, for the hints), why the file did not load
    where it did not (`does_not_load`: then that is the failure every check saw), and what
    its checks measured (`measurements`, by check then measure; kept across verdicts: the
    recap quotes the best)."""
    best = measured(progress.verdicts.get(exercise.id, {}))
    for check, numbers in (measurements or {}).items():
        kept = best.setdefault(check, {})
        for name, value in numbers.items():
            kept[name] = MEASURES[name].best(value, kept[name]) if name in kept else value
    progress.verdicts[exercise.id] = {
        "sha256": sha256,
        "passed": passed,
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "unsolved": unsolved or [],
        "failures": failures or {},
        "does_not_load": does_not_load,
        "measurements": best,
    }


def measured(entry: dict[str, Any]) -> dict[str, dict[str, float]]:
    """An exercise's best measurements, by check then measure; a progress file written
    before measurements had names kept speedups alone."""
    if "measurements" in entry:
        return {check: dict(numbers) for check, numbers in entry["measurements"].items()}
    return {check: {"speedup": ratio} for check, ratio in entry.get("speedups", {}).items()}


def unsolved_tasks(progress: Progress, exercise: Exercise) -> list[str] | None:
    """The tasks the exercise's last grading left unsolved; None if never graded (or
    forgotten since)."""
    entry = progress.verdicts.get(exercise.id)
    return None if entry is None or "unsolved" not in entry else list(entry["unsolved"])


def forget_grading(progress: Progress, exercise: Exercise) -> None:
    """Drop the exercise's verdict (its file went back to the stub), keeping what it once
    measured for the recap."""
    entry = progress.verdicts.get(exercise.id)
    if entry is not None:
        progress.verdicts[exercise.id] = {
            "sha256": None,
            "passed": False,
            "measurements": measured(entry),
        }


def measurements(progress: Progress) -> dict[str, dict[str, dict[str, float]]]:
    """The best each check measured, by exercise id, check name and measure."""
    found = {exercise_id: measured(entry) for exercise_id, entry in progress.verdicts.items()}
    return {exercise_id: best for exercise_id, best in found.items() if best}


def needs_grading(
    course: Course, progress: Progress, exercises: list[Exercise] | None = None
) -> list[Exercise]:
    """Exercises whose file changed since its last verdict and is not the untouched stub."""
    stale = []
    for exercise in course.exercises if exercises is None else exercises:
        if _verdict(course, progress, exercise) is not None:
            continue
        path = course.exercises_dir / exercise.filename
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None
        if text is None or text != original_stub(course, exercise):
            stale.append(exercise)
    return stale


def states(course: Course, progress: Progress) -> list[tuple[Exercise, str]]:
    """Each exercise in order with done, current (the first not done) or pending."""
    rows, current_seen = [], False
    for exercise in course.exercises:
        if is_done(course, progress, exercise):
            rows.append((exercise, DONE))
        elif not current_seen:
            rows.append((exercise, CURRENT))
            current_seen = True
        else:
            rows.append((exercise, PENDING))
    return rows


def current_exercise(course: Course, progress: Progress) -> Exercise | None:
    return next((e for e, state in states(course, progress) if state == CURRENT), None)


def back_up(course: Course, path: Path) -> Path | None:
    """Copy a learner's file to `.kata/backups/` before it is replaced; None if absent."""
    if not path.exists():
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    backup = course.state_dir / "backups" / f"{path.stem}.{stamp}{path.suffix}"
    backup.parent.mkdir(parents=True, exist_ok=True)
    backup.write_bytes(path.read_bytes())
    return backup
