"""Saving a `%%kata` cell as the learner's exercise file, without losing work done elsewhere.

In the notebook the cell is the learner's code: running it saves it as
`exercises/NN_name.py` (where `kata list`, `kata check` and the progress see it) and grades
that. What the file held is replaced only when it is the stub as given or what a cell saved
last; anything else was written outside this notebook (an editor, another notebook, the
command line's course), so it is first kept in `.kata/backups/` and the verdict says where.
The copy of what a cell saved last is in `.kata/notebook/`.
"""

from __future__ import annotations

import time
from pathlib import Path

from kata.course import Course, Exercise, as_an_editor_leaves_it, original_stub


def save_cell(course: Course, exercise: Exercise, path: Path, source: str) -> str | None:
    """Save `source` as the exercise's file at `path`; a line for the learner when what it
    replaced was written elsewhere (kept as a backup, named), else None."""
    last_saved = course.state_dir / "notebook" / exercise.filename
    before = path.read_bytes() if path.is_file() else None
    notice = None
    if before is not None and not _replaceable(before, source, last_saved, course, exercise):
        kept = _backup(course, exercise, before)
        notice = (
            f"kata: {path.name} held code written outside this notebook; it is kept as "
            f"{kept.relative_to(course.root)}, and this cell replaced it."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    last_saved.parent.mkdir(parents=True, exist_ok=True)
    last_saved.write_text(source, encoding="utf-8")
    return notice


def _replaceable(
    before: bytes, source: str, last_saved: Path, course: Course, exercise: Exercise
) -> bool:
    """Nothing is lost by replacing `before`: it is the cell's own code, what a cell saved
    last, or the stub as the course gives it (line endings and trailing blanks aside)."""
    earlier = last_saved.read_text(encoding="utf-8") if last_saved.is_file() else None
    kept = (source, earlier, original_stub(course, exercise))
    text = before.decode("utf-8", errors="replace")
    return as_an_editor_leaves_it(text) in {as_an_editor_leaves_it(t) for t in kept if t}


def _backup(course: Course, exercise: Exercise, content: bytes) -> Path:
    folder = course.state_dir / "backups"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(1000):
        kept = folder / f"{exercise.id}-{stamp}{f'-{attempt}' if attempt else ''}.py"
        try:
            with kept.open("xb") as stream:  # never over an earlier backup
                stream.write(content)
            return kept
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder} holds 1000 backups of {exercise.id} from this second")
