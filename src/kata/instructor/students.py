"""Who is in a class: each submission's student, named for people to read, and a roster.

A student is named by their submission's folder or archive stem (`alice` for
`/srv/class/alice/` or `alice.zip`), never by its path: the gradebook, its JSON, the class
report and the feedback pages are shared, and a path shows the grading machine's folders.
The path stays where the grader needs it: which files to grade, and the stable id (a digest
of it) that `--resume` and the shards go by. Two submissions of one stem (`a/alice`,
`b/alice.zip`) are told apart in their whole paths' order, whatever order they were given
in: the first keeps `alice`, the next is `alice-2`, so every shard of a class and every
re-run name them alike. Names differ whatever their case, so one feedback page per student
fits a file system that ignores case (macOS's, Windows') too.

A roster (`kata grade --roster FILE`) is a CSV file: a header row, then a row per student.
Its columns are `submission` (the folder or archive stem, as the gradebook names the
student; required) and any of `student_id`, `name` and `email`, which reach every file the
grading writes. A submission missing from the roster still grades, noted so; a roster row
that no submission matches is a student who submitted nothing, listed as such. A roster
that cannot be read, lacks `submission`, has a column kata does not know (a typo would
drop it unseen), or a row without a name, or one name twice, is refused (RosterError).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from kata.reporting.report import counted

ROSTER_KEY = "submission"
ROSTER_COLUMNS = ("student_id", "name", "email")
NOT_ON_ROSTER = "not on the roster: graded, with no student id, name or email"
# Said once, for a roster row that no submission matches.
NO_SUBMISSION = "nothing submitted: no submission of this name was given to kata grade"
# The name of a submission whose path has none (`/`).
UNNAMED = "submission"


class RosterError(Exception):
    """A roster that cannot be used, said in one line."""


@dataclass(frozen=True)
class Roster:
    """The roster's rows by their submission name, casefolded; and a digest of them, so a
    gradebook continued with another roster, or shards given different ones, are told."""

    rows: dict[str, dict[str, str]]
    digest: str


@dataclass(frozen=True)
class Student:
    """One of a class: their name in it, a stable id, the submission's path (None for a
    roster row that no submission matches), and the roster's columns when it lists them."""

    name: str
    id: str
    path: Path | None = None
    roster: dict[str, str] | None = None  # student_id, name, email
    not_on_roster: bool = False  # a roster was given, and does not list them

    @property
    def shown_name(self) -> str:
        """How a page addressed to the student names them: the roster's name, if any."""
        return (self.roster or {}).get("name") or self.name


def submission_id(path: Path) -> str:
    """A submission's stable id: a digest of its absolute path, the same however the path
    is written, on every run and every shard that sees the same files."""
    absolute = os.path.abspath(os.fsdecode(path)).encode("utf-8", "surrogateescape")
    return hashlib.sha256(absolute).hexdigest()[:16]


def _roster_id(name: str) -> str:
    """The stable id of a roster row that no submission matches: of its name, apart from
    every path's."""
    return hashlib.sha256(f"roster\0{name.casefold()}".encode()).hexdigest()[:16]


def stem_of(path: Path) -> str:
    """A submission's name before it is made unique: its folder's name, or its archive's
    without `.zip`, as text any file can hold (undecodable bytes replaced)."""
    name = os.path.basename(os.path.abspath(os.fsdecode(path)))
    if name.lower().endswith(".zip") and len(name) > len(".zip"):
        name = name[: -len(".zip")]
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace") or UNNAMED


def class_names(paths: dict[str, Path]) -> dict[str, str]:
    """Each submission's name in the class, by its id: its stem, and where another has
    the same stem (case aside), `stem-2`, `stem-3`, … in the order of their whole paths,
    never one another submission's stem already is."""
    ordered = sorted(paths, key=lambda id: (os.path.abspath(os.fsdecode(paths[id])), id))
    stems = {id: stem_of(paths[id]) for id in ordered}
    first: dict[str, str] = {}
    for id in ordered:
        first.setdefault(stems[id].casefold(), id)
    taken = set(first)
    names = {}
    for id in ordered:
        stem, number = stems[id], 2
        if first[stem.casefold()] == id:
            names[id] = stem
            continue
        while f"{stem}-{number}".casefold() in taken:
            number += 1
        names[id] = f"{stem}-{number}"
        taken.add(names[id].casefold())
    return names


def class_of(paths: list[Path], roster: Roster | None = None) -> list[Student]:
    """The class: a student per submission (one path written two ways is one), in the
    order given, then each roster row that no submission matches."""
    everyone = {submission_id(path): path for path in paths}
    names = class_names(everyone)
    rows = roster.rows if roster else {}
    students = [
        Student(
            names[id],
            id,
            path,
            _columns(rows.get(names[id].casefold())),
            not_on_roster=roster is not None and names[id].casefold() not in rows,
        )
        for id, path in everyone.items()
    ]
    named = {student.name.casefold() for student in students}
    return students + [
        Student(row[ROSTER_KEY], _roster_id(row[ROSTER_KEY]), None, _columns(row))
        for key, row in rows.items()
        if key not in named
    ]


def _columns(row: dict[str, str] | None) -> dict[str, str] | None:
    return None if row is None else {column: row.get(column, "") for column in ROSTER_COLUMNS}


# Reading a roster -----------------------------------------------------------------------


def read_roster(path: Path) -> Roster:
    """The roster at `path` (see the module's docstring); RosterError says in one line
    what makes it unusable."""
    try:
        # utf-8-sig: a spreadsheet saving "CSV UTF-8" starts the file with a byte-order mark.
        text = path.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise RosterError(f"cannot read the roster {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise RosterError(f"cannot read the roster {path}: it is not UTF-8 text") from None
    try:
        table = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as error:
        raise RosterError(f"the roster {path} is not a CSV file: {error}") from None
    header = _roster_header(path, table[0] if table else [])
    rows: dict[str, dict[str, str]] = {}
    first_row: dict[str, int] = {}
    for number, cells in enumerate(table[1:], 2):
        if not any(cell.strip() for cell in cells):
            continue  # a blank line, as spreadsheets leave at the end
        if len(cells) != len(header):
            raise RosterError(
                f"the roster {path}, row {number}: {counted(len(cells), 'cell')} where "
                f"its header has {len(header)}"
            )
        row = {column: cell.strip() for column, cell in zip(header, cells, strict=True)}
        key = row[ROSTER_KEY].casefold()
        if not key:
            raise RosterError(f"the roster {path}, row {number}: no {ROSTER_KEY} name")
        if key in rows:
            raise RosterError(
                f"the roster {path}, row {number}: {row[ROSTER_KEY]!r} again (row "
                f"{first_row[key]} names it already)"
            )
        rows[key], first_row[key] = row, number
    if not rows:
        raise RosterError(f"the roster {path} lists no student")
    digest = hashlib.sha256(json.dumps(sorted(rows.items())).encode()).hexdigest()[:16]
    return Roster(rows, digest)


def _roster_header(path: Path, cells: list[str]) -> list[str]:
    """The roster's columns, known and each once; RosterError otherwise."""
    known = (ROSTER_KEY, *ROSTER_COLUMNS)
    header = [cell.strip().lower() for cell in cells]
    if ROSTER_KEY not in header:
        raise RosterError(
            f"the roster {path} has no {ROSTER_KEY} column: its first row names the "
            f"columns, {ROSTER_KEY} and any of {', '.join(ROSTER_COLUMNS)}"
        )
    unknown = [column for column in header if column not in known]
    if unknown:
        raise RosterError(
            f"the roster {path} has a column kata does not know, {unknown[0]!r}: its "
            f"columns are {ROSTER_KEY} and any of {', '.join(ROSTER_COLUMNS)}"
        )
    twice = [column for column in known if header.count(column) > 1]
    if twice:
        raise RosterError(f"the roster {path} has two {twice[0]} columns")
    return header
