"""The fixtures every course's checks share; a course's `checks/conftest.py` imports them.

`checks/test_<id>.py` grades exercise `<id>`: `ex` is that exercise's file from the folder
being graded (`exercises/` unless KATA_SOURCE names `solutions` or a path), imported in the
learner's process and reached through kata.checking.learner_calls, so the checks run the
same under `kata check` and straight under pytest or an IDE.
Mark each check with the task (public name) it judges: `@pytest.mark.task("set_first")`.
"""

from pathlib import Path

import numpy as np
import pytest

from kata.checking.learner_calls import LearnerModule
from kata.course import exercise_of_check_file
from kata.grading.learner_file import source_dir
from kata.results import NOTE_PROPERTY


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "task(name): the public name this check judges")
    config.addinivalue_line("markers", "speed: the timed check that compiled code beats eager")


@pytest.fixture(scope="module")
def ex(request: pytest.FixtureRequest) -> LearnerModule:
    """The learner's module for the exercise this check file is named after."""
    check_file = Path(request.module.__file__).resolve()
    folder = source_dir(check_file.parent.parent)
    return LearnerModule(folder / f"{exercise_of_check_file(check_file)}.py", check_file)


@pytest.fixture
def rng() -> np.random.Generator:
    """Unseeded: every run draws new inputs, so no answer can fit one fixed example."""
    return np.random.default_rng()


@pytest.fixture
def tell(record_property):
    """Show the learner a line under this check, pass or fail (a measured speedup, say)."""
    return lambda text: record_property(NOTE_PROPERTY, text)
