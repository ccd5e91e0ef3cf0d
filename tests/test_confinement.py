"""A submission that attacks the grader harms nothing outside its own run, warm or cold."""

import ast
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from kata.cli import cli
from kata.course import load_course
from kata.diagnosis.diagnose import Failure, diagnose
from kata.handoffs.run_request import MalformedRequest, RunRequest
from kata.isolation import caches, confinement, container
from kata.results import Limits
from kata.servers import warm
from kata.servers.warm import WarmGrader, WarmProcess, WorkerUnavailable
from kata.supervisor import runner
from kata.supervisor.judge_process import grading_environment
from kata.supervisor.runner import grade

from .helpers import MINI, clone_course, escapees, start_worker_process

needs_landlock = pytest.mark.skipif(
    confinement.abi_version() < 6, reason="needs Landlock ABI 6 (Linux 6.12+)"
)

# Each attack must raise; `double` is right only if every one of them did, so a full mark
# for mallory's `double` proves they all failed from inside the run.
MALLORY = """
import os, shutil, socket, sys, time
from pathlib import Path

def attempt(action):
    try:
        action()
    except OSError:
        return True
    return False

def detach(double_fork):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if double_fork and os.fork():
            os._exit(0)
        try:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", MARK])
        finally:
            os._exit(1)
    if double_fork:
        os.waitpid(pid, 0)

def oversized():
    with open("big", "wb") as stream:
        stream.seek(LIMIT)
        stream.write(b"x")

REFUSED = [
    attempt(lambda: shutil.rmtree(SIBLING)),
    attempt(lambda: Path(HOME, "pwned").write_text("mallory was here")),
    attempt(lambda: open(CHECKS, "a").write("# mallory\\n")),
    attempt(lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2)),
    attempt(oversized),
    # A learner's process starts no process (kata.isolation.seccomp.forbid_new_processes).
    attempt(lambda: detach(double_fork=False)),
    attempt(lambda: detach(double_fork=True)),
]
Path("allowed").write_text("its own working folder is writable")

def double(x):
    return x * 2 if all(REFUSED) else x * 3
"""


@pytest.fixture
def attack(tmp_path, monkeypatch):
    """A course, a class (mallory and alice), a home folder and a listener to attack."""
    course = tmp_path / "course"
    shutil.copytree(MINI, course)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    mark = f"kata-escapee-{uuid.uuid4().hex}"
    alice, mallory = tmp_path / "class" / "alice", tmp_path / "class" / "mallory"
    shutil.copytree(MINI / "solutions", alice)
    shutil.copytree(MINI / "solutions", mallory)
    settings = {
        "SIBLING": str(alice),
        "HOME": str(home),
        "CHECKS": str(course / "checks" / "test_01_demo.py"),
        "PORT": listener.getsockname()[1],
        "LIMIT": confinement.FILE_SIZE_LIMIT_BYTES,
        "MARK": mark,
    }
    constants = "".join(f"{name} = {value!r}\n" for name, value in settings.items())
    good = (MINI / "solutions" / "01_demo.py").read_text()
    header, draw = good.split("def double", 1)[0], good.split("def draw", 1)[1]
    (mallory / "01_demo.py").write_text(header + constants + MALLORY + "\ndef draw" + draw)
    before = snapshot(course, tmp_path / "class")
    yield {"course": course, "alice": alice, "mallory": mallory, "home": home, "mark": mark}
    assert snapshot(course, tmp_path / "class") == before, "the course or a submission changed"
    assert list(home.iterdir()) == [], "the home folder was written"
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    assert escapees(mark) == [], "a process of the submission outlived its grading"


def snapshot(*folders: Path) -> dict[str, bytes]:
    return {
        str(path): path.read_bytes()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and ".kata" not in path.parts
    }


@needs_landlock
def test_kata_grade_confines_each_submission_cold(attack, tmp_path):
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(
        cli,
        ["--course", str(attack["course"]), "grade", str(attack["mallory"]),
         str(attack["alice"]), "--out", str(out), "--jobs", "1", "--timeout", "20"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with out.open() as stream:
        rows = {Path(row["submission"]).name: row for row in csv.DictReader(stream)}
    assert rows["alice"]["total"] == rows["alice"]["max"] == "2", rows["alice"]
    assert rows["mallory"]["01_demo"] == "1", "an attack was not refused inside the run"


@needs_landlock
@pytest.mark.skipif(not warm.worker_supported(), reason="needs fork and AF_UNIX")
def test_a_warm_run_is_confined_and_leaves_nothing_running(attack, tmp_path):
    course = load_course(attack["course"])
    worker, socket_path = start_worker_process(tmp_path, course.root)
    try:
        assert warm.wait_for_worker(socket_path)
        on = WarmGrader(socket_path, course.root, grading_environment(course.state_dir))
        mallory = grade(course, course.exercises, attack["mallory"], warm=on)
        alice = grade(course, course.exercises, attack["alice"], warm=on)
    finally:
        warm.stop_worker(socket_path)
        worker.wait(timeout=30)
    assert alice.passed
    double = [c for r in mallory.results for c in r.checks if c.task == "double"]
    assert double and all(c.passed for c in double), "an attack was not refused inside the run"


def run_request(args: list[str], cwd: str) -> RunRequest:
    return RunRequest(args, cwd, {}, 1024, None, None, {}, 10.0, "key")


def test_a_run_request_reads_back_as_written_and_refuses_anything_else():
    request = run_request(["--version"], "/tmp")
    written = json.loads(request.line("token"))
    assert written.pop("token") == "token" and RunRequest.read(written) == request
    for wrong in ({}, {**written, "seconds": "soon"}, {**written, "confine": ["/"]}):
        with pytest.raises(MalformedRequest, match="not a grading request"):
            RunRequest.read(wrong)


def test_a_worker_turns_away_requests_without_its_token(tmp_path):
    worker, socket_path = start_worker_process(tmp_path, MINI)
    try:
        assert warm.wait_for_worker(socket_path)
        connection = warm.connect_worker(socket_path)
        # Refused, whichever comes first: the worker's reason, or its closing the connection
        # while the request is still being sent (seen with both cores busy).
        with pytest.raises(WorkerUnavailable, match="not a request|Broken pipe|reset by peer"):
            WarmProcess(connection, run_request(["--version"], str(tmp_path)), "guess")
    finally:
        warm.stop_worker(socket_path)
        worker.wait(timeout=30)


def test_without_landlock_grade_refuses_and_unconfined_proceeds(tmp_path):
    env = {**os.environ, confinement.SWITCH_VARIABLE: "off"}
    submission = tmp_path / "alice"
    shutil.copytree(MINI / "solutions", submission)
    kata = [sys.executable, "-m", "kata"]
    command = ["--course", str(MINI), "grade", str(submission), "--out", str(tmp_path / "g.csv")]
    refused = subprocess.run(kata + command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "--unconfined" in refused.stderr, refused.stderr
    assert not (tmp_path / "g.csv").exists()
    graded = subprocess.run(
        [*kata, *command, "--unconfined"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert graded.returncode == 0, graded.stderr
    assert ",2,2," in (tmp_path / "g.csv").read_text()


def test_accelerator_device_nodes_are_allowed_where_they_exist(tmp_path):
    no_accelerator, dev = tmp_path / "cpu-only", tmp_path / "dev"
    (no_accelerator / "shm").mkdir(parents=True)
    assert confinement.grading_policy([], [], dev=str(no_accelerator)).devices == ()
    (dev / "shm").mkdir(parents=True)
    for node in ("nvidia0", "nvidiactl", "accel0"):
        (dev / node).touch()
    (dev / "vfio").mkdir()
    devices = confinement.grading_policy([], [], dev=str(dev)).devices
    expected = {"accel0", "nvidia0", "nvidiactl", "vfio", "shm"}
    assert {Path(d).name for d in devices} == expected


def test_only_rights_the_kernel_knows_are_asked_for():
    assert confinement.handled_rights(1) == (confinement.FS_ABI1, 0, 0)
    fs, net, scoped = confinement.handled_rights(4)
    assert fs & confinement.FS_TRUNCATE and not fs & confinement.FS_IOCTL_DEV
    assert net == confinement.NET_BIND_TCP | confinement.NET_CONNECT_TCP and scoped == 0
    assert confinement.handled_rights(7)[2] == (
        confinement.SCOPE_SIGNAL | confinement.SCOPE_ABSTRACT_UNIX_SOCKET
    )


def test_the_policy_writes_nowhere_but_the_run(tmp_path):
    policy = confinement.grading_policy([str(MINI)], [str(tmp_path)])
    assert set(policy.writable) == {str(tmp_path), "/dev/null"}
    assert str(MINI) in policy.readable and str(Path.home()) not in policy.readable


def test_a_refused_write_is_diagnosed_as_the_sandbox():
    failure = Failure(("PermissionError", "OSError"), "[Errno 13] Permission denied: '/x'")
    found = diagnose(failure)
    assert found and "grading runs sandboxed" in found.cause


def test_doctor_and_the_switch_say_what_is_in_force(monkeypatch):
    monkeypatch.setenv(confinement.SWITCH_VARIABLE, "off")
    assert confinement.describe().startswith("none: confinement is switched off")


def test_a_run_that_fills_its_scratch_folder_is_stopped(tmp_path):
    """Many files, each under the file-size cap, still stop once the folder holds too much."""
    folder = tmp_path / "filler"
    folder.mkdir()
    (folder / "01_demo.py").write_text(
        "import itertools, time\n\ndef double(x):\n"
        "    for n in itertools.count():\n"
        "        with open(f'junk{n}', 'wb') as f:\n            f.write(b'x' * 2**20)\n"
        "        time.sleep(0.001)\n"
    )
    course = load_course(MINI)
    limits = Limits(scratch_bytes=20 * 2**20, check_seconds=30)
    started = time.monotonic()
    grading = grade(course, [course.exercises[0]], folder, limits)
    if "mount" in container.available_layers():  # a tmpfs of 20 MiB: the kernel refuses
        stopped = [c for c in grading.results[0].checks if "No space left" in c.message]
    else:  # measured by the grader, which stops the run
        stopped = [c for c in grading.results[0].checks if "more than 20 MiB" in c.message]
    assert stopped, [c.message for c in grading.results[0].checks]
    assert time.monotonic() - started < 30, "the run went on to its time limit"


@pytest.mark.parametrize(
    ("graded", "owned"),
    [("exercises", "jax-cache"), ("solutions", "jax-cache-reference"), ("elsewhere", None)],
)
def test_only_the_courses_own_files_use_a_jax_compilation_cache(
    tmp_path, monkeypatch, graded, owned
):
    """A run of the learner's exercises/ or the instructor's solutions/ adds compiled
    programs to a cache of their own, its judge to one beside it; a submission graded from
    any other folder neither writes nor reads one, and every cache of the course is hidden
    from it, as each is from every run that does not own it."""
    monkeypatch.delenv(caches.SHARE_WITH_EVERY_SOURCE_VARIABLE, raising=False)
    course = load_course(MINI)
    source = {"exercises": course.exercises_dir, "solutions": course.solutions_dir}.get(
        graded, tmp_path
    )
    shared = str(tmp_path / "jax-cache")
    ran = caches.caches_of_run(shared, graded == "exercises", graded == "solutions")
    run = runner._Run(
        course, source.resolve(), {}, Limits(), 60.0, 0.0, None, threading.Event(), (), 60.0,
        [], lambda check: None, caches=ran,
    )  # fmt: skip
    paths = runner._ChildRun(run, [], set()).confined_paths(str(tmp_path / "scratch"))
    names = ("jax-cache", "jax-cache-judge", "jax-cache-reference", "jax-cache-reference-judge")
    for name in names:
        cache = str(tmp_path / name)
        mine = owned is not None and name in (owned, owned + "-judge")
        assert (cache in paths["write"]) is mine, (name, paths)
        assert (cache in paths["hidden"]) is not mine, (name, paths)
        assert cache not in paths["read"], (name, paths)


PEEK_AT_THE_CACHES = """
import os

def double(x):
    seen = {"told": "JAX_COMPILATION_CACHE_DIR" in os.environ}
    with open("/proc/self/environ", "rb") as environ:
        seen["told at start"] = b"jax-cache" in environ.read()
    for folder in FOLDERS:
        try:
            seen[os.path.basename(folder)] = len(os.listdir(folder))
        except OSError as error:
            seen[os.path.basename(folder)] = type(error).__name__
    raise RuntimeError(f"SEEN {seen}")
"""


@pytest.mark.parametrize(("landlock", "grader"), [("on", "cold"), ("off", "cold"), ("on", "warm")])
def test_a_submission_sees_no_cache_another_run_wrote(tmp_path, monkeypatch, landlock, grader):
    """An instructor who solved the course in their own exercises/, and ran `kata verify`,
    filled the course's caches with compiled solutions: a submission graded from elsewhere,
    cold or by the warm grader, is told none of them (not even in the environment its
    process started with) and cannot list one it guesses, under Landlock or, without it,
    under the run's mount namespace alone."""
    if landlock == "on" and confinement.abi_version() == 0:
        pytest.skip("no Landlock here")
    if landlock == "off" and "mount" not in container.available_layers():
        pytest.skip("no mount namespace here: a process of the grader's user reads its files")
    monkeypatch.delenv(caches.SHARE_WITH_EVERY_SOURCE_VARIABLE, raising=False)
    if landlock == "off":
        monkeypatch.setenv("KATA_CONFINEMENT", "off")
    course = load_course(clone_course(MINI, tmp_path / "course"))
    shared = tmp_path / "jax-cache"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(shared))
    assert grade(course, course.exercises[:1], course.solutions_dir).passed
    assert not shared.exists() or not any(shared.iterdir()), "the reference wrote the shared cache"
    for solution in course.solutions_dir.glob("*.py"):
        shutil.copy(solution, course.exercises_dir / solution.name)
    assert grade(course, course.exercises[:1], course.exercises_dir).passed
    reference = Path(caches.reference_cache(str(shared)))
    everyone = [shared, Path(caches.judge_cache(str(shared))), reference]
    everyone.append(Path(caches.judge_cache(str(reference))))
    assert all(any(folder.iterdir()) for folder in everyone), "a run compiled nothing"
    assert not any(entry.name.startswith("jax-cache") for entry in course.state_dir.glob("*")), (
        "the course's own cache was used, not the one named"
    )
    submission = tmp_path / "submission"
    submission.mkdir()
    folders = f"FOLDERS = {[str(f) for f in everyone]!r}\n"
    (submission / "01_demo.py").write_text(folders + PEEK_AT_THE_CACHES)
    if grader == "cold":
        graded = grade(course, course.exercises[:1], submission)
    else:
        socket_path = tmp_path / "worker" / "w.sock"
        socket_path.parent.mkdir()
        env = grading_environment(course.state_dir)
        warm.start_worker(socket_path, course.root, env)
        served = None
        try:
            assert warm.wait_for_worker(socket_path)
            on = WarmGrader(socket_path, course.root, env)
            graded = grade(course, course.exercises[:1], submission, warm=on)
        finally:
            served = warm.stop_worker(socket_path)
        assert served == 1, "the warm grader did not grade it"
    messages = " ".join(c.message or "" for r in graded.results for c in r.checks)
    seen = ast.literal_eval("{" + messages.split("SEEN {")[1].split("}")[0] + "}")
    assert seen.pop("told") is False and seen.pop("told at start") is False, seen
    assert all(v in (0, "PermissionError", "FileNotFoundError") for v in seen.values()), seen


def test_the_judge_imports_nothing_from_the_run_folder(tmp_path, monkeypatch):
    """The run's working folder, which the learner's process may write, leaves the judge's
    import path, however it was spelled there (`python -m` adds it first)."""
    from kata.judge.start import keep_the_run_folder_off_the_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), "", f"{tmp_path}/.", *sys.path])
    keep_the_run_folder_off_the_path()
    assert all(entry and os.path.abspath(entry) != str(tmp_path) for entry in sys.path)
