"""Files the grader writes for an instructor: checked before grading, written whole or not at all.

A gradebook, class report or Classroom 50 result goes to a temporary file in the same
folder and is renamed into place, so a reader never sees half a file and a failed write
leaves nothing behind.
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


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in its folder and a rename."""
    temporary: str | None = None
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
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
