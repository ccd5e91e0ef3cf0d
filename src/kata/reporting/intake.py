"""Taking in an upload: a student's exercise files, from a folder or a .zip, and a summary.

An upload (Gradescope's /autograder/submission, one submission of `kata grade`) is a
folder or a .zip holding some or all of a student's `NN_name.py` files, however nested.
Only files named exactly like an exercise are taken (the shallowest of each name), copied
into a folder of their own, so nothing else in it (a `conftest.py`, a `checks/` folder, a
symlink) ever reaches the grader. Everything else is accounted for, and `summary` says it
in one line a student understands:

- **missing**: an exercise with nothing in the upload meant for it;
- **ignored**, each with its reason: a file over FILE_LIMIT_BYTES, or empty; a link or
  anything but a plain file; a folder named like an exercise file (`01_demo.py/`); a
  file whose name is close to an exercise's but not it (`01-demo.py`, `01_Demo.py`,
  `01_demo (1).py`, `01_demo.py.txt`, `01_demo.ipynb`); the copies of an exercise file
  that lost to the one graded; an archive that is not opened (nested in another, not a
  .zip, damaged, or past the limits);
- **extra**: any other file, listed by name.

Where what was ignored was meant as an exercise's file, that exercise's row says why it
was not graded (`Intake.problem`), never only "missing".

A .zip inside a folder upload is opened (a student who zips the folder and uploads that):
its members are read, never extracted, at most ARCHIVE_MEMBERS of them and
ARCHIVE_BYTES in all, whatever sizes the archive claims, and a member's path is only a
name to match (`../../x/01_demo.py` is `01_demo.py`), so nothing lands outside the folder.
A loose file wins over one from an archive. Paths in the summary are relative to the upload.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import os
import re
import stat
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kata.course import Course, Exercise, as_an_editor_leaves_it, original_stub
from kata.results import CheckResult, ExerciseResult, Grading, Limits

FILE_LIMIT_BYTES = 1024 * 1024
# What one archive in an upload may make the grader read: a class's uploads are a few
# files of a few kB, and a zip bomb of 10 GB stops at these.
ARCHIVE_MEMBERS = 1000
ARCHIVE_BYTES = 32 * 1024 * 1024
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".gz", ".bz2", ".xz", ".7z", ".rar")
# Files every operating system or editor leaves beside a student's; never worth a word.
# (`._name` is macOS's record of a file's attributes, written beside it in archives.)
NOISE = re.compile(
    r"(^|/)(__MACOSX|__pycache__|\.DS_Store|\.ipynb_checkpoints|Thumbs\.db)(/|$)|(^|/)\._[^/]*$"
)
# How many extra files the summary names before it counts the rest.
NAMED_EXTRAS = 5
# Why a link, or a folder named like an exercise file, is not graded (said after "it is").
LINK = "a link: upload the file itself"
FOLDER = "a folder, not a file: upload the file itself"
# Said once of an upload that holds no exercise file, nor anything meant as one, in place
# of every exercise's "missing".
NOTHING_SUBMITTED = "nothing submitted: the upload holds none of the course's exercise files"


@dataclass
class Intake:
    """What an upload held: the exercise files taken, and everything else by kind."""

    taken: dict[str, str] = field(default_factory=dict)  # exercise file name -> where from
    missing: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # "where (why)"
    extra: list[str] = field(default_factory=list)
    unreadable: str | None = None
    # Why what was meant as an exercise's file was not graded, by the exercise's file name.
    not_graded: dict[str, str] = field(default_factory=dict)
    # Each `ignored` item that a `not_graded` reason tells: the exercise's file name.
    meant_for: dict[str, str] = field(default_factory=dict)
    # Archives kata did not open: an exercise file missing may be in one.
    unopened: list[str] = field(default_factory=list)
    # The `ignored` items that are folders named like an exercise file.
    folders: set[str] = field(default_factory=set)

    def refuse(self, shown: str, why: str, exercise: str | None = None) -> None:
        """`shown` (a path in the upload) is not graded, for `why` (said after "it is");
        when it was meant as `exercise`'s file, that exercise's row says so."""
        item = f"{shown} ({why})"
        self.ignored.append(item)
        if exercise is not None:
            self.meant_for[item] = exercise
            self.not_graded.setdefault(exercise, f"not graded: your {shown} is {why}")

    @property
    def nothing_submitted(self) -> bool:
        """Read whole, and nothing in it is, or was meant as, an exercise's file (an archive
        kata did not open may hold them: each exercise's row then names it)."""
        return not (self.unreadable or self.taken or self.not_graded or self.unopened)

    def problem(self, filename: str) -> str:
        """Why exercise file `filename` was not graded, for its row of the results."""
        if filename in self.not_graded:
            return self.not_graded[filename]
        unopened = f"; kata did not open {', '.join(self.unopened)}" if self.unopened else ""
        return f"missing: there is no {filename} in your upload{unopened}"

    def summary(self, exercises: int) -> str:
        """One line: what was graded of the course's `exercises`, missing, ignored, extra."""
        if self.unreadable:
            return f"Your upload could not be read: {self.unreadable}."
        # Where files came from, when not the top of the upload: an archive once, by name.
        places = dict.fromkeys(
            f"from {where.partition(':')[0]}" if ":" in where else where
            for name, where in self.taken.items()
            if where != name
        )
        taken = ", ".join(places)
        if self.nothing_submitted:
            parts = [
                f"Nothing submitted: your upload holds none of the {exercises} exercise "
                f"files ({', '.join(self.missing)})"
            ]
        else:
            parts = [
                f"Graded {len(self.taken)} of {exercises} exercise files"
                + (f" ({taken})" if taken else "")
            ]
            if self.missing:
                parts.append(f"Missing: {', '.join(self.missing)}")
        if self.ignored:
            parts.append(f"Ignored: {'; '.join(self.ignored)}")
        if self.extra:
            named = ", ".join(self.extra[:NAMED_EXTRAS])
            more = len(self.extra) - NAMED_EXTRAS
            parts.append(
                "Other files, not graded: " + named + (f" and {more} more" if more > 0 else "")
            )
        return ". ".join(parts) + "."

    def notes(self) -> list[str]:
        """The summary as a gradebook's notes, nothing when all is well; what an exercise's
        row says (`problem`) is left to it, but where nothing was submitted at all."""
        notes = [
            f"ignored: {item}"
            for item in self.ignored
            if self.meant_for.get(item) not in self.not_graded
        ]
        if self.unreadable:
            notes.append(f"could not read the submission: {self.unreadable}")
        if self.nothing_submitted:
            notes.append(NOTHING_SUBMITTED)
        return notes


@dataclass(frozen=True)
class _Found:
    name: str  # where it is, relative to the upload ("hw/01_demo.py", "hw.zip:01_demo.py")
    depth: int
    from_archive: bool
    content: bytes | None  # None: over the size limit


def take_in(course: Course, upload: Path, into: Path) -> Intake:
    """Copy the exercise files of `upload` (a folder or a .zip) into `into`, a new folder."""
    wanted = {e.filename for e in course.exercises}
    into.mkdir(parents=True)
    intake = Intake()
    try:
        if upload.is_file() and upload.suffix == ".zip":
            found = list(_from_archive(upload, upload.name, 0, intake, wanted, top=True))
        elif upload.is_dir():
            found = list(_from_folder(upload, intake, wanted))
        else:
            raise OSError(f"{upload.name} is neither a folder nor a .zip")
    except (OSError, zipfile.BadZipFile) as error:
        intake.unreadable = str(error) if not isinstance(error, OSError) else _reason(error)
        intake.missing = sorted(wanted)
        return intake
    chosen: dict[str, _Found] = {}
    lost: list[tuple[str, _Found]] = []
    for item in found:
        base = PurePosixPath(item.name.rpartition(":")[2]).name
        if base in wanted:
            if item.content is None:
                intake.refuse(item.name, f"over {FILE_LIMIT_BYTES // 1024} KiB", base)
                continue
            if not item.content.strip():  # an editor's unsaved buffer, an upload cut short
                intake.refuse(item.name, "empty", base)
                continue
            best = chosen.get(base)
            if best is None or (item.from_archive, item.depth) < (best.from_archive, best.depth):
                if best is not None:
                    lost.append((base, best))
                chosen[base] = item
            else:
                lost.append((base, item))
        elif meant := meant_as_exercise(base, wanted):
            intake.refuse(item.name, meant[1], meant[0])
        else:
            intake.extra.append(item.name)
    for base, item in lost:  # named once the choice is made: the shallowest, loose first
        intake.ignored.append(f"{item.name} (another {base} was graded: {chosen[base].name})")
    for base, item in sorted(chosen.items()):
        assert item.content is not None
        (into / base).write_bytes(item.content)
        intake.taken[base] = item.name
        intake.not_graded.pop(base, None)
    # A folder named like an exercise file graded (from it, or elsewhere) needs no word.
    intake.ignored = [
        item
        for item in intake.ignored
        if item not in intake.folders or intake.meant_for[item] not in chosen
    ]
    intake.missing = sorted(set(wanted) - set(chosen) - set(intake.not_graded))
    return intake


def _from_folder(upload: Path, intake: Intake, wanted: set[str]) -> Iterator[_Found]:
    for folder, subfolders, files in os.walk(upload, followlinks=False):
        subfolders.sort()
        for name in subfolders:
            path = Path(folder) / name
            relative = path.relative_to(upload).as_posix()
            if NOISE.search(relative):
                continue
            if path.is_symlink():  # os.walk lists a link to a folder here, and never enters it
                intake.refuse(relative, LINK, _meant_exercise(name, wanted))
            else:
                _refuse_folder(relative, intake, wanted)
        for name in sorted(files):
            path = Path(folder) / name
            relative = path.relative_to(upload).as_posix()
            if NOISE.search(relative):
                continue
            if path.is_symlink():  # never followed: it could point anywhere on the grader
                intake.refuse(relative, LINK, _meant_exercise(name, wanted))
                continue
            if not path.is_file():  # a named pipe or a device: reading one may never end
                intake.refuse(relative, "not a plain file", _meant_exercise(name, wanted))
                continue
            depth = relative.count("/")
            if name.lower().endswith(".zip"):
                yield from _from_archive(path, relative, depth, intake, wanted, top=False)
            elif name.lower().endswith(ARCHIVE_SUFFIXES):
                intake.unopened.append(relative)
                intake.ignored.append(f"{relative} (an archive kata does not open: upload a .zip)")
            else:
                try:
                    with path.open("rb") as stream:
                        content = stream.read(FILE_LIMIT_BYTES + 1)
                except OSError as error:  # one file's permissions: the rest is still read
                    why = f"unreadable: {_reason(error)}"
                    intake.refuse(relative, why, _meant_exercise(name, wanted))
                    continue
                yield _Found(relative, depth, False, _limited(content))


def _from_archive(
    path: Path, shown: str, depth: int, intake: Intake, wanted: set[str], *, top: bool
) -> Iterator[_Found]:
    """The members of a .zip, read within the limits; for an archive inside a folder, a
    damaged one is ignored with its reason rather than ending the intake."""
    prefix = "" if top else f"{shown}:"
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            if len(infos) > ARCHIVE_MEMBERS:
                intake.unopened.append(shown)
                intake.ignored.append(f"{shown} (not opened: over {ARCHIVE_MEMBERS} files in it)")
                return
            paths = {info.filename: _member_path(info.filename) for info in infos}
            folders = [paths[info.filename] for info in infos if info.is_dir()]
            _refuse_folders([*paths.values()], folders, prefix, intake, wanted)
            budget = ARCHIVE_BYTES
            for info in infos:
                member = paths[info.filename]
                if info.is_dir() or NOISE.search(member.as_posix()):
                    continue
                if stat.S_ISLNK(info.external_attr >> 16):  # its content is where it points
                    intake.refuse(f"{prefix}{member}", LINK, _meant_exercise(member.name, wanted))
                    continue
                if member.name.lower().endswith(ARCHIVE_SUFFIXES):
                    intake.unopened.append(f"{prefix}{member}")
                    intake.ignored.append(
                        f"{prefix}{member} (an archive inside an archive: not opened)"
                    )
                    continue
                # Read at most the limit, whatever the archive claims, against zip bombs.
                content = archive.open(info).read(min(FILE_LIMIT_BYTES, budget) + 1)
                budget -= len(content)
                if budget < 0:
                    intake.unopened.append(shown)
                    intake.ignored.append(
                        f"{shown} (not opened further: over {ARCHIVE_BYTES // 2**20} MiB in it)"
                    )
                    return
                yield _Found(
                    f"{prefix}{member}", depth + len(member.parts) - 1, not top, _limited(content)
                )
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as error:
        # An OSError's own words name the archive's whole path on the grader's machine.
        why = _reason(error) if isinstance(error, OSError) else error
        if top:
            raise zipfile.BadZipFile(f"{shown} is not a readable .zip ({why})") from None
        intake.unopened.append(shown)
        intake.ignored.append(f"{shown} (a .zip that could not be opened: {why})")


def _member_path(name: str) -> PurePosixPath:
    """An archive member's path as a name only: never above the archive (`../x` is `x`)."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return PurePosixPath(*[p for p in parts if p not in ("..", "/")])


def _refuse_folders(
    members: list[PurePosixPath],
    listed: list[PurePosixPath],
    prefix: str,
    intake: Intake,
    wanted: set[str],
) -> None:
    """Each folder of an archive named like an exercise file, said once: a zip may list
    its folders (`listed`, an empty one too) or only the files in them."""
    parents = (parent for member in members for parent in reversed(member.parents))
    folders = dict.fromkeys(folder for folder in (*parents, *listed) if folder.name)
    for folder in folders:
        if not NOISE.search(folder.as_posix()):
            _refuse_folder(f"{prefix}{folder}", intake, wanted)


def _refuse_folder(shown: str, intake: Intake, wanted: set[str]) -> None:
    """A folder named like a Python file meant as an exercise's (`01_demo.py/`, not
    `01_demo/`, a student's way of sorting files) is no file to grade."""
    name = PurePosixPath(shown.rpartition(":")[2]).name
    python, py, after = name.lower().partition(".py")
    exercise = _meant_exercise(name, wanted) if py and not after.strip() else None
    if exercise is not None:
        intake.refuse(f"{shown}/", FOLDER, exercise)
        intake.folders.add(intake.ignored[-1])


@dataclass(frozen=True)
class GradedUpload:
    """An upload taken in and graded: what it held, and a result for every exercise of the
    course in its order, every path as the student has it; a file that is its stub as
    given is marked so (its checks not run), and an exercise with no file says why
    (`Intake.problem`)."""

    intake: Intake
    grading: Grading
    present: tuple[Exercise, ...]  # the exercises it held a file for


def grade_upload(
    course: Course,
    upload: Path,
    into: Path,
    limits_for: Callable[[int], Limits],
    cancel: threading.Event | None = None,
) -> GradedUpload:
    """Take `upload`'s exercise files in (a folder or a .zip, into `into`) and grade them,
    under the limits `limits_for` gives that many files: the one way a submission is
    graded, by `kata grade` (kata.instructor.gradebook) and Gradescope's
    (kata.instructor.gradescope).

    A file that is its stub as given earns nothing whatever its checks say
    (kata.reporting.scoring), so they are not run where the course's check file says what
    they are (`declared_checks`): one student's 8 untouched stubs took 151 s of a class's
    374 s, their eager speed checks most of it."""
    from kata.supervisor.runner import grade  # the engine: not needed to take files in

    intake = take_in(course, upload, into)
    present = [e for e in course.exercises if e.filename in intake.taken]
    as_given = {e.id: declared_checks(course, e) for e in present if is_stub(course, e, into)}
    not_run = {id: checks for id, checks in as_given.items() if checks is not None}
    to_run = [e for e in present if e.id not in not_run]
    grading = grade(course, to_run, into, limits_for(len(to_run)), cancel=cancel)
    graded = {r.exercise.id: r for r in grading.results}
    for result in graded.values():
        result.as_given = result.exercise.id in as_given
    for exercise in present:
        if exercise.id in not_run:
            graded[exercise.id] = ExerciseResult(exercise, not_run[exercise.id], as_given=True)
    results = [
        graded.get(e.id) or ExerciseResult(e, [], problem=intake.problem(e.filename))
        for e in course.exercises
    ]
    shown = relative_to_upload(dataclasses.replace(grading, results=results), course)
    return GradedUpload(intake, shown, tuple(present))


# Why a check of a file that is its stub as given was not run.
NOT_RUN_AS_GIVEN = "not run: the file is the stub as given, which earns nothing"


def declared_checks(course: Course, exercise: Exercise) -> list[CheckResult] | None:
    """The checks of `exercise` as its check file declares them, none run: each top-level
    `test_` function in order, with the id, name, task, speed mark and evidence a grading
    gives it (kata.judge.pytest_plugin's `check_name` and `task_of`,
    kata.supervisor.evidence). None where a reading cannot tell them as pytest would
    collect them: a file that cannot be read or parsed, a test class, `pytestmark`, a
    parametrized check."""
    from kata.supervisor.evidence import feedback_only  # reads check files as this does

    check_file = course.check_file(exercise)
    try:
        status = check_file.stat()
        declared = _declared(str(check_file), status.st_mtime_ns, status.st_size)
        feedback = feedback_only(check_file) if declared else frozenset()
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    if declared is None:
        return None
    node = check_file.relative_to(course.root).as_posix()
    return [
        CheckResult(
            id=f"{node}::{function}",
            exercise=exercise.id,
            name=name,
            task=task,
            speed=speed,
            message=NOT_RUN_AS_GIVEN,
            feedback_only=function in feedback,
        )
        for function, name, task, speed in declared
    ]


@functools.lru_cache(maxsize=64)
def _declared(
    path: str, _mtime_ns: int, _size: int
) -> tuple[tuple[str, str, str | None, bool], ...] | None:
    """Each check function of a check file: its function's name, its name for a learner,
    its task and whether it is the timed check; None where pytest would collect others."""
    # Under evidence's lock: `ast.parse` in two threads at once fails on CPython 3.11, and
    # a class's gradings read check files in threads.
    from kata.supervisor.evidence import _PARSING

    source = Path(path).read_text(encoding="utf-8")
    with _PARSING:
        tree = ast.parse(source)
    found = []
    for node in tree.body:
        if _collects_otherwise(node):
            return None
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not node.name.startswith("test_"):
            continue
        marks = _pytest_marks(node)
        task = marks.get("task")
        if "parametrize" in marks or not isinstance(task, ast.Constant | None):
            return None  # more checks than functions, or a task named by a variable
        doc = ast.get_docstring(node, clean=False)
        name = (
            doc.strip().splitlines()[0]
            if doc and doc.strip()
            else node.name.removeprefix("test_").replace("_", " ")
        )
        found.append((node.name, name, None if task is None else str(task.value), "speed" in marks))
    return tuple(found)


def _collects_otherwise(node: ast.stmt) -> bool:
    """A statement that makes pytest collect what no reading of its functions tells: a
    test class, marks on the whole module, checks generated by a hook."""
    if isinstance(node, ast.ClassDef):
        return node.name.startswith("Test")
    if isinstance(node, ast.Assign | ast.AnnAssign):
        return "pytestmark" in ast.unparse(node)
    if isinstance(node, ast.FunctionDef):
        return node.name == "pytest_generate_tests"
    return False


def _pytest_marks(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr | None]:
    """A function's pytest marks, each with its first argument (`@pytest.mark.task("double")`:
    "task", the constant "double")."""
    marks: dict[str, ast.expr | None] = {}
    for decorator in function.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(called, ast.Attribute) and ast.unparse(called.value).endswith("mark"):
            arguments = decorator.args if isinstance(decorator, ast.Call) else []
            marks.setdefault(called.attr, arguments[0] if arguments else None)
    return marks


def relative_to_upload(grading: Grading, course: Course | None = None) -> Grading:
    """`grading` of the files taken in, its every message showing a path in them relative
    to the upload (`01_demo.py`, not the grader's temporary folder) and the course's own
    files under `course/`: what a student reads names no place on the grader's machine."""
    replacements = {grading.source: "", grading.source.resolve(): ""}
    if course is not None:
        replacements[course.root] = "course"
    results = [
        dataclasses.replace(
            result,
            problem=hide_paths(result.problem, replacements),
            checks=[_hidden(check, replacements) for check in result.checks],
        )
        for result in grading.results
    ]
    return dataclasses.replace(grading, results=results)


def _hidden(item: Any, replacements: dict[Path, str]) -> Any:
    changes = {
        f.name: hide_paths(getattr(item, f.name), replacements) for f in dataclasses.fields(item)
    }
    return dataclasses.replace(item, **changes)


def hide_paths(value: Any, replacements: dict[Path, str]) -> Any:
    """`value` (text, or JSON-like data) with every path under a folder of `replacements`
    shown relative to it, under the name given (empty: as the student's own file names)."""
    if isinstance(value, str):
        for folder, shown in replacements.items():
            value = value.replace(f"{folder}/", f"{shown}/" if shown else "")
            value = value.replace(str(folder), shown or ".")
        return value
    if isinstance(value, list):
        return [hide_paths(item, replacements) for item in value]
    if isinstance(value, dict):
        return {key: hide_paths(item, replacements) for key, item in value.items()}
    return value


def _limited(content: bytes) -> bytes | None:
    return None if len(content) > FILE_LIMIT_BYTES else content


def meant_as_exercise(name: str, wanted: set[str]) -> tuple[str, str] | None:
    """The exercise file a file of another name was likely meant to be, and why it is not
    taken (said after "it is"), or None: a Python file, or text, under a name close to
    an exercise's (`01-demo.py`, `01_Demo.py`, `01_demo (1).py`, `demo.py`,
    `01_demo.py.txt`, `01_demo`), or another kind of file under its very name
    (`01_demo.ipynb`, `01_demo.pdf`)."""
    lower = name.lower().strip()
    python, py, after = lower.partition(".py")
    if py and python and (not after or after.startswith(".")):  # `x.py`, `x.py.txt`, `x.py.bak`
        exercise = _close_exercise_name(python, wanted)
        return (exercise, f"misnamed: name it {exercise}") if exercise else None
    stem, dot, suffix = lower.partition(".")
    exercise = _exercise_named(stem, wanted)
    if exercise is None:
        return None
    if suffix == "ipynb":
        return exercise, f"a notebook: kata grades {exercise}, its code saved as a .py file"
    if not dot or suffix == "txt":
        return exercise, f"misnamed: name it {exercise}"
    return exercise, f"a .{suffix} file: kata grades {exercise}, the code as a Python file"


def _meant_exercise(name: str, wanted: set[str]) -> str | None:
    """The exercise file a name stands for: its very name, or one close to it."""
    if name in wanted:
        return name
    meant = meant_as_exercise(name, wanted)
    return meant[0] if meant else None


def _exercise_named(stem: str, wanted: set[str]) -> str | None:
    """The exercise file whose name, without `.py`, is `stem` (case and separators aside)."""
    key = _normalised(stem)
    return next((f for f in sorted(wanted) if _normalised(f.removesuffix(".py")) == key), None)


def _close_exercise_name(stem: str, wanted: set[str]) -> str | None:
    """The exercise file a Python file named `stem`.py was likely meant to be (`01-demo`,
    `01_demo (1)`, `demo`, `01_Demo`), or None."""
    key = _normalised(stem)
    for filename in sorted(wanted):
        exercise = filename.removesuffix(".py")
        number, _, topic = exercise.partition("_")
        if key in (_normalised(exercise), _normalised(topic)) or key.startswith(
            _normalised(exercise)
        ):
            return filename
        if (
            key.startswith(number)
            and difflib.SequenceMatcher(None, key, _normalised(exercise)).ratio() > 0.8
        ):
            return filename
    return None


def _normalised(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def mark_stubs_as_given(course: Course, results: Iterable[ExerciseResult], folder: Path) -> None:
    """Mark each result whose file in `folder` is its exercise's stub as given: it earns
    nothing (kata.reporting.scoring)."""
    for result in results:
        result.as_given = is_stub(course, result.exercise, folder)


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
    return as_an_editor_leaves_it(submitted) == as_an_editor_leaves_it(stub)
