"""The warm grader gives the same verdicts as the cold one, and survives what kills a run."""

import pytest

from kata import processes
from kata.course import load_course
from kata.runner import CRASHED, PASSED, Limits, grade

from .conftest import MINI, REPO
from .test_failures import CASES, grade_case

pytestmark = pytest.mark.skipif(not processes.worker_supported(), reason="needs fork and AF_UNIX")


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """A warm worker for the real course; the mini course's checks run on it as well."""
    course = load_course(REPO)
    socket_path = tmp_path_factory.mktemp("worker") / "w.sock"
    started = processes.start_worker(socket_path, processes.grading_environment(course.state_dir))
    yield socket_path
    processes.stop_worker(started)


def verdicts(grading):
    return {(c.exercise, c.id): c.outcome for r in grading.results for c in r.checks}


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
def test_every_exercise_gets_the_same_verdicts_warm_and_cold(worker, folder):
    course = load_course(REPO)
    exercises = list(course.exercises)
    warm = grade(course, exercises, course.root / folder, worker=worker)
    cold = grade(course, exercises, course.root / folder)
    assert verdicts(warm) == verdicts(cold)
    assert [r.problem for r in warm.results] == [r.problem for r in cold.results]


def test_state_does_not_leak_between_warm_runs(worker, tmp_path):
    """A run that flips JAX config and seeds global RNGs leaves the next run clean."""
    course = load_course(MINI)
    folder = tmp_path / "polluter"
    folder.mkdir()
    (folder / "01_demo.py").write_text(
        "import jax, random\nimport numpy as np\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "jax.config.update('jax_debug_key_reuse', False)\n"
        "random.seed(0)\nnp.random.seed(0)\n"
        "def double(x):\n    return x * 2\n"
        "def draw(key):\n    return jax.random.normal(key), jax.random.normal(key)\n"
    )
    polluted = grade(course, [course.exercises[0]], folder, worker=worker)
    assert verdicts(polluted)  # it ran
    clean = grade(course, [course.exercises[0]], course.exercises_dir, worker=worker)
    draw = next(c for r in clean.results for c in r.checks if c.task == "draw")
    assert draw.exception == "KeyReuseError", "the key-reuse checker stayed switched off"


def test_a_crash_on_the_warm_worker_is_a_verdict_and_the_worker_lives_on(worker, tmp_path):
    course = load_course(MINI)
    grading, _ = grade_case(tmp_path, "os_exit", CASES["os_exit"])  # cold, for comparison
    folder = tmp_path / "os_exit"
    warm = grade(course, list(course.exercises), folder, Limits(check_seconds=10), worker=worker)
    assert verdicts(warm) == verdicts(grading)
    assert any(c.outcome == CRASHED for c in warm.results[0].checks)
    assert processes.worker_running(worker)
    again = grade(course, [course.exercises[1]], course.solutions_dir, worker=worker)
    assert [c.outcome for c in again.results[0].checks] == [PASSED]
