"""Taking in an upload: a student's exercise files, from a folder or a .zip, and a summary.

An upload (Gradescope's /autograder/submission, one submission of `kata grade`) is a
folder or a .zip holding some or all of a student's `NN_name.py` files, however nested.
Only files named exactly like an exercise are taken (the shallowest of each name), copied
into a folder of their own, so nothing else in it (a `conftest.py`, a `checks/` folder, a
symlink) ever reaches the grader. Everything else is accounted for, and `summary` says it
in one line a student understands:

- **missing**: an exercise with no file;
- **ignored**: a file over FILE_LIMIT_BYTES; a `.py` file whose name is close to an
  exercise's but not it (`01-immutability.py`, `01_immutability (1).py`); an archive that
  is not opened (nested in another, not a .zip, damaged, or past the limits);
- **extra**: any other file, listed by name.

A .zip inside a folder upload is opened (a student who zips the folder and uploads that):
its members are read, never extracted, at most ARCHIVE_MEMBERS of them and
ARCHIVE_BYTES in all, whatever sizes the archive claims, and a member's path is only a
name to match (`../../x/01_demo.py` is `01_demo.py`), so nothing lands outside the folder.
A loose file wins over one from an archive. Paths in the summary are relative to the upload.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kata.course import Course, Exercise, original_stub
from kata.results import ExerciseResult, Grading

FILE_LIMIT_BYTES = 1024 * 1024
# What one archive in an upload may make the grader read: a class's uploads are a few
# files of a few kB, and a zip bomb of 10 GB stops at these.
ARCHIVE_MEMBERS = 1000
ARCHIVE_BYTES = 32 * 1024 * 1024
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tgz", ".gz", ".bz2", ".xz", ".7z", ".rar")
# Files every operating system or editor leaves beside a student's; never worth a word.
NOISE = re.compile(r"(^|/)(__MACOSX|__pycache__|\.DS_Store|\.ipynb_checkpoints|Thumbs\.db)(/|$)")
# How many extra files the summary names before it counts the rest.
NAMED_EXTRAS = 5


@dataclass
class Intake:
    """What an upload held: the exercise files taken, and everything else by kind."""

    taken: dict[str, str] = field(default_factory=dict)  # exercise file name -> where from
    missing: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # "where (why)"
    extra: list[str] = field(default_factory=list)
    unreadable: str | None = None
    # Why an exercise's file was there but not graded (too big, wrong name), by file name.
    not_graded: dict[str, str] = field(default_factory=dict)

    def problem(self, filename: str) -> str:
        """Why exercise file `filename` was not graded, for its row of the results."""
        return self.not_graded.get(filename, f"missing: there is no {filename} in your upload")

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
        """The summary as a gradebook's notes: one per kind, nothing when all is well."""
        notes = [f"ignored: {item}" for item in self.ignored]
        if self.unreadable:
            notes.append(f"could not read the submission: {self.unreadable}")
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
            found = list(_from_archive(upload, upload.name, 0, intake, top=True))
        elif upload.is_dir():
            found = list(_from_folder(upload, intake))
        else:
            raise OSError(f"{upload.name} is neither a folder nor a .zip")
    except (OSError, zipfile.BadZipFile) as error:
        intake.unreadable = str(error) if not isinstance(error, OSError) else _reason(error)
        intake.missing = sorted(wanted)
        return intake
    chosen: dict[str, _Found] = {}
    for item in found:
        base = PurePosixPath(item.name.rpartition(":")[2]).name
        if base in wanted:
            if item.content is None:
                why = f"over {FILE_LIMIT_BYTES // 1024} KiB"
                intake.ignored.append(f"{item.name} ({why})")
                intake.not_graded.setdefault(base, f"not graded: your {item.name} is {why}")
                continue
            best = chosen.get(base)
            if best is None or (item.from_archive, item.depth) < (best.from_archive, best.depth):
                if best is not None:
                    intake.ignored.append(f"{best.name} (another {base} was graded)")
                chosen[base] = item
            else:
                intake.ignored.append(f"{item.name} (another {base} was graded)")
        elif close := _close_exercise_name(base, wanted):
            intake.ignored.append(f"{item.name} (wrong name: name it {close})")
            intake.not_graded.setdefault(
                close, f"not graded: the file must be named {close}, not {item.name}"
            )
        else:
            intake.extra.append(item.name)
    for base, item in sorted(chosen.items()):
        assert item.content is not None
        (into / base).write_bytes(item.content)
        intake.taken[base] = item.name
        intake.not_graded.pop(base, None)
    intake.missing = sorted(set(wanted) - set(chosen) - set(intake.not_graded))
    return intake


def _from_folder(upload: Path, intake: Intake) -> Iterator[_Found]:
    for folder, subfolders, files in os.walk(upload, followlinks=False):
        subfolders.sort()
        for name in sorted(files):
            path = Path(folder) / name
            relative = path.relative_to(upload).as_posix()
            if NOISE.search(relative):
                continue
            if path.is_symlink():  # never followed: it could point anywhere on the grader
                intake.ignored.append(f"{relative} (a link: upload the file itself)")
                continue
            if not path.is_file():  # a named pipe or a device: reading one may never end
                intake.ignored.append(f"{relative} (not a plain file)")
                continue
            depth = relative.count("/")
            if name.lower().endswith(".zip"):
                yield from _from_archive(path, relative, depth, intake, top=False)
            elif name.lower().endswith(ARCHIVE_SUFFIXES):
                intake.ignored.append(f"{relative} (an archive kata does not open: upload a .zip)")
            else:
                with path.open("rb") as stream:
                    content = stream.read(FILE_LIMIT_BYTES + 1)
                yield _Found(relative, depth, False, _limited(content))


def _from_archive(
    path: Path, shown: str, depth: int, intake: Intake, *, top: bool
) -> Iterator[_Found]:
    """The members of a .zip, read within the limits; for an archive inside a folder, a
    damaged one is ignored with its reason rather than ending the intake."""
    prefix = "" if top else f"{shown}:"
    try:
        with zipfile.ZipFile(path) as archive:
            members = [i for i in archive.infolist() if not i.is_dir()]
            if len(members) > ARCHIVE_MEMBERS:
                intake.ignored.append(f"{shown} (not opened: over {ARCHIVE_MEMBERS} files in it)")
                return
            budget = ARCHIVE_BYTES
            for info in members:
                name = info.filename.replace("\\", "/")
                if NOISE.search(name):
                    continue
                member = PurePosixPath(
                    *[p for p in PurePosixPath(name).parts if p not in ("..", "/")]
                )
                if member.name.lower().endswith(ARCHIVE_SUFFIXES):
                    intake.ignored.append(
                        f"{prefix}{member} (an archive inside an archive: not opened)"
                    )
                    continue
                # Read at most the limit, whatever the archive claims, against zip bombs.
                content = archive.open(info).read(min(FILE_LIMIT_BYTES, budget) + 1)
                budget -= len(content)
                if budget < 0:
                    intake.ignored.append(
                        f"{shown} (not opened further: over {ARCHIVE_BYTES // 2**20} MiB in it)"
                    )
                    return
                yield _Found(
                    f"{prefix}{member}", depth + len(member.parts) - 1, not top, _limited(content)
                )
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as error:
        if top:
            raise zipfile.BadZipFile(f"{shown} is not a readable .zip ({error})") from None
        intake.ignored.append(f"{shown} (a .zip that could not be opened: {error})")


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
    return Grading(source=grading.source, results=results)


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


def _close_exercise_name(name: str, wanted: set[str]) -> str | None:
    """The exercise file a .py file was likely meant to be (`01-demo.py`, `01_demo (1).py`,
    `demo.py`, `01_demo.PY`), or None."""
    stem, dot, suffix = name.rpartition(".")
    if not dot or suffix.lower() != "py" and not name.lower().endswith(".py.txt"):
        return None
    key = _normalised(name.lower().removesuffix(".txt").removesuffix(".py"))
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
    nothing (kata.instructor.scoring)."""
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
    return _as_an_editor_leaves_it(submitted) == _as_an_editor_leaves_it(stub)


def _as_an_editor_leaves_it(text: str) -> str:
    """`text` with its line endings and trailing blank space made alike."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").strip().splitlines())
