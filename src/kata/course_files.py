"""A learner's course folder written from the course shipped inside kata: `kata init` and
`kata update`.

The folder holds what a learner works with (the manifest, `exercises/`, `checks/`, a short
README and a `.gitignore` for `.kata/`), never the reference solutions: those stay in the
installed package, and `kata solution` reads them there. A learner's exercise file is
never overwritten: `update` keeps a file that differs from the installed stub, and writes
the new stub beside it (`NN_name.new.py`) only when asked.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kata.course import MANIFEST, Course, CourseError, load_course, shipped_course_root

DEFAULT_FOLDER = "kata-course"
NEW_STUB_SUFFIX = ".new.py"
GITIGNORE = ".kata/\n__pycache__/\n"
LEARNER_README = """\
# {title}

Your course folder, written by `kata init`. Fix each file in `exercises/` until its
checks pass; the checks in `checks/` judge what your code does.

```sh
kata next        # the current exercise: its lesson, its file, its checks
kata check 01    # grade one exercise (ids: 01_immutability, 01, 1 or immutability)
kata hint        # the next hint for the current exercise
kata watch       # re-grade on every save, move on when it passes
kata list        # every exercise and where you stand
kata update      # after upgrading kata: new checks and exercises; your files are kept
```

In Jupyter or Colab: `%load_ext kata`, then a cell starting `%%kata 01` grades its code as
your `exercises/01_immutability.py`; `kata notebook` writes the whole course as a
notebook. Progress lives in `.kata/`; deleting it only forgets progress.
"""


class CourseExists(CourseError):
    """`kata init` was asked to write over a course folder."""


@dataclass
class Written:
    """What `init` or `update` did to a course folder."""

    root: Path
    added: list[str] = field(default_factory=list)  # files that were not there
    updated: list[str] = field(default_factory=list)  # the course's own files, replaced
    kept: list[str] = field(default_factory=list)  # learner files that differ from the stub
    new_stubs: list[str] = field(default_factory=list)  # stubs written beside kept files


def shipped_course() -> Course:
    return load_course(shipped_course_root())


def init_course(target: Path) -> Written:
    """Write a learner's course folder at `target` from the installed course."""
    if (target / MANIFEST).exists():
        raise CourseExists(
            f"{target} already holds a course; work in it (`kata next`), or "
            "`kata update` to bring it up to this kata's version"
        )
    return _sync(shipped_course(), target.resolve(), new_stubs=False)


def update_course(course: Course, *, new_stubs: bool = False) -> Written:
    """Bring a folder from `kata init` up to the installed course: its manifest and
    checks replaced, new exercises added, the learner's own files kept."""
    if course.ships_own_solutions:
        raise CourseError(
            f"{course.root} is a full copy of the course (it has solutions/), not a folder "
            "from `kata init`: update it where it came from (`git pull` in a clone)"
        )
    return _sync(shipped_course(), course.root, new_stubs=new_stubs)


def _sync(source: Course, target: Path, *, new_stubs: bool) -> Written:
    written = Written(target)
    course_files = [source.root / MANIFEST] + sorted(source.checks_dir.glob("*.py"))
    for path in course_files:
        _replace(path, target / path.relative_to(source.root), written)
    for exercise in source.exercises:
        _offer_stub(source.exercises_dir / exercise.filename, target, written, new_stubs)
    readme = LEARNER_README.format(title=source.title)
    for name, text in (("README.md", readme), (".gitignore", GITIGNORE)):
        if not (target / name).exists():
            (target / name).write_text(text, encoding="utf-8")
            written.added.append(name)
    return written


def _replace(shipped: Path, destination: Path, written: Written) -> None:
    """Write one of the course's own files (manifest, checks) as the installed kata has it."""
    name = str(destination.relative_to(written.root))
    if destination.is_file() and destination.read_bytes() == shipped.read_bytes():
        return
    (written.updated if destination.exists() else written.added).append(name)
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shipped, destination)


def _offer_stub(stub: Path, target: Path, written: Written, new_stubs: bool) -> None:
    """Add a missing exercise file; keep an existing one that differs, with the new stub
    beside it if asked."""
    destination = target / "exercises" / stub.name
    name = str(destination.relative_to(target))
    if not destination.exists():
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(stub, destination)
        written.added.append(name)
    elif destination.read_bytes() != stub.read_bytes():
        written.kept.append(name)
        if new_stubs:
            beside = destination.with_name(destination.stem + NEW_STUB_SUFFIX)
            shutil.copyfile(stub, beside)
            written.new_stubs.append(str(beside.relative_to(target)))


def answer_folders(course: Course, source: Path | None) -> list[Path]:
    """Every folder of reference solutions a run grading `source` must not read: the
    course's own and the ones kata ships, less any that holds `source` (grading the
    solutions themselves, as `kata check --solutions` and `kata verify` do); all of them
    for a submission copied elsewhere (None). A `source` that holds a solutions folder
    (`kata check --dir` the course's root) grades without it in sight."""
    found = [course.root / "solutions"]
    with contextlib.suppress(CourseError):
        found.append(shipped_course_root() / "solutions")
    folders = dict.fromkeys(f.resolve() for f in found if f.is_dir())
    if source is None:
        return list(folders)
    source = source.resolve()
    return [f for f in folders if not source.is_relative_to(f)]
