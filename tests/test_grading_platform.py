"""Where a run grades (kata.grading_platform): one decision, in the supervisor, that
every process kata starts is given; on a machine with a chip, the CPU, said in one line in
every output, naming the chip's holder. A held chip is a real lockf lock on a lock file, as
libtpu takes it, held by another process; an installed TPU runtime is simulated."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kata import grading_platform as platforms
from kata import notebook
from kata.course import load_course
from kata.grading_platform import ChipHolder, System, choose_platform
from kata.servers import warm as warm_grading
from kata.servers.warm import WarmGrader, stop_worker, wait_for_worker
from kata.supervisor.judge_process import grading_environment
from kata.supervisor.runner import grade

from .helpers import REPO, kata, start_worker_process

# Takes the lock as libtpu does (lockf: a POSIX record lock on the whole file) and keeps it.
HOLD_LOCK = (
    "import fcntl, sys, time\n"
    "lock = open(sys.argv[1], 'w')\n"
    "fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def held_lock(tmp_path):
    """A lock file held by another process, as a TPU's holder holds libtpu's: its path,
    and the holder's pid and command name as the system has them."""
    lock_file = tmp_path / "libtpu_lockfile"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        command = Path(f"/proc/{holder.pid}/comm").read_text().strip()
        yield lock_file, holder.pid, command
    finally:
        holder.kill()
        holder.wait()


def fake_dev(root: Path, *nodes: str) -> Path:
    """A /dev with these device nodes (plain files: only their names are looked at)."""
    for node in nodes:
        (root / node).parent.mkdir(parents=True, exist_ok=True)
        (root / node).touch()
    return root


@pytest.fixture
def tpu_machine(monkeypatch, held_lock, tmp_path):
    """This process as the supervisor on a machine with libtpu installed whose TPU another
    process holds; its decision made afresh, and forgotten after."""
    lock_file, pid, command = held_lock
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.setattr(platforms, "installed_accelerator", lambda: "TPU")
    dev = fake_dev(tmp_path / "dev", "accel0")
    monkeypatch.setattr(platforms, "SYSTEM", System(lock_file=lock_file, dev=dev))
    platforms.grading_platform.cache_clear()
    yield pid, command
    platforms.grading_platform.cache_clear()


NOWHERE = Path("/nonexistent")


def choose(monkeypatch, chip, environ=None, lock_file=NOWHERE, proc=NOWHERE, dev=None):
    """The decision on a machine with `chip`'s runtime installed and, unless `dev` says
    otherwise, its chip's node in /dev."""
    monkeypatch.setattr(platforms, "installed_accelerator", lambda: chip)
    if dev is None:
        dev = fake_dev(Path(tempfile.mkdtemp()), "accel0", "nvidia0")
    return choose_platform(environ or {}, System(lock_file, proc, dev))


# The decision -------------------------------------------------------------------------


def test_without_an_accelerator_jax_keeps_its_own_choice(monkeypatch):
    chosen = choose(monkeypatch, None)
    assert (chosen.platform, chosen.reason, chosen.environment()) == (None, "", {})


@pytest.mark.parametrize("chip", ["TPU", "GPU"])
def test_a_runtime_without_its_chip_leaves_the_cpu_unsaid(monkeypatch, tmp_path, chip):
    """A machine image may carry JAX's CUDA plugin and no GPU."""
    chosen = choose(monkeypatch, chip, dev=fake_dev(tmp_path, "dri/card0", "vfio/vfio", "null"))
    assert (chosen.environment(), chosen.reason) == ({"JAX_PLATFORMS": "cpu"}, "")


@pytest.mark.parametrize(
    "chip, node", [("TPU", "accel0"), ("TPU", "vfio/0"), ("GPU", "nvidia0"), ("GPU", "kfd")]
)
def test_with_a_chip_every_process_grades_on_the_cpu_and_it_is_said(
    monkeypatch, tmp_path, chip, node
):
    chosen = choose(monkeypatch, chip, dev=fake_dev(tmp_path, node))
    assert chosen.environment() == {"JAX_PLATFORMS": "cpu"}
    assert chosen.reason == f"graded on the CPU, the speed checks timed on the {chip}"
    assert (chosen.holder, chosen.chip) == (None, chip)


def test_a_tpu_held_by_katas_own_chip_holder_is_timed_on(monkeypatch, tmp_path):
    """The holder's lock is libtpu's, as another program's is: told apart by its command."""
    lock_file = tmp_path / "libtpu_lockfile"
    command = [sys.executable, "-c", HOLD_LOCK, str(lock_file), "kata.servers.chip_holder"]
    holder = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        chosen = choose(monkeypatch, "TPU", lock_file=lock_file, proc=Path("/proc"))
    finally:
        holder.kill()
        holder.wait()
    assert chosen.reason == "graded on the CPU, the speed checks timed on the TPU"
    assert (chosen.holder.pid, chosen.chip) == (holder.pid, "TPU")


@pytest.mark.parametrize("chip", ["TPU", None])
def test_the_users_own_jax_platforms_is_kept(monkeypatch, chip):
    quiet = choose(monkeypatch, chip, {"JAX_PLATFORMS": "cpu"})
    assert (quiet.environment(), quiet.reason) == ({"JAX_PLATFORMS": "cpu"}, "")
    asked = choose(monkeypatch, "TPU", {"JAX_PLATFORMS": "tpu"})
    assert asked.environment() == {"JAX_PLATFORMS": "tpu"}
    assert "JAX_PLATFORMS=tpu" in asked.reason and "unset it" in asked.reason


@pytest.mark.parametrize(
    "setting, runtime, nodes, lacks",
    [
        ("tpu", None, (), "JAX's TPU runtime is not installed"),
        ("tpu", "TPU", ("nvidia0",), "this machine has no TPU"),
        ("cpu,tpu", "TPU", (), "this machine has no TPU"),
        ("cuda", "TPU", ("accel0",), "JAX's GPU runtime is not installed"),
        ("gpu", "GPU", ("accel0",), "this machine has no GPU"),
        ("ROCM", "GPU", (), "this machine has no GPU"),
    ],
)
def test_jax_platforms_naming_a_chip_the_machine_lacks_is_one_line(
    monkeypatch, tmp_path, setting, runtime, nodes, lacks
):
    """Every process of a run would fail as JAX starts ("Unable to initialize backend
    'tpu'"): grading refuses in one line instead."""
    monkeypatch.setattr(platforms, "runtime_installed", lambda chip: chip == runtime)
    system = System(NOWHERE, NOWHERE, fake_dev(tmp_path, "null", *nodes))
    said = platforms.missing_chip({"JAX_PLATFORMS": setting}, system)
    assert said.startswith(f"JAX_PLATFORMS={setting} asks for a ") and lacks in said, said
    assert said.endswith("or set JAX_PLATFORMS=cpu")


@pytest.mark.parametrize("setting", ["", "cpu", "tpu", "cuda,cpu", "interpreter"])
def test_jax_platforms_the_machine_can_take_is_not_refused(monkeypatch, tmp_path, setting):
    monkeypatch.setattr(platforms, "runtime_installed", lambda chip: True)
    system = System(NOWHERE, NOWHERE, fake_dev(tmp_path, "accel0", "nvidia0"))
    assert platforms.missing_chip({"JAX_PLATFORMS": setting}, system) == ""


def test_a_check_with_jax_platforms_naming_a_missing_chip_exits_2_in_one_line(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    monkeypatch.setattr(platforms, "SYSTEM", System(NOWHERE, NOWHERE, NOWHERE))
    result = kata(REPO, "check", "01", "--solutions")
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert "JAX_PLATFORMS=tpu asks for a TPU" in line, line


def test_a_held_tpu_is_named_by_its_lock_without_taking_it(monkeypatch, held_lock):
    lock_file, pid, command = held_lock
    chosen = choose(monkeypatch, "TPU", lock_file=lock_file, proc=Path("/proc"))
    assert chosen.holder == ChipHolder(pid, command)
    assert chosen.reason == f"graded on the CPU: the TPU is held by process {pid} ({command})"
    assert chosen.environment() == {"JAX_PLATFORMS": "cpu"}
    # Asked, not taken: a third process still finds it held by the same one.
    again = choose(monkeypatch, "TPU", lock_file=lock_file, proc=Path("/proc"))
    assert again.holder == ChipHolder(pid, command)


def test_a_lock_file_left_behind_holds_nothing(monkeypatch, tmp_path):
    stale = tmp_path / "libtpu_lockfile"
    stale.write_text("")  # libtpu's file stays after its holder exits
    assert choose(monkeypatch, "TPU", lock_file=stale).holder is None


def fake_proc(root: Path, processes: dict[int, tuple[str, int, list[str]]]) -> Path:
    """A /proc with these processes (command name, parent, open files' targets), the first
    one this process ("self")."""
    for pid, (command, parent, targets) in processes.items():
        (root / str(pid) / "fd").mkdir(parents=True)
        (root / str(pid) / "comm").write_text(command + "\n")
        (root / str(pid) / "stat").write_text(f"{pid} ({command}) S {parent} {pid} 0 0\n")
        for fd, target in enumerate(targets):
            (root / str(pid) / "fd" / str(fd)).symlink_to(target)
    (root / "self").symlink_to(str(next(iter(processes))))
    return root


@pytest.mark.parametrize(
    "chip, node", [("TPU", "accel0"), ("TPU", "vfio/0"), ("GPU", "nvidia0"), ("GPU", "kfd")]
)
def test_where_no_lock_names_it_the_process_it_runs_under_does(monkeypatch, tmp_path, chip, node):
    """As `!kata check` in a notebook whose kernel holds the chip: kata, under a shell,
    under the kernel."""
    dev = fake_dev(tmp_path / "dev", node, "null", "nvidiactl", "vfio/vfio")
    others = [str(dev / "null"), "/tmp/x", str(dev / "nvidiactl"), str(dev / "vfio/vfio")]
    chip_open = ["/dev/pts/0", str(dev / node)]
    proc = fake_proc(
        tmp_path / "proc",
        {
            4242: ("kata", 4141, others),
            4141: ("sh (a) b)", 4343, []),
            4343: ("python3", 1, chip_open),
            1: ("init", 0, []),
        },
    )
    chosen = choose(monkeypatch, chip, proc=proc, dev=dev)
    assert chosen.holder == ChipHolder(4343, "python3")
    assert chosen.reason == f"graded on the CPU: the {chip} is held by process 4343 (python3)"
    # For a TPU no other process's (libtpu's lock names those): only those it runs under.
    apart = fake_proc(tmp_path / "apart", {4242: ("kata", 1, others), 4444: ("x", 1, chip_open)})
    if chip == "TPU":
        assert choose(monkeypatch, chip, proc=apart, dev=dev).holder is None


def test_a_gpu_any_process_holds_is_named_kata_s_own_holder_only_where_none_else_does(
    monkeypatch, tmp_path
):
    """A GPU takes no lock: a notebook or script beside kata, not under it, is found among
    every process; kata's own chip holder is not the GPU's holder."""
    dev = fake_dev(tmp_path / "dev", "nvidia0", "nvidiactl")
    gpu, ctl = [str(dev / "nvidia0")], [str(dev / "nvidiactl")]
    processes = {
        4242: ("kata", 1, ctl),
        4300: ("python3", 1, gpu),
        4444: ("notebook", 1, gpu),
        1: ("init", 0, []),
    }
    proc = fake_proc(tmp_path / "proc", processes)
    (proc / "4300" / "cmdline").write_bytes(b"python3\0-m\0kata.servers.chip_holder\0")
    chosen = choose(monkeypatch, "GPU", proc=proc, dev=dev)
    assert chosen.holder == ChipHolder(4444, "notebook")
    assert chosen.reason == "graded on the CPU: the GPU is held by process 4444 (notebook)"
    del processes[4444]
    alone = fake_proc(tmp_path / "alone", processes)
    (alone / "4300" / "cmdline").write_bytes(b"python3\0-m\0kata.servers.chip_holder\0")
    chosen = choose(monkeypatch, "GPU", proc=alone, dev=dev)
    assert (chosen.holder, chosen.chip) == (ChipHolder(4300, "python3"), "GPU")
    assert chosen.reason == "graded on the CPU, the speed checks timed on the GPU"


def test_without_proc_nothing_fails(monkeypatch, tmp_path):
    chosen = choose(monkeypatch, "GPU", proc=tmp_path / "no-proc")
    assert (chosen.platform, chosen.holder) == ("cpu", None)


def test_every_grading_process_starts_with_the_decision(tpu_machine, tmp_path):
    env = grading_environment(tmp_path)
    assert env["JAX_PLATFORMS"] == "cpu"


# Every process kata starts, and every output -------------------------------------------

CONFTEST = "from kata.checking.fixtures import ex, pytest_configure, rng, tell  # noqa: F401\n"
# The judge and the learner's process each say which platform they were given.
CHECKS = """
import os

import jax
import pytest

from kata.checking.learner_calls import in_learner_process


@in_learner_process
def platform_seen(ex):
    return [os.environ.get("JAX_PLATFORMS"), jax.default_backend()]


@pytest.mark.task("f")
def test_platform(ex):
    assert platform_seen(ex) == ["cpu", "cpu"], "the learner's process"
    assert [os.environ.get("JAX_PLATFORMS"), jax.default_backend()] == ["cpu", "cpu"], "judge"
"""
MANIFEST = """
[course]
title = "platform"

[[exercise]]
id = "01_where"
title = "Where it runs"
hints = ["One.", "Two."]

[[exercise]]
id = "02_sharded"
title = "On four CPU devices"
host_devices = 4
hints = ["One.", "Two."]
"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("platform")
    (root / "course.toml").write_text(MANIFEST)
    for folder in ("checks", "exercises", "solutions"):
        (root / folder).mkdir()
    (root / "checks" / "conftest.py").write_text(CONFTEST)
    for exercise in ("01_where", "02_sharded"):
        (root / "checks" / f"test_{exercise}.py").write_text(CHECKS)
        for folder in ("exercises", "solutions"):
            (root / folder / f"{exercise}.py").write_text("def f():\n    return 0\n")
    return load_course(root)


def all_passed(grading) -> bool:
    return all(check.passed for result in grading.results for check in result.checks)


def test_the_judge_and_the_learners_process_get_it_cold(course, tpu_machine):
    pid, _ = tpu_machine
    graded = grade(course, list(course.exercises), course.exercises_dir)
    assert all_passed(graded), [c.message for r in graded.results for c in r.checks]
    assert graded.platform.holder.pid == pid


@pytest.mark.skipif(not warm_grading.worker_supported(), reason="needs fork and AF_UNIX")
def test_the_warm_worker_and_its_forks_get_it(course, tpu_machine, tmp_path):
    process, socket_path = start_worker_process(tmp_path, course.root)
    try:
        assert wait_for_worker(socket_path)
        warm = WarmGrader(socket_path, course.root, grading_environment(course.state_dir))
        graded = grade(course, list(course.exercises), course.exercises_dir, warm=warm)
        assert warm.answered
        assert all_passed(graded), [c.message for r in graded.results for c in r.checks]
    finally:
        stop_worker(socket_path)
        process.wait(timeout=30)


def test_each_output_says_where_it_graded_in_one_line(course, tpu_machine, monkeypatch):
    pid, command = tpu_machine
    said = f"the TPU is held by process {pid} ({command})"
    monkeypatch.setenv("KATA_COLD", "1")
    text = kata(course.root, "check", "01")
    assert text.output.splitlines()[0] == f"Graded on the CPU: {said}", text.output
    as_json = json.loads(kata(course.root, "check", "01", "--format", "json").output)
    assert as_json["platform"] == {
        "platform": "cpu",
        "reason": f"graded on the CPU: {said}",
        "holder": {"pid": pid, "command": command},
        "timed_on": None,
    }
    results = json.loads(kata(course.root, "check", "01", "--format", "gradescope").output)
    assert results["output"].splitlines()[0] == f"Graded on the CPU: {said}"
    cell = notebook.check("01_where", course=course.root, cold=True)
    assert repr(cell).splitlines()[0] == f"Graded on the CPU: {said}"
    assert f"Graded on the CPU: {said}" in cell._repr_html_()
    doctor = kata(course.root, "doctor").output
    backend = next(line for line in doctor.splitlines() if line.split()[0] == "backend")
    assert backend.split(None, 1)[1] == f"cpu (graded on the CPU: {said})"
    assert "Traceback" not in doctor and "lockfile" not in doctor


def test_a_run_on_the_machines_own_backend_says_nothing(course, monkeypatch):
    monkeypatch.setattr(platforms, "installed_accelerator", lambda: None)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    platforms.grading_platform.cache_clear()
    try:
        monkeypatch.setenv("KATA_COLD", "1")
        as_json = json.loads(kata(course.root, "check", "01", "--format", "json").output)
        assert as_json["platform"] == {
            "platform": "default",
            "reason": "",
            "holder": None,
            "timed_on": None,
        }
        assert "JAX_PLATFORMS" not in grading_environment(course.state_dir)
    finally:
        platforms.grading_platform.cache_clear()
