"""Finding and importing the learner's file for one exercise.

The checks import learner code through `load_exercise`, so that the same check file grades
`exercises/` (the default), `solutions/` or any folder of `NN_name.py` files, chosen by the
environment variable KATA_SOURCE, whether the checks run under `kata check` or straight
under pytest from an IDE.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from kata.handoffs.environment import SOURCE_VARIABLE


class LearnerFileMissing(Exception):
    """The folder being graded has no file for this exercise."""


def source_dir(course_root: Path) -> Path:
    """The folder being graded: KATA_SOURCE as `exercises`, `solutions` or a path."""
    chosen = os.environ.get(SOURCE_VARIABLE, "exercises")
    folder = Path(chosen)
    if not folder.is_absolute():
        folder = course_root / folder
    return folder.resolve()


def load_exercise(exercise_id: str, folder: Path) -> ModuleType:
    """Import `folder/<exercise_id>.py` afresh under a name of its own.

    Whatever the file raises (a SyntaxError, a NameError, a SystemExit) propagates, so
    the check that asked for it reports it with the learner's file and line.
    """
    path = folder / f"{exercise_id}.py"
    if not path.is_file():
        raise LearnerFileMissing(
            f"there is no {path.name} in {folder}; `kata reset {exercise_id}` restores the stub"
        )
    module_name = f"kata_learner_{exercise_id}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before running, as `import` does, so dataclasses and pickling that look
    # the module up by name work in learner code.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
