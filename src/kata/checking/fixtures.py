"""The fixtures every course's checks share; a course's `checks/conftest.py` imports them.

`checks/test_<id>.py` grades exercise `<id>`: `ex` is that exercise's file from the folder
being graded (`exercises/` unless KATA_SOURCE names `solutions` or a path), imported in the
learner's process and reached through kata.checking.learner_calls, so the checks run the
same under `kata check` and straight under pytest or an IDE.
Mark each check with the task (public name) it judges: `@pytest.mark.task("set_first")`.
"""

import contextlib
from pathlib import Path

import numpy as np
import pytest

from kata.checking import measured
from kata.checking.learner_calls import LearnerModule
from kata.course import CourseError, exercise_of_check_file, find_course, load_course
from kata.grading_platform import grading_platform, take_on
from kata.learner_side.learner_file import source_dir
from kata.learner_side.learner_process import use_host_devices
from kata.results import NOTE_PROPERTY


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "task(name): the public name this check judges")
    config.addinivalue_line("markers", "speed: the timed check that compiled code beats eager")
    if not config.pluginmanager.is_registered(measured):
        config.pluginmanager.register(measured, "kata-measured")
    # Straight under pytest, the judge takes on the run's platform
    # (kata.grading_platform:
    # the learner's process it starts inherits it, and the two never ask for one chip) and
    # the course's most `host_devices` here, before any check starts its backend (under the
    # grader it already has both).
    take_on(grading_platform())
    with contextlib.suppress(CourseError, RuntimeError):
        devices = find_course(config.rootpath).host_devices
        if devices:
            use_host_devices(devices, cpu_only=False)


@pytest.fixture(scope="module")
def ex(request: pytest.FixtureRequest) -> LearnerModule:
    """The learner's module for the exercise this check file is named after."""
    check_file = Path(request.module.__file__).resolve()
    folder = source_dir(check_file.parent.parent)
    exercise = exercise_of_check_file(check_file)
    devices = host_devices(check_file.parent.parent, exercise)
    return LearnerModule(folder / f"{exercise}.py", check_file, devices)


def host_devices(course_root: Path, exercise_id: str) -> int:
    """The CPU devices the exercise's process gets (`host_devices` in course.toml), 0 for
    the machine's own."""
    try:
        exercises = load_course(course_root).exercises
    except CourseError:
        return 0
    return next((e.host_devices for e in exercises if e.id == exercise_id), 0)


@pytest.fixture
def rng() -> np.random.Generator:
    """Unseeded: every run draws new inputs, so no answer can fit one fixed example."""
    return np.random.default_rng()


@pytest.fixture
def tell(record_property):
    """Show the learner a line under this check, pass or fail (a measured speedup, say)."""
    return lambda text: record_property(NOTE_PROPERTY, text)
