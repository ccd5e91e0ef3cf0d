"""What every check file shares: the learner's module as the `ex` fixture.

`checks/test_<id>.py` grades exercise `<id>`: `ex` is that exercise's file imported from
the folder being graded (`exercises/` unless KATA_SOURCE names `solutions` or a path), so
the checks run the same under `kata check` and straight under pytest or an IDE.
Mark each check with the task (public name) it judges: `@pytest.mark.task("set_first")`.
"""

from pathlib import Path

import pytest

from kata.learner import load_exercise, source_dir

COURSE_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "task(name): the public name this check judges")
    config.addinivalue_line("markers", "speed: the timed check that compiled code beats eager")


@pytest.fixture(scope="module")
def ex(request: pytest.FixtureRequest):
    exercise_id = Path(request.module.__file__).stem.removeprefix("test_")
    return load_exercise(exercise_id, source_dir(COURSE_ROOT))


@pytest.fixture
def tell(record_property):
    """Show the learner a line under this check, pass or fail (a measured speedup, say)."""
    return lambda text: record_property("kata_note", text)
