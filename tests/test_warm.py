"""The warm grader gives the same verdicts as the cold one, survives what kills a run, and
is started, shared and ended as a learner would expect."""

import shutil
import subprocess
import sys
import time

import pytest

from kata import processes
from kata.course import load_course
from kata.runner import CRASHED, PASSED, Limits, grade

from .conftest import MINI, REPO
from .test_cli import kata_process
from .test_failures import CASES, grade_case

pytestmark = pytest.mark.skipif(not processes.worker_supported(), reason="needs fork and AF_UNIX")


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """A warm worker for the real course; the mini course's checks run on it as well."""
    course = load_course(REPO)
    socket_path = tmp_path_factory.mktemp("worker") / "w.sock"
    processes.start_worker(socket_path, REPO, processes.grading_environment(course.state_dir))
    assert processes.wait_for_worker(socket_path)
    yield socket_path
    processes.stop_worker(socket_path)


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


def verdict_lines(output: str) -> list[str]:
    """Each check's line and the summary (the failure messages quote random inputs)."""
    lines = output.splitlines()
    return [line for line in lines if line.lstrip().startswith(("✓", "✗"))] + lines[-1:]


def course_socket(course_root):
    env = processes.grading_environment(load_course(course_root).state_dir)
    return processes.worker_socket(course_root, env)


def test_kata_check_starts_a_warm_grader_that_the_next_check_uses(real_course, monkeypatch):
    monkeypatch.delenv(processes.COLD_VARIABLE)
    socket_path = course_socket(real_course)
    try:
        first = kata_process("check", "01_immutability", cwd=real_course)
        assert processes.wait_for_worker(socket_path), "no warm grader was started"
        second = kata_process("check", "01_immutability", cwd=real_course)
        assert "running: checks start" in kata_process("doctor", cwd=real_course).stdout
    finally:
        runs = processes.stop_worker(socket_path)
    assert runs == 1, "the second check did not go to the warm grader"
    assert first.returncode == second.returncode == 1
    assert verdict_lines(second.stdout) == verdict_lines(first.stdout)


def test_cold_starts_no_warm_grader(real_course, monkeypatch):
    monkeypatch.delenv(processes.COLD_VARIABLE)
    assert kata_process("check", "--cold", "01_immutability", cwd=real_course).returncode == 1
    time.sleep(1)
    assert not processes.worker_running(course_socket(real_course))


def start_worker_process(socket_path, course_root, *options):
    return subprocess.Popen(
        [sys.executable, "-m", "kata.worker", str(socket_path), str(course_root), *options]
    )


def test_a_second_worker_for_the_same_course_steps_aside(tmp_path):
    socket_path = tmp_path / "w.sock"
    first = start_worker_process(socket_path, tmp_path)
    try:
        assert processes.wait_for_worker(socket_path)
        second = start_worker_process(socket_path, tmp_path)
        assert second.wait(timeout=30) == 0
        assert processes.worker_running(socket_path), "the second worker took the socket"
    finally:
        processes.stop_worker(socket_path)
        first.wait(timeout=30)


def test_a_worker_ends_with_its_course(tmp_path):
    course_root = tmp_path / "course"
    course_root.mkdir()
    worker = start_worker_process(tmp_path / "w.sock", course_root)
    assert processes.wait_for_worker(tmp_path / "w.sock")
    shutil.rmtree(course_root)
    assert worker.wait(timeout=30) == 0
    assert list(tmp_path.iterdir()) == [], "the worker left its socket or lock behind"


def test_an_unused_worker_ends_by_itself(tmp_path):
    worker = start_worker_process(tmp_path / "w.sock", tmp_path, "--idle-seconds", "1")
    assert processes.wait_for_worker(tmp_path / "w.sock")
    assert worker.wait(timeout=30) == 0


def test_a_worker_is_not_reused_once_what_it_imported_may_differ(tmp_path):
    """Settings JAX reads at import pick a different worker; unrelated variables do not."""
    plain = processes.worker_socket(tmp_path, {"HOME": "/home/a"})
    assert processes.worker_socket(tmp_path, {"HOME": "/home/b"}) == plain
    assert processes.worker_socket(tmp_path, {"JAX_ENABLE_X64": "1"}) != plain
    assert processes.worker_socket(tmp_path / "other", {}) != plain
