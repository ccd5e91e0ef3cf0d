"""Files the grader writes for an instructor: checked before grading, written whole or not at all.

A gradebook, class report or Classroom 50 result goes to a temporary file in the same
folder and is renamed into place, so a reader never sees half a file and a failed write
leaves nothing behind.

Every one of them gets the mode any new file gets, as `grades.csv` does: 0666 less the
umask (0644 under the usual 022). None holds more than the CSV gradebook already does
(names, points, the checks' messages), so none is made more private than it; for a class
whose gradebook must stay private, run `kata grade` under `umask 077` and every file
follows. A file that is replaced keeps the mode it had.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputError(Exception):
    """A file that cannot be written, said in one line."""


def check_writable(path: Path) -> None:
    """Fail early, before any grading, when `path` could not be written."""
    folder = path.parent
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder; name a file inside it")
    if not folder.is_dir():
        raise OutputError(
            f"cannot write {path}: the folder {folder} does not exist; create it first"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {path}: the folder {folder} is read-only")


def current_umask() -> int:
    """The process's umask, read without changing it (os.umask would, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    # Without /proc (macOS): set it and put it back at once.
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in its folder and a rename."""
    temporary: str | None = None
    try:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~current_umask()
        # mkstemp makes its file 0600 whatever the umask: give it the mode a new file gets.
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        os.fchmod(handle, mode)
        # A learner's message may hold a lone surrogate (`raise ValueError("\udc80")`), which
        # UTF-8 cannot encode: it is written as "?" rather than failing the whole file.
        with os.fdopen(handle, "w", encoding="utf-8", errors="replace") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException as error:  # a signal mid-write too: no temporary file is left
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        if not isinstance(error, OSError):
            raise
        reason = error.strerror or str(error)
        raise OutputError(f"cannot write {path}: {reason}") from None


def append_text(path: Path, text: str) -> None:
    """Append to a file others write to as well, such as a CI job summary."""
    try:
        with path.open("a", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None
