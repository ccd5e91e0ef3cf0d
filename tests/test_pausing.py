"""The learner's processes held still while the judge times its own code (issue #48, item 3):
every process the learner's code started, however detached, is stopped and burns no CPU,
none can continue another, and none is left stopped, or alive, once the judge is gone.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from kata.checking.learner_calls import LearnerFunction
from kata.checking.learner_connection import LearnerProcess
from kata.diagnosis.diagnose import Failure, diagnose
from kata.handoffs import learner_requests, starter_requests, wire
from kata.handoffs.environment import LEARNER_SOCKET_VARIABLE
from kata.handoffs.learner_requests import Load
from kata.handoffs.starter_requests import Fresh, Pause, Resume
from kata.isolation import pausing, seccomp

from . import test_evidence as evidence
from .helpers import REPO

grader, worker = evidence.grader, evidence.worker  # how a run is graded: cold, warm

# A spinner, and a reviver that keeps trying to continue every process of the run
# (`os.kill(pid, SIGCONT)`).
SPIN_BODIES = """
import os, signal, threading, time

def _spin():
    while True:
        pass

def _revive():
    while True:
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    os.kill(int(entry), signal.SIGCONT)
                except OSError:
                    pass
"""
# Spinners started every way a process can leave its parent's process group or tree: a
# plain child, a setsid'd one, a double fork (its parent ends: it is orphaned), and the
# reviver.
SPINNERS = (
    SPIN_BODIES
    + """
def _start(body, detached=False, orphaned=False):
    if os.fork() == 0:
        if detached:
            os.setsid()
        if orphaned and os.fork() != 0:
            os._exit(0)
        body()

_start(_spin)
_start(_spin, detached=True)
_start(_spin, detached=True, orphaned=True)
_start(_revive, detached=True, orphaned=True)
try:
    os.kill(os.getpid(), signal.SIGCONT)
    CONTINUING = "allowed"
except PermissionError:
    CONTINUING = "refused"
"""
)
# What a learner's process itself can start: threads (it may start no process:
# kata.isolation.seccomp.forbid_new_processes), the spinners and the reviver. Held still
# with the process they run in.
THREAD_SPINNERS = (
    SPIN_BODIES
    + """
for _body in (_spin, _spin, _spin, _revive):
    threading.Thread(target=_body, daemon=True).start()
"""
)

# A subreaper standing for the starter: it forks a learner's process that runs SPINNERS,
# stops its tree, and reports what the kernel counted.
ROOT = """
import json, os, sys, time
from kata.isolation import confinement, pausing

def cpu_ticks(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")

def burned(pids, seconds):
    before = cpu_ticks(pids)
    time.sleep(seconds)
    return cpu_ticks(pids) - before

confinement.become_subreaper()
report, told = os.pipe()
if os.fork() == 0:
    pausing.forbid_continuing()
    spinners = {}
    exec(sys.argv[1], spinners)
    os.write(told, spinners["CONTINUING"].encode())
    while True:
        pass
continuing = os.read(report, 16).decode()
time.sleep(0.5)  # every spinner started
tree = pausing.descendants(os.getpid())
stopped = pausing.stop_tree(os.getpid())
states = {pid: open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] for pid in tree}
paused = burned(tree, 0.5)
pausing.resume(stopped)
running = burned(tree, 0.5)
confinement.end_descendants()
print(json.dumps({"tree": len(tree), "stopped": len(stopped), "states": states,
                  "paused": paused, "running": running, "continuing": continuing}))
"""

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc")


@linux_only
def test_every_process_the_learner_started_is_stopped_and_burns_nothing():
    done = subprocess.run(
        [sys.executable, "-c", ROOT, SPINNERS], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    # The learner's process, its three spinners and its reviver (the double forks'
    # middle processes ended: zombies, or reaped).
    assert seen["tree"] >= 5, seen
    assert set(seen["states"].values()) <= set(pausing.STILL_STATES), seen
    assert seen["continuing"] == "refused", seen
    # Five processes that spin burn at least 0.25 s of CPU in 0.5 s on one free core; held
    # still, none (a tick's rounding at most).
    assert seen["paused"] <= 0.02, seen
    assert seen["running"] >= 0.2, seen


def test_the_filter_refuses_sigcont_alone():
    program = pausing.continuing_refused_program("x86_64")
    refusals = [step for step in program if step[3] == (0x00050000 | 1)]  # EPERM
    kill, sigcont = 62, int(signal.SIGCONT)
    assert (0x15, 0, 4, kill) in program and (0x15, 0, 1, sigcont) in program
    assert len(refusals) == 2 + len(pausing._SIGNAL_CALLS["x86_64"]), program


# The starter in an interpreter of its own, as the grader forks it before any JAX thread
# exists: forked from this test process (whose JAX threads may hold a lock at the fork), a
# learner's process hung in a futex wait under the suite's load, and the test with it.
STARTER = """
import socket, sys
from kata.isolation import pausing, seccomp
from kata.learner_side.learner_process import Starter

pausing.PAUSE_LIMIT_SECONDS = 1.0
Starter(socket.socket(fileno=int(sys.argv[1])), False, None).serve()
"""


def _fresh_starter() -> tuple[socket.socket, subprocess.Popen]:
    """A starter in an interpreter of its own (STARTER), and the judge's end of its socket."""
    judge, theirs = socket.socketpair()
    process = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(theirs.fileno())], pass_fds=[theirs.fileno()]
    )
    theirs.close()
    return judge, process


def _end_tree(process: subprocess.Popen) -> None:
    """Kill the starter and whatever is left of its tree, so no spinner outlives a test."""
    for pid in pausing.descendants(process.pid) | {process.pid}:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


@pytest.fixture
def starter(tmp_path):
    """A learner's starter and a learner's process of it that imported a module starting
    THREAD_SPINNERS; the starter's socket and the learner's pid."""
    module = tmp_path / "spinners.py"
    module.write_text(THREAD_SPINNERS)
    judge, process = _fresh_starter()
    judge.settimeout(60)
    try:
        starter_requests.send(judge, Fresh())
        learner_pid = int(wire.receive(judge)[0]["pid"])
        _, (fd,), _, _ = socket.recv_fds(judge, 1, 1)
        learner = socket.socket(fileno=fd)
        learner.settimeout(60)
        wire.send(learner, learner_requests.document(Load(str(module))), [])
        wire.receive(learner)
        yield judge, process.pid, learner_pid
        judge.close()
        learner.close()
        process.wait(timeout=30)  # the starter ends once the judge hangs up
    finally:
        judge.close()
        _end_tree(process)


def _tree_states(root: int) -> dict[int, str]:
    states = {}
    for pid in pausing.descendants(root):
        with contextlib.suppress(OSError):  # it ended
            states[pid] = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    return states


def _thread_states(pid: int) -> list[str]:
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # it ended
            states.append((task / "stat").read_text().rpartition(")")[2].split()[0])
    return states


def _wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@linux_only
def test_the_starter_stops_its_whole_tree_and_continues_it(starter):
    judge, starter_pid, learner_pid = starter
    starter_requests.send(judge, Pause())
    stopped = wire.receive(judge)[0]["stopped"]
    states = _tree_states(starter_pid)
    assert stopped >= 1 and learner_pid in states, states
    assert set(states.values()) <= set(pausing.STILL_STATES), states
    threads = _thread_states(learner_pid)  # its main thread and the four spinners
    assert len(threads) >= 5 and set(threads) <= set(pausing.STILL_STATES), threads
    starter_requests.send(judge, Resume())
    wire.receive(judge)
    assert _wait_for(lambda: "R" in _thread_states(learner_pid))


@linux_only
def test_a_judge_that_goes_quiet_leaves_nothing_stopped(starter):
    judge, _, learner_pid = starter
    starter_requests.send(judge, Pause())
    wire.receive(judge)
    # PAUSE_LIMIT_SECONDS (1 s here) without a word: the starter continues them itself.
    assert _wait_for(lambda: "R" in _thread_states(learner_pid))


@linux_only
def test_a_judge_that_hangs_up_while_they_are_stopped_leaves_none_alive(starter):
    judge, starter_pid, _ = starter
    starter_requests.send(judge, Pause())
    wire.receive(judge)
    tree = pausing.descendants(starter_pid)
    judge.close()
    assert _wait_for(lambda: not any(_alive(pid) for pid in tree)), _tree_states(starter_pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in "ZXx"


# 02's eager fast_fn (the plain wrong answer, 3.0-5.2× where 15× is needed), with 12
# threads that spin while the learner's process is idle, which is when the judge times its
# eager baseline between two timed chains. (Spinning whenever it idles, 24 or 40 starve
# everything the judge does on 2 shared cores: the check ran out of time before it was
# judged, both times.) Processes started for it are refused (`forbid_new_processes`).
IDLE_SPINNERS = """
import threading as _threading, time as _time

# Whether a call of fast_fn is running, and when the last one ended.
_calls = [False, 0.0]


def _spin_while_idle():
    while True:
        busy, ended = _calls
        # Idle, a little while after a call: between two of the judge's timed chains.
        if not busy and 0.001 < _time.monotonic() - ended < 0.1:
            _until = _time.monotonic() + 0.001
            while _time.monotonic() < _until:
                pass
        else:
            _time.sleep(0.001)


for _k in range(12):
    _threading.Thread(target=_spin_while_idle, daemon=True).start()


def fast_fn(x):
    _calls[:] = [True, 0.0]
    try:
        return jax.block_until_ready(slow_fn(x))
    finally:
        _calls[:] = [False, _time.monotonic()]
"""


@pytest.mark.slow
@linux_only
def test_threads_spinning_while_the_learner_idles_earn_no_speedup(tmp_path, grader):
    """Graded cold and warm, the eager fast_fn with its spinners: before the judge stopped
    them, the baseline read 235 ms where it takes 9 ms, and the check passed at 81×."""
    code = (REPO / "solutions" / "02_jit.py").read_text() + IDLE_SPINNERS
    check = "test_fast_fn_beats_eager_slow_fn"
    grading = evidence.graded(tmp_path / "spinning", "02_jit", code, only=[check], warm=grader)
    (speed,) = [c for r in grading.results for c in r.checks]
    assert not speed.passed, speed
    assert "faster than slow_fn run eagerly" in (speed.message or ""), speed.message


@linux_only
def test_the_judge_times_its_baseline_with_the_learners_whole_tree_stopped(tmp_path, monkeypatch):
    """Whatever the machine's load: at every call of the judge's baseline in a speed check,
    the learner's process and every thread of it (THREAD_SPINNERS: spinners, and one that
    tries to continue every process) is stopped."""
    module = tmp_path / "spinning.py"
    module.write_text(THREAD_SPINNERS + "\n\ndef same(x):\n    return x\n")
    judge_end, starter = _fresh_starter()
    starter_pid = starter.pid
    monkeypatch.setenv(LEARNER_SOCKET_VARIABLE, str(judge_end.fileno()))
    process = LearnerProcess()
    process.load(module, None)
    seen: list[dict[int, str]] = []
    threads: list[list[str]] = []

    def baseline():
        seen.append(_tree_states(starter_pid))
        threads.append(_thread_states(process.pid))
        return np.float32(0)

    try:
        LearnerFunction(process, {"name": "same"}).speed_vs(
            baseline, np.float32(0.5), reference=lambda x: x, margin=1e-9
        )
        running = [states for states in seen if set(states.values()) - pausing.STILL_STATES]
        assert seen and not running, running
        assert all(len(each) >= 5 and set(each) <= pausing.STILL_STATES for each in threads)
    finally:
        process.stop()
        judge_end.close()
        _end_tree(starter)


# A spinning thread whose process writes its pid where the test finds it. The test continues
# that process from outside the learner's tree while the judge holds the tree still, as the
# kernel would for a signal no filter on the learner's calls can refuse: a POSIX timer armed
# to send SIGCONT (which the red team of issue #48 found continuing a stopped process on an
# older kernel; from Linux 6.13 a stop parks such a timer), an I/O signal (F_SETSIG), a
# parent's death signal.
CONTINUED_SPINNER = """
import os, threading

def _spin():
    while True:
        pass

threading.Thread(target=_spin, daemon=True).start()
with open(os.environ["SPINNER_PID_FILE"], "w") as found:
    found.write(str(os.getpid()))
"""


@linux_only
def test_a_hold_that_the_learners_processes_stayed_in_is_said_to_be_whole(starter):
    """THREAD_SPINNERS, one trying os.kill(SIGCONT) on all: none ran while the judge held
    them."""
    judge, _, _ = starter
    starter_requests.send(judge, Pause())
    wire.receive(judge)
    time.sleep(0.2)
    starter_requests.send(judge, Resume())
    assert wire.receive(judge)[0]["ran"] == []


@linux_only
def test_a_process_continued_during_a_hold_fails_what_the_judge_timed(tmp_path, monkeypatch):
    """Whatever continued it, a process of the learner's that ran while the judge timed its
    baseline voids the timing: the speed check fails, saying so."""
    module = tmp_path / "continued.py"
    module.write_text(CONTINUED_SPINNER + "\n\ndef same(x):\n    return x\n")
    pid_file = tmp_path / "spinner.pid"
    monkeypatch.setenv("SPINNER_PID_FILE", str(pid_file))
    judge_end, starter = _fresh_starter()
    monkeypatch.setenv(LEARNER_SOCKET_VARIABLE, str(judge_end.fileno()))
    process = LearnerProcess()
    process.load(module, None)
    assert _wait_for(pid_file.exists)
    spinner, done = int(pid_file.read_text()), threading.Event()

    def continue_it():  # as the kernel would, from outside every filter
        while not done.is_set():
            with contextlib.suppress(OSError):
                os.kill(spinner, signal.SIGCONT)
            time.sleep(0.001)

    continuer = threading.Thread(target=continue_it, daemon=True)
    continuer.start()
    try:
        with pytest.raises(AssertionError, match=r"ran while the grader timed its own code"):
            LearnerFunction(process, {"name": "same"}).speed_vs(
                lambda: time.sleep(0.05), np.float32(0.5), reference=lambda x: x, margin=1e-9
            )
    finally:
        done.set()
        process.stop()
        judge_end.close()
        _end_tree(starter)


# Every way Python starts a process, or runs another program in its place.
STARTS_PROCESSES = """
import multiprocessing, os, subprocess, sys

import numpy as np

PYTHON = [sys.executable, "-c", "pass"]
WAYS = {
    "fork": os.fork,
    "subprocess": lambda: subprocess.run(PYTHON),
    "posix_spawn": lambda: os.posix_spawn(sys.executable, PYTHON, {}),
    "multiprocessing": lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    "spawn": lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
    "execv": lambda: os.execv(sys.executable, PYTHON),
}


def refused():
    answers = []
    for start in WAYS.values():
        try:
            if start() == 0:
                os._exit(0)
            answers.append(0)
        except PermissionError:
            answers.append(1)
    return np.array(answers)
"""


@linux_only
def test_a_learner_s_process_starts_no_process(tmp_path, monkeypatch):
    """Its compilations, CPU and bytes moved are read from it alone: a helper process would
    do the work where nothing counts it. Threads it may start."""
    module = tmp_path / "starts.py"
    module.write_text(STARTS_PROCESSES + THREAD_SPINNERS)
    judge_end, starter = _fresh_starter()
    monkeypatch.setenv(LEARNER_SOCKET_VARIABLE, str(judge_end.fileno()))
    process = LearnerProcess()
    process.load(module, None)
    try:
        assert list(LearnerFunction(process, {"name": "refused"})()) == [1] * 6
        assert len(_thread_states(process.pid)) >= 5
        assert pausing.descendants(starter.pid) == {process.pid}
    finally:
        process.stop()
        judge_end.close()
        _end_tree(starter)


def test_the_filter_refuses_processes_and_allows_threads():
    program = seccomp.processes_refused_program("x86_64")
    eperm, enosys = 0x00050000 | 1, 0x00050000 | 38
    assert (0x06, 0, 0, eperm) in program and (0x06, 0, 0, enosys) in program
    for call in ("fork", "vfork", "execve", "execveat", "clone", "clone3"):
        assert any(
            step[0] == 0x15 and step[3] == seccomp._SYSCALL_NUMBERS["x86_64"][call]
            for step in program
        ), call
    assert (0x45, 0, 2, seccomp.CLONE_THREAD) in program  # a thread's clone: on to allow


@pytest.mark.parametrize(
    "line",
    [
        "with multiprocessing.Pool(4) as pool:",
        "pid = os.fork()",
        "subprocess.run(['nvidia-smi'])",
        "worker.start()",
    ],
)
def test_a_process_refused_is_said_so_not_a_refused_write(line):
    said = diagnose(
        Failure(("PermissionError", "OSError"), "[Errno 1] Operation not permitted", line)
    )
    assert said is not None and said.rule == "process_refused", said
    assert "started a process" in said.cause and "jax.vmap" in said.fix
