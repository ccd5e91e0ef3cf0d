"""The warm grader gives the same verdicts as the cold one, survives what kills a run, and
is started, shared and ended as a learner would expect."""

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kata.course import load_course
from kata.results import Limits, Outcome
from kata.servers import warm as warm_grading
from kata.servers.warm import WarmGrader
from kata.supervisor.judge_process import grading_environment
from kata.supervisor.runner import grade

from .helpers import (
    CASES,
    FORGERIES,
    GOOD_DRAW,
    LIMITS,
    MINI,
    REPO,
    assert_nothing_forged,
    forged_stubs,
    grade_case,
    kata,
    kata_process,
    start_worker_process,
    warm_graders,
    worker_processes,
)

pytestmark = pytest.mark.skipif(
    not warm_grading.worker_supported(), reason="needs fork and AF_UNIX"
)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """A warm worker for the real course; the mini course's checks run on it as well."""
    with warm_graders(tmp_path_factory, count=1) as (grader,):
        yield grader


def verdicts(grading):
    return {(c.exercise, c.id): c.outcome for r in grading.results for c in r.checks}


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["stubs", "solutions"])
def test_every_exercise_gets_the_same_verdicts_warm_and_cold(worker, verified_course, folder):
    cold = getattr(verified_course, folder)
    course = load_course(REPO)
    graded_warm = grade(course, list(course.exercises), cold.source, warm=worker)
    assert verdicts(graded_warm) == verdicts(cold)
    assert [r.problem for r in graded_warm.results] == [r.problem for r in cold.results]


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
    polluted = grade(course, [course.exercises[0]], folder, warm=worker)
    assert verdicts(polluted)  # it ran
    clean = grade(course, [course.exercises[0]], course.exercises_dir, warm=worker)
    draw = next(c for r in clean.results for c in r.checks if c.task == "draw")
    assert draw.exception == "KeyReuseError", "the key-reuse checker stayed switched off"


BROKEN = CASES | {
    "sigterm": (
        "import os, signal, jax\n\ndef double(x):\n    os.kill(os.getpid(), signal.SIGTERM)\n"
        + GOOD_DRAW
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", ["syntax_error", "sys_exit", "os_exit", "segfault", "huge_output", "sigterm"]
)
def test_a_broken_file_gets_the_same_verdicts_warm_and_cold(worker, tmp_path, case):
    course = load_course(MINI)
    cold, _ = grade_case(tmp_path, case, BROKEN[case])
    graded_warm = grade(course, list(course.exercises), tmp_path / case, LIMITS, warm=worker)
    assert verdicts(graded_warm) == verdicts(cold)
    assert [c.message for c in graded_warm.results[0].checks if c.outcome == Outcome.CRASHED] == [
        c.message for c in cold.results[0].checks if c.outcome == Outcome.CRASHED
    ]


def test_a_crash_on_the_warm_worker_leaves_the_worker_serving(worker, tmp_path):
    course = load_course(MINI)
    folder = tmp_path / "os_exit"
    folder.mkdir()
    (folder / "01_demo.py").write_text(CASES["os_exit"])
    graded_warm = grade(
        course, [course.exercises[0]], folder, Limits(check_seconds=10), warm=worker
    )
    assert any(c.outcome == Outcome.CRASHED for c in graded_warm.results[0].checks)
    assert warm_grading.worker_running(worker.socket)
    again = grade(course, [course.exercises[1]], course.solutions_dir, warm=worker)
    assert [c.outcome for c in again.results[0].checks] == [Outcome.PASSED]


def verdict_lines(output: str) -> list[str]:
    """Each check's line and the summary (the failure messages quote random inputs)."""
    lines = output.splitlines()
    return [line for line in lines if line.lstrip().startswith(("✓", "✗"))] + lines[-1:]


def course_socket(course_root):
    env = grading_environment(load_course(course_root).state_dir)
    return warm_grading.worker_socket(course_root, env)


def test_kata_check_starts_a_warm_grader_that_the_next_check_uses(real_course, monkeypatch):
    monkeypatch.delenv(warm_grading.COLD_VARIABLE)
    socket_path = course_socket(real_course)
    try:
        first = kata_process("check", "01_immutability", cwd=real_course)
        assert worker_processes(real_course), "no warm grader was started"
        assert warm_grading.wait_for_worker(socket_path), "the warm grader never answered"
        second = kata_process("check", "01_immutability", cwd=real_course)
        assert "running: checks start" in kata_process("doctor", cwd=real_course).stdout
    finally:
        runs = warm_grading.stop_worker(socket_path)
    assert runs == 1, "the second check did not go to the warm grader"
    assert "graded cold; a warm grader is starting now" in first.stderr
    assert "graded cold" not in second.stderr
    assert first.returncode == second.returncode == 1
    assert verdict_lines(second.stdout) == verdict_lines(first.stdout)


def test_cold_starts_no_warm_grader(real_course, monkeypatch):
    monkeypatch.delenv(warm_grading.COLD_VARIABLE)
    assert kata_process("check", "--cold", "01_immutability", cwd=real_course).returncode == 1
    assert worker_processes(real_course) == []


def test_a_second_worker_like_the_first_steps_aside(tmp_path):
    first, socket_path = start_worker_process(tmp_path)
    try:
        assert warm_grading.wait_for_worker(socket_path)
        second, _ = start_worker_process(tmp_path)
        assert second.wait(timeout=30) == 0
        assert warm_grading.worker_running(socket_path), "the second worker took the socket"
    finally:
        warm_grading.stop_worker(socket_path)
        first.wait(timeout=30)


def test_a_worker_of_another_identity_takes_over(tmp_path):
    """A worker for the same course but other settings or code replaces the running one."""
    old, old_socket = start_worker_process(tmp_path, name="old")
    assert warm_grading.wait_for_worker(old_socket)
    new, new_socket = start_worker_process(tmp_path, name="new")
    try:
        assert old.wait(timeout=60) == 0
        assert warm_grading.wait_for_worker(new_socket)
    finally:
        warm_grading.stop_worker(new_socket)
        new.wait(timeout=30)


@pytest.mark.slow
def test_a_busy_worker_turns_the_next_run_away_at_once(tmp_path):
    """A second run while one is going grades cold; it neither waits nor runs twice."""
    process, socket_path = start_worker_process(tmp_path)
    assert warm_grading.wait_for_worker(socket_path)
    course, mini = load_course(REPO), load_course(MINI)
    long_run = threading.Thread(
        target=grade,
        args=(course, [course.resolve("07")], course.solutions_dir),
        kwargs={"warm": WarmGrader(socket_path, REPO, grading_environment(course.state_dir))},
    )
    long_run.start()
    time.sleep(0.5)
    busy = WarmGrader(socket_path, REPO, grading_environment(mini.state_dir))
    meanwhile = grade(mini, list(mini.exercises), mini.solutions_dir, warm=busy)
    long_run.join()
    runs = warm_grading.stop_worker(socket_path)
    process.wait(timeout=30)
    assert meanwhile.passed
    assert runs == 1, "the run turned away was queued and run on the worker as well"


def test_a_worker_ends_with_its_course(tmp_path):
    course_root = tmp_path / "course"
    course_root.mkdir()
    worker, _ = start_worker_process(tmp_path, course_root)
    assert warm_grading.wait_for_worker(tmp_path / "w.sock")
    shutil.rmtree(course_root)
    assert worker.wait(timeout=30) == 0
    assert list(tmp_path.iterdir()) == [], "the worker left its socket or lock behind"


def test_an_unused_worker_ends_by_itself(tmp_path):
    worker, socket_path = start_worker_process(tmp_path, tmp_path, "--idle-seconds", "1")
    assert warm_grading.wait_for_worker(socket_path)
    assert worker.wait(timeout=30) == 0


def test_watch_cold_starts_no_warm_grader(real_course, monkeypatch):
    monkeypatch.delenv(warm_grading.COLD_VARIABLE)
    (real_course / "exercises" / "01_immutability.py").write_text("edited = True\n")
    watch = subprocess.Popen(
        [sys.executable, "-m", "kata", "watch", "--cold"],
        cwd=real_course, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen = []
    try:
        for line in watch.stdout:
            seen.append(line)
            if "checks passed" in line:
                break
    finally:
        watch.terminate()
        watch.wait(timeout=30)
    assert "0 of 8 checks passed" in seen[-1], "".join(seen)
    assert worker_processes(real_course) == []


def test_a_worker_is_not_reused_once_what_it_imported_may_differ(tmp_path):
    """Settings JAX reads at import pick a different worker; unrelated variables do not."""
    plain = warm_grading.worker_socket(tmp_path, {"HOME": "/home/a"})
    assert warm_grading.worker_socket(tmp_path, {"HOME": "/home/b"}) == plain
    assert warm_grading.worker_socket(tmp_path, {"JAX_ENABLE_X64": "1"}) != plain
    assert warm_grading.worker_socket(tmp_path / "other", {}) != plain


@pytest.mark.slow
@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_stub_passes_no_check_the_stub_fails_warm(
    worker, tmp_path, forgery, stub_passes, stub_failures
):
    course = load_course(REPO)
    folder = forged_stubs(REPO, tmp_path / "forged", FORGERIES[forgery])
    grading = grade(course, list(course.exercises), folder, warm=worker, only=stub_failures)
    assert_nothing_forged(grading, stub_passes, stub_failures)


def _gone(pid: int) -> bool:
    """Ended: no such process, or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


STARTER = """
import subprocess, sys
worker = subprocess.Popen(sys.argv[1:], start_new_session=True)
print(worker.pid, flush=True)
sys.stdin.read()  # until the test closes it: then this process ends, as a kernel shut down
"""


def test_a_worker_started_to_end_with_its_parent_ends_when_the_parent_does(tmp_path):
    """A notebook's kernel shut down left its warm grader serving for 30 idle minutes."""
    socket_path = tmp_path / "w.sock"
    env = grading_environment(load_course(REPO).state_dir)
    command = [sys.executable, "-I", "-m", "kata.servers.worker", str(socket_path), str(REPO)]
    command += [str(tmp_path / "course.lock"), "--end-with-parent"]
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, *command],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    worker_pid = int(starter.stdout.readline())
    try:
        assert warm_grading.wait_for_worker(socket_path)
        starter.stdin.close()
        starter.wait(timeout=30)
        deadline = time.monotonic() + 30
        while not _gone(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(worker_pid), "the worker outlived the process that started it"
        assert not socket_path.exists()
    finally:
        if not _gone(worker_pid):
            warm_grading.stop_worker(socket_path)


def test_a_notebook_starts_workers_that_end_with_its_kernel(monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(warm_grading.subprocess, "Popen", lambda args, **_: started.append(args))
    monkeypatch.setattr(warm_grading, "_workers_end_with_this_process", False)
    warm_grading.start_worker(tmp_path / "w.sock", REPO, {})
    warm_grading.end_workers_with_this_process()
    warm_grading.start_worker(tmp_path / "w.sock", REPO, {})
    assert ["--end-with-parent" in args for args in started] == [False, True]


def test_a_run_whose_client_hung_up_is_told_apart_from_one_still_waited_for():
    import socket

    from kata.servers.worker import _hung_up

    ours, theirs = socket.socketpair()
    with ours:
        assert not _hung_up(ours), "a client that waits sends nothing"
        theirs.close()
        assert _hung_up(ours)


HOLDER = """
import fcntl, sys
lock = open(sys.argv[1], "a+")
fcntl.flock(lock, fcntl.LOCK_EX)
lock.write(sys.argv[2])
lock.flush()
print("held", flush=True)
sys.stdin.read()  # until the test closes it, or kills this process
"""


@pytest.fixture
def sockets(monkeypatch):
    """A folder for workers' locks and sockets, as short as the one kata uses: a socket's
    path fits in 108 bytes, which a test's own folder under pytest-xdist can exceed."""
    folder = Path(tempfile.mkdtemp(prefix="kata-test-"))
    monkeypatch.setattr(warm_grading, "worker_folder", lambda: folder)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def lock_holder(sockets):
    """A process that holds a course's worker lock naming a socket, as a worker does from
    its start (kata.servers.serving.claim)."""
    held = []

    def hold(course_root, socket_path):
        lock = warm_grading.worker_lock(course_root)
        process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(lock), str(socket_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert process.stdout.readline() == "held\n"
        held.append(process)
        return process

    yield hold
    for process in held:
        process.kill()
        process.wait(timeout=30)


def listening(path):
    """A socket that answers at `path`, as a worker's does once it serves."""
    import socket

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    return server


def test_a_worker_is_starting_while_a_live_process_holds_its_lock_and_nothing_answers(
    tmp_path, sockets, lock_holder
):
    course_root, socket_path = tmp_path / "course", sockets / "w.sock"
    assert not warm_grading.worker_starting(course_root, socket_path), "no lock file: none"
    holder = lock_holder(course_root, socket_path)
    assert warm_grading.worker_starting(course_root, socket_path)
    assert not warm_grading.worker_starting(course_root, sockets / "other.sock")
    with listening(socket_path):
        assert not warm_grading.worker_starting(course_root, socket_path), "it serves"
    socket_path.unlink()
    holder.kill()
    holder.wait(timeout=30)
    assert warm_grading.worker_lock(course_root).read_text() == str(socket_path)
    assert not warm_grading.worker_starting(course_root, socket_path), "its holder died"


def test_a_cold_grading_says_whether_it_started_the_warm_grader_or_found_it_starting(
    tmp_path, lock_holder, monkeypatch
):
    monkeypatch.delenv(warm_grading.COLD_VARIABLE)
    started = []
    monkeypatch.setattr(warm_grading, "start_worker", lambda *args: started.append(args))
    course_root = tmp_path / "course"
    with warm_grading.warm_grader(course_root, {}) as first:
        pass  # graded cold: nothing listens
    assert first.cold_because == warm_grading.STARTED and len(started) == 1
    assert "a warm grader is starting now" in first.cold_notice()

    lock_holder(course_root, first.socket)  # that worker, importing JAX
    with warm_grading.warm_grader(course_root, {}) as second:
        pass
    assert second.cold_because == warm_grading.STILL_STARTING
    assert len(started) == 1, "a second worker was started beside the one starting"
    assert "the warm grader was still starting" in second.cold_notice()

    with listening(first.socket), warm_grading.warm_grader(course_root, {}) as warm:
        warm.connect().close()  # a run reached it
    assert warm.cold_notice() is None and len(started) == 1


def test_kata_check_says_it_graded_cold_while_the_warm_grader_was_starting(
    mini, lock_holder, monkeypatch
):
    """A check right after the first grades cold (5-6 s against 1 s warm) while the warm
    grader that one started imports JAX: it says so, rather than look slow for nothing."""
    monkeypatch.delenv(warm_grading.COLD_VARIABLE)
    monkeypatch.setattr(warm_grading, "start_worker", lambda *_: pytest.fail("a second one"))
    lock_holder(mini, course_socket(mini))
    result = kata(mini, "check", "02")
    assert result.exit_code == 1, result.output
    notice = "kata: graded cold: the warm grader was still starting (the next check takes"
    assert notice in result.stderr
