"""The run's container (kata.isolation.container): one test per invariant of its docstring,
on the container alone, and how it degrades where a layer is missing.

Each test builds a container in a forked child (a process with threads cannot enter a new
user namespace), runs `inside` as the run's judge would, and gets back what it returned.
"""

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kata.isolation import cgroups, confinement, container, mounts, seccomp

from .helpers import escapees

LAYERS = container.available_layers()
needs = {
    layer: pytest.mark.skipif(
        layer not in LAYERS, reason=f"this system gives runs no {layer} layer"
    )
    for layer in container.LAYERS
}
IPC_CREAT, IPC_RMID = 0o1000, 0


def in_container(inside, spec=None, without="", timeout=60):
    """What `inside()` returned (JSON), run as the judge of a new container built to `spec`,
    once its supervisor has answered (every process of the run gone)."""
    spec = spec or container.Spec()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.close(read)
            os.environ[container.WITHOUT_VARIABLE] = without
            supervisor = container.enter(spec, keep_fds=[write])
            if supervisor is None:
                container.settle(spec)
                os.environ["RESULT_FD"] = str(write)  # for a judge that execs another program
                try:
                    result = {"value": inside()}
                except BaseException as error:  # noqa: BLE001
                    result = {"error": repr(error)}
                os.write(write, json.dumps(result).encode())
                os._exit(0)
            os.close(write)
            code = supervisor.wait()
            code = 0 if code == 0 else 3
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + timeout
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read()
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        raise AssertionError("the container's supervisor did not end")
    assert os.waitstatus_to_exitcode(status) == 0, text
    result = json.loads(text)
    assert "error" not in result, result["error"]
    return result["value"]


def sleeper(mark):
    """A command that sleeps long, its mark in its command line (see helpers.escapees)."""
    return [sys.executable, "-c", "import time; time.sleep(300)", mark]


# 1. See ---------------------------------------------------------------------------


@needs["pid"]
def test_proc_lists_only_the_run_and_no_ancestor_is_reachable():
    outside = os.getpid()

    def inside():
        listed = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        readable = []
        for pid in (outside, os.getppid(), 1):
            with contextlib.suppress(OSError):
                readable.append(Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace"))
        return {"listed": listed, "environs": readable, "me": os.getpid()}

    seen = in_container(inside)
    assert seen["listed"] == [1, seen["me"]], "the run sees processes other than its own"
    secret_name = "PYTEST_CURRENT_TEST"  # in this process's environment: not the run's to see
    assert not any(secret_name in env for env in seen["environs"])


@needs["pid"]
def test_the_kernels_files_only_their_owner_may_read_read_empty():
    owner_only = [
        entry.name
        for entry in os.scandir("/proc")
        if entry.is_file(follow_symlinks=False) and not entry.stat().st_mode & 0o006
    ]
    assert owner_only, "this kernel's /proc has no owner-only file to try"

    def inside():
        seen = {}
        for name in owner_only:
            try:
                with open(f"/proc/{name}", "rb") as file:
                    seen[name] = len(file.read(4096))
            except OSError as error:
                seen[name] = error.strerror
        return seen

    seen = in_container(inside)
    assert not {name: got for name, got in seen.items() if isinstance(got, int) and got}, seen


@needs["mount"]
@needs["cgroup"]
def test_the_run_sees_no_cgroup_but_its_own():
    """Another run's cgroup (its memory use, its processes' count) would be a channel
    between two submissions graded at once; the machine's others tell of its tenants."""
    assert any(cgroups.CGROUP_ROOT.rglob("cgroup.procs")), "no cgroup to hide here"

    def inside():
        groups = {str(p.parent) for p in cgroups.CGROUP_ROOT.rglob("cgroup.procs")}
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        own = {line.split(":", 2)[2] for line in lines}
        return {"groups": sorted(groups), "own": sorted(own)}

    seen = in_container(inside)
    runs = {Path(g).name for g in seen["groups"]}
    assert len(runs) == 1 and runs.pop().startswith(cgroups.CGROUP_PREFIX), seen
    assert all(any(g.endswith(o) for o in seen["own"]) for g in seen["groups"]), seen


def test_no_run_reads_the_machines_firmware_or_kernel_debug_files():
    policy = confinement.grading_policy([], [])
    for folder in confinement.SYSTEM_HIDDEN:
        assert not confinement.readable_under(policy, folder), folder
    assert confinement.readable_under(policy, "/sys/devices/system/cpu")


@needs["mount"]
def test_without_landlock_the_firmware_and_debug_folders_are_empty_too():
    """As root, a run's owner rights read the firmware's tables (serial numbers) and the
    kernel's debug files: the container empties them where Landlock is missing."""
    present = [f for f in confinement.SYSTEM_HIDDEN if os.path.isdir(f) and os.listdir(f)]
    if not present:
        pytest.skip("this machine has nothing in /sys/firmware or the kernel's debug files")

    def inside():
        return {folder: os.listdir(folder) for folder in present}

    assert in_container(inside) == dict.fromkeys(present, [])


# 2. Keep --------------------------------------------------------------------------


@needs["pid"]
@pytest.mark.parametrize("depth", [1, 2, 25])
def test_no_process_of_the_run_outlives_it_however_detached(depth):
    """A chain of `depth` processes, each in a session of its own and orphaned by its parent,
    the last one sleeping: gone by the time the supervisor answers."""
    mark = f"kata-escapee-{uuid.uuid4().hex}"

    def inside():
        for _ in range(depth):
            if os.fork():
                os._exit(0)  # the chain's every link is orphaned at once
            os.setsid()
        os.execv(sys.executable, sleeper(mark))

    def judge():
        pid = os.fork()
        if pid == 0:
            inside()
        os.waitpid(pid, 0)
        deadline = time.monotonic() + 20
        while not escapees(mark) and time.monotonic() < deadline:
            time.sleep(0.05)  # let the chain reach its end
        return len(escapees(mark))

    assert in_container(judge) == 1
    assert escapees(mark) == [], "a detached process outlived its run"


@needs["pid"]
@needs["cgroup"]
def test_a_fork_bomb_is_capped_and_gone_when_the_run_ends():
    mark = f"kata-escapee-{uuid.uuid4().hex}"
    bomb = (
        "import os, time\n"
        "deadline = time.monotonic() + 3\n"
        "while time.monotonic() < deadline:\n"
        "    try:\n        os.fork()\n"
        "    except OSError:\n        time.sleep(0.01)\n"
        "time.sleep(300)\n"
    )

    def judge():
        subprocess.Popen([sys.executable, "-c", bomb, mark])
        time.sleep(3.5)
        return len(escapees(mark))

    counted = in_container(judge)
    assert 1 < counted <= cgroups.PROCESS_CAP
    assert escapees(mark) == [], "a process of the fork bomb outlived its run"


@needs["cgroup"]
def test_each_run_has_a_share_of_the_cpu_of_its_own():
    """Under `kata grade --jobs N`, one submission's spinning threads take their own run's
    share of the CPU, not a neighbour's: each run's cgroup weighs as one where runs contend."""
    kind, parents = cgroups.cgroup_parents(claim=True)
    if kind == "v1" and "cpu" not in parents:
        pytest.skip("no cgroup v1 cpu hierarchy this user may write")
    if kind == "v2" and "cpu" not in cgroups._controllers(parents[""], "cgroup.controllers"):
        pytest.skip("cpu is not delegated to this user")
    lines = in_container(lambda: Path("/proc/self/cgroup").read_text()).splitlines()
    controller = "cpu" if kind == "v1" else ""
    (own,) = [
        line.split(":", 2)[2] for line in lines if controller in line.split(":")[1].split(",")
    ]
    assert cgroups.CGROUP_PREFIX in own, lines
    if kind == "v2":
        assert "cpu" in cgroups._controllers(parents[""], "cgroup.subtree_control")


@needs["ipc"]
def test_no_ipc_object_survives_the_run():
    key = int.from_bytes(os.urandom(3), "big") + 1
    libc = ctypes.CDLL(None, use_errno=True)

    def inside():
        return libc.shmget(key, 4096, IPC_CREAT | 0o666) >= 0

    assert in_container(inside), "the run could not make a shared memory segment at all"
    assert libc.shmget(key, 4096, 0o666) == -1, "the run's shared memory outlived it"


# 3. Signal -------------------------------------------------------------------------


@needs["pid"]
def test_the_run_can_signal_nothing_outside_it():
    outside = os.getpid()

    def inside():
        try:
            os.kill(outside, 0)
        except ProcessLookupError:
            return "no such process"
        return "reached"

    assert in_container(inside) == "no such process"


# 4. Reach -------------------------------------------------------------------------


@needs["net"]
def test_no_socket_of_any_family_reaches_anything(tmp_path):
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0kata-test-{uuid.uuid4().hex}")
    abstract.listen()
    # A socket with a path, in a folder the run sees (as a course folder or a home is).
    with_path = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with_path.bind(str(tmp_path / "agent.sock"))
    with_path.listen()
    for listener in (tcp, udp, abstract, with_path):
        listener.setblocking(False)
    # Their addresses, read here: the run holds none of this process's descriptors.
    tcp_at, udp_at, abstract_at, path_at = (
        s.getsockname() for s in (tcp, udp, abstract, with_path)
    )

    def inside():
        attempts = {
            "tcp": lambda: socket.create_connection(tcp_at, timeout=2),
            "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", udp_at),
            "tcp6": lambda: socket.create_connection(("::1", tcp_at[1]), timeout=2),
            "abstract unix": lambda: socket.socket(socket.AF_UNIX).connect(abstract_at),
            "unix with a path": lambda: socket.socket(socket.AF_UNIX).connect(path_at),
            "dns": lambda: socket.getaddrinfo("example.com", 80),
            # A virtual machine's host answers vsock whatever the network namespace.
            "vsock": lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM),
            # Netlink but routing speaks to the host's kernel: its devices' events, audit.
            "uevents": lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15),
            "audit": lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9),
        }
        reached = []
        for name, attempt in attempts.items():
            try:
                attempt()
                reached.append(name)
            except OSError:
                pass
        interfaces_up = [
            name
            for _, name in socket.if_nameindex()
            if int(Path(f"/sys/class/net/{name}/flags").read_text(), 16) & 1
        ]
        return {"reached": reached, "up": interfaces_up}

    seen = in_container(inside, container.Spec(visible=(str(tmp_path),)))
    assert seen["reached"] == [], f"a socket reached out: {seen['reached']}"
    for listener in (tcp, abstract, with_path):
        with pytest.raises(BlockingIOError):
            listener.accept()
    with pytest.raises(BlockingIOError):
        udp.recv(10)


@needs["mount"]
def test_no_device_is_there_to_open_but_the_harmless_few():
    """Without Landlock: a read-only mount stops no write to a device, and as root a run's
    owner rights open any (the raw disk, which holds the answers too; /dev/kmsg; the
    consoles)."""
    host = [entry.path for entry in os.scandir("/dev") if not entry.is_dir(follow_symlinks=False)]
    kept = {f"/dev/{name}" for name in (*mounts.DEVICES, *mounts.DEVICE_LINKS)}
    kept |= set(confinement.accelerator_paths()[0])
    assert set(host) - kept, "this machine's /dev has no other device to try"

    def inside():
        with open("/dev/null", "w") as sink, open("/dev/urandom", "rb") as source:
            sink.write(source.read(8).hex())
        with open("/dev/fd/1", "wb", closefd=True):
            pass
        return sorted(path for path in host if os.path.lexists(path))

    assert in_container(inside, container.Spec()) == sorted(kept & set(host))


# 5. Write -------------------------------------------------------------------------


@needs["mount"]
def test_files_unlinked_while_open_count_against_the_scratch_cap(tmp_path):
    scratch, cap = tmp_path / "scratch", 8 * 2**20
    scratch.mkdir()
    spec = container.Spec(scratch=str(scratch), scratch_bytes=cap)

    def inside():
        held, written = [], 0
        block = b"x" * 2**20
        try:
            for n in range(4 * cap // len(block)):
                stream = open(Path(spec.scratch, f"f{n}"), "wb")  # noqa: SIM115
                os.unlink(stream.name)
                held.append(stream)
                stream.write(block)
                stream.flush()
                written += len(block)
        except OSError as error:
            return {"written": written, "error": error.strerror}
        return {"written": written, "error": None}

    seen = in_container(inside, spec)
    assert seen["error"] and seen["written"] <= cap, seen
    assert list(scratch.iterdir()) == [], "the run's scratch reached the folder outside it"


@needs["mount"]
def test_the_submission_and_the_course_are_read_only(tmp_path):
    submission, checks = tmp_path / "submission", tmp_path / "checks"
    for folder in (submission, checks):
        folder.mkdir()
        (folder / "file.py").write_text("kept\n")
    spec = container.Spec(read_only=(str(submission), str(checks)))

    def inside():
        refused = []
        for folder in (submission, checks):
            try:
                (folder / "file.py").write_text("changed\n")
            except OSError:
                refused.append(folder.name)
        return refused

    assert in_container(inside, spec) == ["submission", "checks"]
    assert {p.read_text() for p in tmp_path.rglob("file.py")} == {"kept\n"}


@needs["mount"]
def test_no_file_outside_the_run_changes_its_metadata_nor_the_kernel_a_setting(tmp_path):
    """The container alone, without Landlock: a file outside the run keeps its mode, its
    times and its contents (its owner's rights would change them), the kernel its settings
    (as root, a sysctl's mode alone lets a run write it); the scratch and the folders the
    run may write stay writable."""
    outside, scratch, cache = tmp_path / "outside.txt", tmp_path / "scratch", tmp_path / "cache"
    outside.write_text("kept\n")
    scratch.mkdir()
    cache.mkdir()
    spec = container.Spec(
        scratch=str(scratch), visible=(str(outside), str(cache)), writable=(str(cache),)
    )
    setting = Path("/proc/sys/kernel/domainname")

    def inside():
        before = os.stat(outside)
        attempts = {
            "mode": lambda: os.chmod(outside, before.st_mode),
            "times": lambda: os.utime(outside, ns=(before.st_atime_ns, before.st_mtime_ns)),
            "contents": lambda: outside.write_text("changed\n"),
            "setting": lambda: setting.write_text(setting.read_text()),
        }
        refused = {}
        for name, attempt in attempts.items():
            try:
                attempt()
            except OSError as error:
                refused[name] = error.errno
        (scratch / "written").write_text("x")
        (cache / "written").write_text("x")
        return refused

    refused = in_container(inside, spec)
    assert {k: refused.get(k) for k in ("mode", "times", "contents")} == dict.fromkeys(
        ("mode", "times", "contents"), errno.EROFS
    )
    assert refused.get("setting") in (errno.EROFS, errno.EACCES)
    assert outside.read_text() == "kept\n" and (cache / "written").exists()


# 6. Read ---------------------------------------------------------------------------


@needs["mount"]
def test_reference_solutions_are_out_of_sight(tmp_path):
    answers = tmp_path / "solutions"
    answers.mkdir()
    (answers / "01_demo.py").write_text("def double(x): return 2 * x\n")
    spec = container.Spec(hidden=(str(answers),))

    def inside():
        try:
            return (answers / "01_demo.py").read_text()
        except OSError as error:
            return error.strerror

    assert "double" not in in_container(inside, spec)


# 7. Hold --------------------------------------------------------------------------


ORCHESTRATOR = """
import json, os, subprocess, sys, time
# Each child offers itself first to the cap's OOM killer, so it never picks the orchestrator
# (whose report is the test's): as measured under load, it sometimes did.
hold = (
    "import sys; open('/proc/self/oom_score_adj', 'w').write('1000'); "
    "b = b'x' * %d; print('held', flush=True); sys.stdin.read()"
)
pipe = subprocess.PIPE
children = [
    subprocess.Popen([sys.executable, "-c", hold % EACH], stdin=pipe, stdout=pipe)
    for _ in range(4)
]
printed = [child.stdout.read(4) == b"held" for child in children]
# A child that held its share may be the OOM kill a later one's allocation set off, after
# it printed: count those alive once the kills have landed.
time.sleep(1)
held = sum(said and child.poll() is None for said, child in zip(printed, children))
os.write(int(os.environ["RESULT_FD"]), json.dumps({"value": held}).encode())
"""


@needs["cgroup"]
def test_memory_is_capped_over_all_the_runs_processes():
    """Four children of 384 MiB each under a 1 GiB cap: not all of them can hold theirs.
    (The judge becomes a small program first: the cap's OOM kill takes the largest.) The
    judge is forked from this test's process, and what it writes before it execs is
    charged to the run: in the whole suite that process is large, and under a 128 MiB cap
    the OOM kill took the judge before its exec (in CI, three runs out of three)."""
    cap, each = 2**30, 384 * 2**20

    def inside():
        program = ORCHESTRATOR.replace("EACH", str(each))
        os.set_inheritable(int(os.environ["RESULT_FD"]), True)
        os.execv(sys.executable, [sys.executable, "-c", program])

    # The cap's OOM kill may take the orchestrator, whose report is the test's, before its
    # children (seen once with both cores busy): then the run is measured again.
    seen = []
    for _ in range(3):
        try:
            held = in_container(inside, container.Spec(memory_bytes=cap))
            break
        except AssertionError as error:
            seen.append(str(error))
    else:
        raise AssertionError(f"the orchestrator never reported, three runs out of three: {seen}")
    assert 0 < held < 4, f"{held} children held {each >> 20} MiB each under a {cap >> 20} MiB cap"


# Degrading ------------------------------------------------------------------------


def test_layers_can_be_switched_off_and_the_sweep_still_ends_a_double_fork(monkeypatch):
    mark = f"kata-escapee-{uuid.uuid4().hex}"

    def judge():
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, sleeper(mark))
            os._exit(0)
        deadline = time.monotonic() + 20
        while not escapees(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        return {"pid namespace": os.getpid() < 10, "found": len(escapees(mark))}

    seen = in_container(judge, without="all")
    assert seen == {"pid namespace": False, "found": 1}
    assert escapees(mark) == []
    monkeypatch.setenv(container.WITHOUT_VARIABLE, "user,cgroup")
    assert not {"user", "cgroup"} & container.available_layers()
    # Without a user namespace an unprivileged user gets no other namespace either.
    switched_off = container.describe().split("off: ")[1].split(", ")
    assert {"user", "cgroup"} <= set(switched_off)
    monkeypatch.setenv(container.WITHOUT_VARIABLE, "all")
    assert container.available_layers() == frozenset()


class FakeCgroupV2:
    """A cgroup v2 tree as the kernel keeps one, for the one rule kata's claim must follow:
    a group other than the root hands controllers to its children only while it holds no
    process (writing its cgroup.subtree_control fails with EBUSY otherwise)."""

    def __init__(self, root: Path, scope: str, pids: list[int]) -> None:
        self.root, self.procs = root, {root / scope: list(pids)}
        self.real_read_text, self.real_write_text = Path.read_text, Path.write_text
        (root / scope).mkdir(parents=True)
        (root / "cgroup.controllers").write_text("cpu io memory pids\n")
        (root / scope / "cgroup.controllers").write_text("memory pids\n")
        self.enabled: dict[Path, set[str]] = {}

    def read_text(self, path: Path, *args, **kwargs) -> str:
        if path.name == "cgroup.procs":
            return "".join(f"{pid}\n" for pid in self.procs.get(path.parent, []))
        if path.name == "cgroup.subtree_control":
            return " ".join(sorted(self.enabled.get(path.parent, ())))
        return self.real_read_text(path, *args, **kwargs)

    def write_text(self, path: Path, text: str, *args, **kwargs) -> int:
        group = path.parent
        if path.name == "cgroup.procs":
            for holding in self.procs.values():
                with contextlib.suppress(ValueError):
                    holding.remove(int(text))
            self.procs.setdefault(group, []).append(int(text))
        elif path.name == "cgroup.subtree_control":
            if group != self.root and self.procs.get(group):
                raise OSError(16, "Device or resource busy")
            self.enabled.setdefault(group, set()).update(w[1:] for w in text.split())
        else:
            return self.real_write_text(path, text, *args, **kwargs)
        return len(text)


@pytest.fixture
def delegated_v2(tmp_path, monkeypatch):
    """A delegated v2 scope holding kata (pid 101) and a child of it (pid 102)."""
    fake = FakeCgroupV2(tmp_path, "user.slice/run-1.scope", [101, 102])
    monkeypatch.setattr(Path, "read_text", lambda path, *a, **k: fake.read_text(path, *a, **k))
    monkeypatch.setattr(Path, "write_text", lambda path, *a, **k: fake.write_text(path, *a, **k))
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": "user.slice/run-1.scope"})
    return fake


def test_a_delegated_v2_group_is_claimed_by_moving_its_processes_into_a_leaf(
    delegated_v2, monkeypatch
):
    scope = delegated_v2.root / "user.slice/run-1.scope"
    assert cgroups.cgroup_parents() == ("v2", {"": scope}), "delegated, so it may be claimed"
    assert delegated_v2.procs[scope] == [101, 102], "only asking moves no process"
    assert cgroups.cgroup_parents(claim=True) == ("v2", {"": scope})
    assert delegated_v2.enabled[scope] == {"memory", "pids"}
    assert delegated_v2.procs[scope] == []
    assert delegated_v2.procs[scope / cgroups.SUPERVISORS_LEAF] == [101, 102]
    # A later run, from inside the leaf, makes its cgroup beside it in the same scope.
    leaf = f"user.slice/run-1.scope/{cgroups.SUPERVISORS_LEAF}"
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": leaf})
    assert cgroups.cgroup_parents(claim=True) == ("v2", {"": scope})


def test_the_v2_root_group_is_claimed_without_moving_a_process(delegated_v2, monkeypatch):
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": ""})
    delegated_v2.procs[delegated_v2.root] = [1]
    assert cgroups.cgroup_parents(claim=True) == ("v2", {"": delegated_v2.root})
    assert delegated_v2.procs[delegated_v2.root] == [1]
    # The root has cpu to hand too: each run is given an equal share of it.
    assert delegated_v2.enabled[delegated_v2.root] == {"memory", "pids", "cpu"}


def test_a_v2_group_this_user_may_not_write_is_not_claimed(delegated_v2, monkeypatch):
    monkeypatch.setattr(cgroups.os, "access", lambda path, mode: False)
    assert cgroups.cgroup_parents(claim=True) is None
    assert delegated_v2.enabled == {}


def test_where_runs_get_no_cgroup_kata_says_how_to_give_them_one(delegated_v2, tmp_path):
    assert "systemd-run --user --scope -p Delegate=yes" in cgroups.cgroup_advice()
    (tmp_path / "cgroup.controllers").write_text("cpu io\n")  # memory and pids bound to v1
    assert "as root" in cgroups.cgroup_advice()


# The seccomp filter ---------------------------------------------------------------


def run_filter(program, machine, call, first_argument=0, arch=None, **later_arguments):
    """What the seccomp `program` answers for one system call (its later arguments named
    `second_argument`, `third_argument`, `fourth_argument`): a classic BPF interpreter for
    the steps `seccomp_program` uses."""
    data = {0: seccomp._SYSCALL_NUMBERS[machine].get(call, call), 16: first_argument}
    for offset, name in enumerate(("second", "third", "fourth"), start=3):
        data[8 * offset] = later_arguments.pop(f"{name}_argument", 0)
    assert not later_arguments, later_arguments
    data[4] = seccomp._AUDIT_ARCH[machine] if arch is None else arch
    accumulator, at = 0, 0
    while True:
        code, yes, no, k = program[at]
        if code == 0x20:
            accumulator = data[k]
        elif code == 0x06:
            return k
        else:
            taken = {
                0x15: accumulator == k,
                0x35: accumulator >= k,
                0x45: bool(accumulator & k),
            }[code]
            at += yes if taken else no
        at += 1


ERRNO_RETURN = 0x00050000


@pytest.mark.parametrize("machine", sorted(seccomp._SYSCALL_NUMBERS))
def test_the_filter_refuses_each_call_the_run_needs_not(machine):
    program = seccomp.seccomp_program(machine)
    allow = 0x7FFF0000
    numbers = seccomp._SYSCALL_NUMBERS[machine]
    for call in seccomp.ABSENT_CALLS:
        if call in numbers:  # aarch64 has no inotify_init
            assert run_filter(program, machine, call) == ERRNO_RETURN | errno.ENOSYS, call
    no_locks = ERRNO_RETURN | errno.ENOLCK
    assert run_filter(program, machine, "flock") == no_locks
    for command in seccomp.LOCK_COMMANDS:
        assert run_filter(program, machine, "fcntl", second_argument=command) == no_locks
    for command in (0, 1, 2, 3, 4, 1030):  # F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, …
        assert run_filter(program, machine, "fcntl", second_argument=command) == allow
    for call in seccomp.REFUSED_CALLS:
        assert run_filter(program, machine, call) == ERRNO_RETURN | errno.EPERM, call
    vsock = ERRNO_RETURN | errno.EAFNOSUPPORT
    assert run_filter(program, machine, "socket", socket.AF_VSOCK) == vsock
    assert run_filter(program, machine, "socketpair", socket.AF_INET) == allow
    netlink = (program, machine, "socket", socket.AF_NETLINK)
    assert run_filter(*netlink, third_argument=0) == allow  # NETLINK_ROUTE
    for protocol in (9, 11, 15, 16):  # audit, connector, uevents, generic netlink
        assert run_filter(*netlink, third_argument=protocol) == ERRNO_RETURN | errno.EPROTONOSUPPORT
    # A file's mode may be anything but set-user-ID or set-group-ID.
    for call, argument in seccomp.MODE_ARGUMENTS.items():
        if call not in numbers:  # aarch64 has only the *at calls
            continue
        named = ("first", "second", "third", "fourth")[argument]
        for mode, answer in ((0o755, allow), (0o4755, errno.EPERM), (0o2700, errno.EPERM)):
            got = run_filter(program, machine, call, **{f"{named}_argument": mode})
            assert got == (answer if answer == allow else ERRNO_RETURN | answer), (call, mode)
    # A thread or a fork is a clone; a new user namespace is not allowed.
    assert run_filter(program, machine, "clone", 0x003D0F00) == allow
    assert run_filter(program, machine, "clone", 0x10000000 | 17) == ERRNO_RETURN | errno.EPERM
    assert run_filter(program, machine, 0) == allow  # read() on x86_64, io_setup on aarch64
    # Another ABI's calls carry other numbers: int 0x80's i386 calls, and x32's.
    assert run_filter(program, machine, "socket", arch=0x40000003) == ERRNO_RETURN | errno.ENOSYS
    if machine == "x86_64":
        x32_socket = 0x40000000 | 41
        assert run_filter(program, machine, x32_socket) == ERRNO_RETURN | errno.ENOSYS


def answer_to(call) -> int | str:
    """The errno `call` failed with, or "allowed"."""
    try:
        call()
    except OSError as error:
        return error.errno
    return "allowed"


@needs["user"]
def test_a_run_sets_no_lock_or_watch_that_a_run_beside_it_would_see():
    """Two runs graded at once open the same files (the course, Python's library): a lock
    held on one, or a watch on its reads, would carry bits from one student's code to the
    other's."""
    shared = Path(container.__file__)  # read by every run
    held = shared.open()
    fcntl.flock(held, fcntl.LOCK_SH)  # what another run's lock looks like from outside

    def inside():
        libc = ctypes.CDLL(None, use_errno=True)
        answers = {}
        with open(shared) as file:
            for name, call in {
                "flock": lambda: fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB),
                "lockf": lambda: fcntl.lockf(file, fcntl.LOCK_SH | fcntl.LOCK_NB),
                "open file description lock": lambda: fcntl.fcntl(
                    file,
                    36,
                    bytes(32),  # F_OFD_GETLK: who holds a lock
                ),
                "lease": lambda: fcntl.fcntl(file, fcntl.F_SETLEASE, fcntl.F_RDLCK),
                "directory notice": lambda: fcntl.fcntl(
                    os.open(shared.parent, os.O_RDONLY), fcntl.F_NOTIFY, fcntl.DN_ACCESS
                ),
            }.items():
                answers[name] = answer_to(call)
        for name in ("inotify_init1", "fanotify_init"):
            number = seccomp._SYSCALL_NUMBERS[os.uname().machine][name]
            result = libc.syscall(number, 0, 0)
            answers[name] = ctypes.get_errno() if result == -1 else "allowed"
        answers["flags"] = fcntl.fcntl(0, fcntl.F_GETFD) >= 0  # what Python itself needs
        return answers

    try:
        answers = in_container(inside)
    finally:
        held.close()
    no_locks = {
        name: errno.ENOLCK
        for name in ("flock", "lockf", "open file description lock", "lease", "directory notice")
    }
    assert answers == {
        **no_locks,
        "inotify_init1": errno.ENOSYS,
        "fanotify_init": errno.ENOSYS,
        "flags": True,
    }


@needs["user"]
def test_a_run_makes_no_set_user_id_file(tmp_path):
    """What a run writes may outlive it (the course's compilation cache) with the host's
    uid (kata run as root): a set-user-ID or set-group-ID file there would run as root for
    anyone on the host. Every other mode is the run's to give."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    spec = container.Spec(scratch=str(scratch), visible=(str(scratch),), writable=(str(scratch),))

    def inside():
        answers = {}
        made = scratch / "made"
        made.write_bytes(b"#!/bin/sh\n")
        for name, call in {
            "chmod u+s": lambda: os.chmod(made, 0o4755),
            "chmod g+s": lambda: os.chmod(made, 0o2755),
            "fchmod u+s": lambda: os.fchmod(os.open(made, os.O_RDONLY), 0o4755),
            "created u+s": lambda: os.open(scratch / "new", os.O_CREAT | os.O_WRONLY, 0o4755),
            "chmod 0755": lambda: os.chmod(made, 0o755),
            "created 0644": lambda: os.open(scratch / "plain", os.O_CREAT | os.O_WRONLY, 0o644),
        }.items():
            answers[name] = answer_to(call)
        answers["mode"] = oct(made.stat().st_mode & 0o7777)
        return answers

    refused = dict.fromkeys(("chmod u+s", "chmod g+s", "fchmod u+s", "created u+s"), errno.EPERM)
    allowed = dict.fromkeys(("chmod 0755", "created 0644"), "allowed")
    assert in_container(inside, spec) == {**refused, **allowed, "mode": "0o755"}


@needs["user"]
def test_a_run_makes_no_io_uring_keyring_or_namespace_of_its_own_and_still_forks():
    def inside():
        import threading

        libc = ctypes.CDLL(None, use_errno=True)
        numbers = seccomp._SYSCALL_NUMBERS[os.uname().machine]
        params = ctypes.create_string_buffer(120)
        answers = {}
        for name, args in {
            "io_uring_setup": (8, params),
            "keyctl": (0, -3, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring
            "unshare": (0x10000000,),  # CLONE_NEWUSER
            "bpf": (0, 0, 0),
            "ptrace": (16, 1, 0, 0),  # PTRACE_ATTACH to PID 1
        }.items():
            result = libc.syscall(numbers[name], *args)
            answers[name] = ctypes.get_errno() if result == -1 else "allowed"
        thread = threading.Thread(target=lambda: None)
        thread.start()
        thread.join()
        child = os.fork()
        if child == 0:
            os._exit(7)
        answers["fork"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        answers["subprocess"] = subprocess.run(
            [sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True
        ).stdout.strip()
        return answers

    assert in_container(inside) == {
        "io_uring_setup": errno.ENOSYS,
        "keyctl": errno.EPERM,
        "unshare": errno.EPERM,
        "bpf": errno.EPERM,
        "ptrace": errno.EPERM,
        "fork": 7,
        "subprocess": "42",
    }
