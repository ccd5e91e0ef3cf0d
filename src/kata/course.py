"""Course discovery: where the course is, which exercises it has, and how ids resolve.

A course is a folder holding `course.toml` (exercise order, titles, hints; per-task hints
in an `[exercise.task_hints]` table after the exercise's entry),
`exercises/` (the learner's files), `solutions/` and `checks/`: a clone of kata's
repository is one. A folder written by `kata init` has no `solutions/`: its reference
solutions and original stubs are the ones shipped inside the installed kata (package data,
see `shipped_course_root`). Nothing here imports JAX, so every command that only reads the
course starts instantly.
"""

from __future__ import annotations

import ast
import difflib
import importlib.resources
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10, Ubuntu 22.04's and so Gradescope's default image's: the same parser
    import tomli as tomllib

MANIFEST = "course.toml"
CHECK_FILE_PREFIX = "test_"


def check_file_name(exercise_id: str) -> str:
    """The file of an exercise's checks: `checks/test_<id>.py`."""
    return f"{CHECK_FILE_PREFIX}{exercise_id}.py"


def exercise_of_check_file(path: Path) -> str:
    """The exercise id a check file is named for (the inverse of `check_file_name`)."""
    return path.stem.removeprefix(CHECK_FILE_PREFIX)


class CourseError(Exception):
    """The course cannot be found or read; the message says what to do."""


class UnknownExercise(CourseError):
    def __init__(self, text: str, suggestion: str | None) -> None:
        hint = f"; did you mean {suggestion}?" if suggestion else "; run `kata list` to see them"
        super().__init__(f"no exercise matches {text!r}{hint}")
        self.suggestion = suggestion


@dataclass(frozen=True)
class ReferenceSpeed:
    """A speed someone else measured for an exercise's timed code (course.toml's
    `[exercise.reference_speed]`), shown beside the learner's own once the exercise passes."""

    check: str  # the check function whose measurement the learner reads
    who: str  # whose figure: "the tutorial"
    eager_ms: float
    first_call_ms: float
    jit_ms: float
    setting: str  # what was timed, where: "a 1000×1000 array on a TPU v6e-1"
    why: str  # why the learner's figure differs

    @property
    def speedup(self) -> float:
        return self.eager_ms / self.jit_ms


@dataclass(frozen=True)
class CheckHint:
    """A hint for one check's failure, and the failures it answers: a check's finding
    (kata.findings: "wrong value", "scan's pair"), `raised <Exception>` for an
    error of the learner's code, or `diagnosed <rule>` for one kata.diagnosis.diagnose
    recognised."""

    text: str
    answers: tuple[str, ...]


def check_hint(check: str, entry: object) -> CheckHint:
    """The check hint course.toml gives `check` (`text` and `answers`)."""
    if not (isinstance(entry, dict) and entry.get("text") and entry.get("answers")):
        raise CourseError(
            f"check hint {check}: give its `text` and the failures it `answers` "
            '(answers = ["wrong value"], say), so that it is offered for those alone'
        )
    return CheckHint(str(entry["text"]), tuple(str(kind) for kind in entry["answers"]))


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    concept: str
    hints: tuple[str, ...]
    points: float = 1.0
    # Per-task hints, in course.toml's `[exercise.task_hints]` table (task = the checks'
    # @pytest.mark.task name): `kata hint` then helps with the first unsolved task.
    task_hints: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Whether a task earns part of its points for part of its checks (kata.reporting.scoring):
    # course.toml's `[grading] partial_credit`, or the exercise's own `partial_credit`.
    partial_credit: bool = False
    # Hints for a failure, in `[exercise.check_hints.<check function name>]`: the next hint
    # after that check failed in a way the hint answers (see kata.learning.hints).
    check_hints: tuple[tuple[str, CheckHint], ...] = ()
    # `host_devices = 8`: its learner's process runs on JAX's CPU backend with that many
    # devices (a GPU or TPU left aside), so an exercise about many devices grades alike on
    # any machine (kata.learner_side.learner_process.use_host_devices). 0: the machine's own.
    host_devices: int = 0
    reference_speed: ReferenceSpeed | None = None

    def hints_for(self, task: str | None) -> tuple[str, ...]:
        """The task's own hints, else the exercise-wide ones."""
        return dict(self.task_hints).get(task, self.hints) if task else self.hints

    @property
    def number(self) -> int:
        return int(self.id.split("_", 1)[0])

    @property
    def name(self) -> str:
        return self.id.split("_", 1)[1]

    @property
    def filename(self) -> str:
        return f"{self.id}.py"


@dataclass(frozen=True)
class Course:
    root: Path
    title: str
    exercises: tuple[Exercise, ...]
    # The cheat sheet's PyTorch → JAX table: (PyTorch spelling, JAX spelling) pairs.
    mapping: tuple[tuple[str, str], ...] = ()

    @property
    def exercises_dir(self) -> Path:
        return self.root / "exercises"

    @property
    def ships_own_solutions(self) -> bool:
        """A full course (a clone) rather than a learner's folder from `kata init`."""
        return (self.root / "solutions").is_dir()

    @property
    def solutions_dir(self) -> Path:
        """The reference solutions: the course's own, else the ones kata ships."""
        if self.ships_own_solutions:
            return self.root / "solutions"
        return shipped_course_root() / "solutions"

    @property
    def checks_dir(self) -> Path:
        return self.root / "checks"

    @property
    def state_dir(self) -> Path:
        return self.root / ".kata"

    @property
    def host_devices(self) -> int:
        """The most CPU devices any exercise's learner's process gets: the judge gets as
        many, to compile and run the programs those exercises hand over."""
        return max((e.host_devices for e in self.exercises), default=0)

    def check_file(self, exercise: Exercise) -> Path:
        return self.checks_dir / check_file_name(exercise.id)

    def resolve(self, text: str) -> Exercise:
        """The exercise named by `05_prng`, `05`, `5` or `prng`."""
        wanted = text.strip().lower().removesuffix(".py")
        for exercise in self.exercises:
            if wanted in (exercise.id, exercise.name):
                return exercise
            if wanted.isdigit() and int(wanted) == exercise.number:
                return exercise
        names = [e.id for e in self.exercises] + [e.name for e in self.exercises]
        close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.5)
        suggestion = next(
            (e.id for e in self.exercises if close and close[0] in (e.id, e.name)), None
        )
        raise UnknownExercise(text, suggestion)

    def resolve_all(self, texts: tuple[str, ...] | list[str]) -> list[Exercise]:
        """The named exercises in course order, or every exercise when none is named."""
        if not texts:
            return list(self.exercises)
        chosen = {self.resolve(text).id for text in texts}
        return [e for e in self.exercises if e.id in chosen]


def shipped_course_root() -> Path:
    """The course inside the installed kata: its package data `kata/bundled_course` (the
    wheel maps the repository's course files there), or, in an editable install, the
    repository it runs from."""
    packaged = importlib.resources.files("kata") / "bundled_course"
    if isinstance(packaged, Path) and (packaged / MANIFEST).is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / MANIFEST).is_file():
        return checkout
    raise CourseError("this installation of kata carries no course: reinstall kata-jax")


def find_course(start: Path | None = None) -> Course:
    """The course containing `start` (default: $KATA_COURSE, else the working folder)."""
    if start is None:
        start = Path(os.environ.get("KATA_COURSE") or Path.cwd())
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / MANIFEST).is_file():
            return load_course(folder)
    raise CourseError(
        f"no kata course found in {start} or above it; cd into your course (`kata init "
        "FOLDER` makes one) or name it before the command: `kata --course PATH check`"
    )


def load_course(root: Path) -> Course:
    manifest = root / MANIFEST
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
        partial_credit = data.get("grading", {}).get("partial_credit", False)
        exercises = tuple(
            Exercise(
                id=entry["id"],
                title=entry["title"],
                concept=entry.get("concept", entry["id"].split("_", 1)[1]),
                hints=tuple(entry.get("hints", ())),
                task_hints=tuple(
                    (str(task), tuple(texts)) for task, texts in entry.get("task_hints", {}).items()
                ),
                check_hints=tuple(
                    (str(check), check_hint(check, hint))
                    for check, hint in entry.get("check_hints", {}).items()
                ),
                points=float(entry.get("points", 1.0)),
                partial_credit=bool(entry.get("partial_credit", partial_credit)),
                host_devices=int(entry.get("host_devices", 0)),
                reference_speed=(
                    ReferenceSpeed(**entry["reference_speed"])
                    if "reference_speed" in entry
                    else None
                ),
            )
            for entry in data["exercise"]
        )
        title = data.get("course", {}).get("title", root.name)
        mapping = tuple(
            (str(row["pytorch"]), str(row["jax"]))
            for row in data.get("course", {}).get("mapping", [])
        )
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as error:
        raise CourseError(f"cannot read {manifest}: {error}") from error
    return Course(root=root.resolve(), title=title, exercises=exercises, mapping=mapping)


def lesson(path: Path) -> str | None:
    """The module docstring of an exercise file, read without running it."""
    try:
        return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, ValueError):
        return None


def git(course: Course, *args: str) -> str | None:
    """The output of a git command in the course folder; None where git cannot answer."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=course.root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def original_stub(course: Course, exercise: Exercise) -> str | None:
    """The stub as the course shipped it; None where it cannot be told.

    A folder from `kata init` takes it from the installed kata. A clone takes it from git,
    the upstream branch first, so that a learner who commits their own work still gets
    the course's stub back; a fresh clone without one falls back to HEAD.
    """
    if not course.ships_own_solutions:
        try:
            shipped = shipped_course_root() / "exercises" / exercise.filename
            return shipped.read_text(encoding="utf-8")
        except (CourseError, OSError):
            return None
    # "./": relative to the course folder, which may lie below the repository's top.
    relative = f"./exercises/{exercise.filename}"
    for ref in ("@{upstream}", "HEAD"):
        shown = git(course, "show", f"{ref}:{relative}")
        if shown is not None:
            return shown
    return None


def as_an_editor_leaves_it(text: str) -> str:
    """`text` with its line endings and trailing blank space made alike, as editors vary."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().splitlines())
