"""Each grading run in a container of its own, made of Linux kernel mechanisms by kata itself.

A run is the judge (pytest, the checks), the learner's process it forks, and whatever that
starts. `enter` builds the run's container around them, from the process that will
supervise the run; `Supervisor.wait` ends it. The cold judge's start (kata.judge.start) and
the warm worker (kata.servers.worker) both build theirs through `enter`. Landlock
(kata.isolation.confinement) stays on inside it as the second layer.

The layers, each built where the kernel allows it (`available_layers` says which):

- **user**: an unprivileged user namespace, so a learner needs no root for the rest; the
  run's own root has capabilities only over the run's namespaces, and the judge drops all
  of them (`drop_privileges`) before any learner code exists.
- **pid**: a PID namespace with its own /proc. The run's first process is PID 1 there; when
  it ends, the kernel kills every process of the run, however detached (setsid chains,
  double forks, fork bombs), and `Supervisor.wait` returns only once none is left.
- **ipc**: an IPC namespace: every System V and POSIX message-queue object dies with the
  run; /dev/shm is the run's own too (mount).
- **net**: a network namespace with no interface up, loopback included; and a seccomp
  filter refuses every socket family but Unix, IPv4, IPv6 and netlink's routing protocol
  (vsock, for one, reaches a virtual machine's host from any network namespace, netlink's
  uevents and audit the host's kernel), io_uring (which makes
  sockets past that filter), the calls that reach kernel state beyond the run
  (keyrings, BPF, perf events, namespaces and mounts of its own, ptrace), and file locks,
  leases and watches (flock, fcntl's locks, inotify, fanotify), which a run graded beside
  it would see on the files both can open (`seccomp_program`).
- **mount**: a mount namespace: /tmp, /var/tmp and /run are empty but for what the run
  uses, and every other Unix socket with a path that the run's parent's network namespace
  lists is covered by /dev/null (so none is reachable: the warm grader's, an agent's, a
  database's); /dev holds only null, zero,
  full, random, urandom, tty and any accelerator's nodes (no disk, /dev/kmsg or console);
  /sys/fs/cgroup shows only the run's own cgroup, read-only (no other run's), and
  /sys/firmware and the kernel's debug and tracing files nothing; the scratch
  folder and /dev/shm are tmpfs capped at the scratch size (so files unlinked while still
  open count); every other mount is read-only, the submission and the course's checks
  among them; and the reference solutions are covered by an empty, unreadable folder.
- **cgroup**: the run's processes share one memory cap and one process cap (cgroup v2
  where it is delegated to this user, v1 memory and pids controllers as root).

The security invariants (tests/test_container.py has a test for each):

1. See: /proc in a run lists only the run's processes; no ancestor's environment,
   command line or descriptors is reachable from it; /sys/fs/cgroup no other run's cgroup.
2. Keep: when the verdict is reported, no process of the run is alive, no IPC object
   it made exists, and its scratch is gone.
3. Signal: a run can signal only its own processes (the PID namespace holds nothing else).
4. Reach: a run has no network interface up; no socket it makes reaches anything; no
   device but /dev's harmless few (and an accelerator's) is there to open; it can set no
   lock or watch on a file, which another run would see.
5. Write: a run writes at most the scratch cap, counting unlinked files it holds open;
   the submission copy and the course are read-only, and so is every file's metadata
   outside the run; no file it writes is set-user-ID or set-group-ID.
6. Read: no reference solution is readable from a run, as a file or off the raw disk.
7. Hold: the run's processes together hold at most its memory cap and process cap.

Where a layer is missing, the run goes on without it, and `describe` says so; callers
decide whether that is enough (`kata grade` refuses below files + processes + memory).
`KATA_CONTAINER_WITHOUT=user,cgroup` (or `all`) treats the named layers as missing, to test
how grading degrades.

Standard library only (ctypes for unshare and mount), and kata.isolation.confinement's
sweep where there is no PID namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import functools
import os
import re
import secrets
import signal
import socket
import stat
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kata.isolation import confinement

LAYERS = ("user", "pid", "ipc", "net", "mount", "cgroup")
NAMESPACE_LAYERS = ("user", "pid", "ipc", "net", "mount")
# Names layers to treat as missing, comma-separated, or "all".
WITHOUT_VARIABLE = "KATA_CONTAINER_WITHOUT"

CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
# Flags a remount must keep (the kernel locks them on mounts a user namespace inherits);
# statvfs reports them with the same values.
MS_KEPT = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 4, 24
_CAPABILITY_VERSION_3 = 0x20080522

# A run's processes and threads together (XLA starts a thread pool per core); a fork
# bomb stops here.
PROCESS_CAP = max(1024, 32 * (os.cpu_count() or 1))
# Folders every user shares, emptied in a run: what the run needs there is put back.
COVERED = ("/tmp", "/var/tmp", "/run")
# The kernel's settings in /proc (sysctls, IRQ affinities, SysRq), read-only in a run as
# Docker has them: their mode alone lets the global root write them, no capability needed,
# and kata as root makes the run's root the host's.
KERNEL_SETTINGS = ("sys", "sysrq-trigger", "irq", "bus", "fs")
# A run's /dev (bound in from the host's, as bubblewrap's --dev does) holds these, any
# accelerator's nodes and the usual links; not the disks, /dev/kmsg, the consoles, /dev/kvm,
# the host's ptys and POSIX queues. A read-only mount stops no write to a device, and with
# kata as root a run's owner rights would open them (the raw disk holds the answers too).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEVICE_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "kata-run-"
# Under cgroup v2 a group hands controllers to its children only while it holds no process
# itself: in a delegated group kata's own processes move into this leaf beside the runs'.
SUPERVISORS_LEAF = "kata-supervisors"
CAPPED = ("memory", "pids")
# The layers of the run this process is in, its cgroup's folders, and the paths of the Unix
# sockets outside it (set in a run's first process by `enter`).
_layers_here: frozenset[str] = frozenset()
_cgroup_here: tuple[str, ...] = ()
_sockets_outside: tuple[str, ...] = ()


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


_LIBC = _libc() if sys.platform.startswith("linux") else None


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _unshare(flags: int) -> None:
    assert _LIBC is not None
    _check(_LIBC.unshare(ctypes.c_int(flags)), "unshare")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    assert _LIBC is not None
    result = _LIBC.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(result, f"mount {target}")


def switched_off() -> set[str]:
    """The layers KATA_CONTAINER_WITHOUT names."""
    named = {n.strip() for n in os.environ.get(WITHOUT_VARIABLE, "").split(",") if n.strip()}
    return set(LAYERS) if "all" in named else named & set(LAYERS)


# The cgroup ------------------------------------------------------------------------


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per v1 controller, and "" for the v2 hierarchy."""
    found = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = path.lstrip("/")
    return found


def _v2_root() -> Path | None:
    for candidate in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        if (candidate / "cgroup.controllers").is_file():
            return candidate
    return None


def cgroup_parents(claim: bool = False) -> tuple[str, dict[str, Path]] | None:
    """("v2" or "v1", {controller: folder a run's cgroup is made in}), or None where this
    user may not make one: v2 where memory and pids are delegated to it (as by `systemd-run
    --user --scope -p Delegate=yes`), v1 as root. With `claim`, a delegated v2 group that does
    not yet hand memory and pids to its children is made to (`claim_v2_group`)."""
    own = _own_cgroups()
    root = _v2_root()
    if root is not None and "" in own:
        group = root / own[""]
        if group.name == SUPERVISORS_LEAF:  # claimed by an earlier run of this process tree
            group = group.parent
        if _delegated_v2(group) and (not claim or claim_v2_group(group)):
            return "v2", {"": group}
    parents = {c: CGROUP_ROOT / c / own.get(c, "") for c in CAPPED}
    if all((p / "cgroup.procs").is_file() and os.access(p, os.W_OK) for p in parents.values()):
        return "v1", parents
    return None


def _controllers(group: Path, listing: str) -> set[str]:
    with contextlib.suppress(OSError):
        return set((group / listing).read_text().split())
    return set()


def _delegated_v2(group: Path) -> bool:
    """This user may make capped cgroups under `group`: it writes there and memory and pids
    are, or may be, handed to its children."""
    capped = set(CAPPED)
    return os.access(group, os.W_OK) and capped <= _controllers(group, "cgroup.controllers")


def claim_v2_group(group: Path) -> bool:
    """Make `group` hand memory and pids to its children. v2 allows that only while the
    group holds no process, so its processes (this user's, in a delegated group: kata and
    its children) move into a leaf of their own first, as systemd's delegation expects."""
    if set(CAPPED) <= _controllers(group, "cgroup.subtree_control"):
        return True
    enable = " ".join(f"+{c}" for c in CAPPED)
    # The root group, or an empty one, takes it at once; no process is moved needlessly.
    with contextlib.suppress(OSError):
        (group / "cgroup.subtree_control").write_text(enable)
        return True
    leaf = group / SUPERVISORS_LEAF
    try:
        leaf.mkdir(exist_ok=True)
        for _ in range(100):  # a process forked meanwhile appears in the next reading
            left = (group / "cgroup.procs").read_text().split()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    (leaf / "cgroup.procs").write_text(pid)
        (group / "cgroup.subtree_control").write_text(enable)
    except OSError:
        return False
    return True


@dataclass
class Cgroup:
    """A run's cgroup: its folder per hierarchy, made by the supervisor with its own rights."""

    kind: str
    folders: list[Path]
    procs: list[int] = field(default_factory=list)  # cgroup.procs, opened before unshare
    # The folders above, opened before unshare too: through them the supervisor removes
    # the run's cgroup, which its mount namespace has read-only.
    parents: list[int] = field(default_factory=list)

    @classmethod
    def make(cls, name: str, memory_bytes: int | None) -> Cgroup | None:
        found = cgroup_parents(claim=True)
        if found is None:
            return None
        kind, parents = found
        folders = [parent / name for parent in parents.values()]
        for folder in folders:
            _sweep_leftovers(folder.parent)
            folder.mkdir()
        group = cls(kind, folders)
        group.cap(memory_bytes, PROCESS_CAP)
        # Opened now, with this process's own rights: a write checks the opener's.
        group.procs = [os.open(f / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for f in folders]
        group.parents = [os.open(f.parent, os.O_RDONLY | os.O_DIRECTORY) for f in folders]
        return group

    def cap(self, memory_bytes: int | None, processes: int) -> None:
        memory = str(memory_bytes) if memory_bytes else "max" if self.kind == "v2" else "-1"
        settings = {"pids.max": str(processes)}
        settings |= (
            {"memory.max": memory, "memory.swap.max": "0"}
            if self.kind == "v2"
            else {"memory.limit_in_bytes": memory, "memory.memsw.limit_in_bytes": memory}
        )
        for folder in self.folders:
            for name, value in settings.items():
                if (folder / name).exists():
                    (folder / name).write_text(value)

    def add(self, pid: int) -> None:
        for procs in self.procs:
            os.write(procs, str(pid).encode())

    def kill_all(self) -> None:
        """Kill every process in the cgroup until none is left (where the PID namespace,
        which does it at once, is missing)."""
        kill_file = self.folders[0] / "cgroup.kill"
        if kill_file.exists():
            kill_file.write_text("1")
            return
        for _ in range(1000):  # each round kills all there are; a fork bomb is capped
            pids = {int(p) for f in self.folders for p in (f / "cgroup.procs").read_text().split()}
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        for procs in self.procs:
            os.close(procs)
        for folder, parent in zip(self.folders, self.parents, strict=True):
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(folder.name, dir_fd=parent)
            os.close(parent)
        self.procs, self.parents = [], []


def _sweep_leftovers(parent: Path) -> None:
    """Remove the cgroups of runs whose supervisor was killed before it could (empty ones:
    rmdir refuses the others)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            owner = entry.name.removeprefix(CGROUP_PREFIX).partition("-")[0]
            if entry.name.startswith(CGROUP_PREFIX) and not _alive(int(owner or 0)):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


def memory_cap_of(supervisor_pid: int, memory_bytes: int | None) -> None:
    """Set the memory cap of the run that `supervisor_pid` supervises (a warm run learns its
    cap only with its request); nothing where that run has no cgroup."""
    found = cgroup_parents()
    if found is None:
        return
    kind, parents = found
    for parent in parents.values():
        for folder in parent.glob(f"{CGROUP_PREFIX}{supervisor_pid}-*"):
            Cgroup(kind, [folder]).cap(memory_bytes, PROCESS_CAP)


# Building the container ------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """What a run's container holds back: its caps, and the folders its mounts change."""

    memory_bytes: int | None = None
    scratch: str | None = None  # becomes a tmpfs of `scratch_bytes`
    scratch_bytes: int = 2**30
    read_only: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()  # covered by an empty, unreadable folder
    # What the run may use in the folders it gets empty (COVERED), put back in them.
    visible: tuple[str, ...] = ()
    # Where it may write besides its scratch (the compilation cache a learner's own runs
    # add to): every other mount is read-only in the run.
    writable: tuple[str, ...] = ()

    @classmethod
    def of(cls, settings: dict) -> Spec:
        """A Spec from its JSON form (what a runner sends a cold judge or the warm grader)."""
        listed = ("read_only", "hidden", "visible", "writable")
        tuples = {k: tuple(v) for k, v in settings.items() if k in listed}
        return cls(**(settings | tuples))

    def settings(self) -> dict:
        return dataclasses.asdict(self)


class Supervisor:
    """The run, seen from the process that built its container (outside its PID namespace)."""

    def __init__(
        self, first: int, cgroup: Cgroup | None, layers: frozenset[str], judge_status: int
    ) -> None:
        self.first, self.cgroup, self.layers = first, cgroup, layers
        self.judge_status = judge_status  # where PID 1 reports how the judge ended

    def kill(self) -> None:
        """End the run: its first process dies, and with it (PID namespace) all of it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.first, signal.SIGKILL)

    def wait(self) -> int:
        """The exit code of the run's first process (negative: its signal), once no process of
        the run is left, and the container is taken down."""
        while True:
            try:
                _, status = os.waitpid(self.first, 0)
                break
            except InterruptedError:
                continue
        if "pid" not in self.layers:  # sweep: the cgroup's list, then what was orphaned here
            if self.cgroup is not None:
                self.cgroup.kill_all()
            confinement.end_descendants()
        if self.cgroup is not None:
            self.cgroup.remove()
        with os.fdopen(self.judge_status, "rb") as pipe:
            reported = pipe.read()
        if reported:  # PID 1 cannot die of a signal: it says what the judge died of
            status = int(reported)
        return os.waitstatus_to_exitcode(status)


def exit_as(code: int) -> None:
    """End this process as the judge ended (`Supervisor.wait`'s code): of the same signal,
    for whoever waits on it to see which, or with the same exit code."""
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those take no handler (OSError)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


def enter(spec: Spec, keep_fds: Iterable[int] = ()) -> Supervisor | None:
    """Build a run's container and fork its first process into it.

    Returns a Supervisor in the calling process, which must be single-threaded, and None
    in the run's first process, which carries on as the run's judge (and calls `settle`).
    Off Linux it forks nothing and returns None: the caller is the judge. In the run, PID
    1 is a small reaper that runs no learner code; the judge is its child. Descriptors
    other than 0-2 and `keep_fds` are closed in the run.
    """
    if _LIBC is None:  # no kernel to build it with: the caller is the run's judge
        return None
    off = switched_off()
    name = f"{CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    cgroup = None
    if "cgroup" not in off:
        try:
            cgroup = Cgroup.make(name, spec.memory_bytes)
        except OSError:
            cgroup = None
    layers = set() if cgroup is None else {"cgroup"}
    sockets = _path_sockets()  # the network namespace's own list: read before leaving it
    layers |= _unshare_namespaces(off)
    if "pid" not in layers:  # what the run orphans comes here, for Supervisor.wait
        confinement.become_subreaper()
    ready_read, ready_write = os.pipe()
    status_read, status_write = os.pipe()
    first = os.fork()
    if first == 0:
        global _layers_here, _cgroup_here, _sockets_outside
        _layers_here = frozenset(layers)
        _cgroup_here = tuple(str(f) for f in cgroup.folders) if cgroup else ()
        _sockets_outside = tuple(sockets)
        os.close(ready_write)
        os.read(ready_read, 1)  # in its cgroup now
        os.close(ready_read)
        os.close(status_read)
        close_all_but({0, 1, 2, status_write, *keep_fds})
        if "pid" in layers:
            _mount_proc(layers)
            return _reap_until_judge_ends(status_write)
        os.close(status_write)
        return None
    os.close(ready_read)
    if cgroup is not None:
        cgroup.add(first)
    os.close(ready_write)
    os.close(status_write)
    return Supervisor(first, cgroup, frozenset(layers), status_read)


def _unshare_namespaces(off: set[str]) -> set[str]:
    """Enter new namespaces (the PID one for this process's children); the layers made."""
    if _LIBC is None or not set(NAMESPACE_LAYERS) - off:
        return set()
    rest = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID
    uid, gid = os.geteuid(), os.getegid()
    if "user" not in off:
        try:
            _unshare(CLONE_NEWUSER | rest)
        except OSError:
            pass
        else:
            _map_user(uid, gid)
            return set(NAMESPACE_LAYERS)
    if os.geteuid() == 0:  # root needs no user namespace for the rest
        try:
            _unshare(rest)
        except OSError:
            return set()
        return set(NAMESPACE_LAYERS) - {"user"}
    return set()


def _map_user(uid: int, gid: int) -> None:
    """Be root in the new user namespace, as this user outside it."""
    with contextlib.suppress(FileNotFoundError):
        Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")


def close_all_but(keep: set[int]) -> None:
    """Close every descriptor of this process but those in `keep`."""
    try:
        open_now = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every number up to a generous bound
        open_now = list(range(1 << 16))
    for fd in open_now:
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _mount_proc(layers: set[str]) -> None:
    """Nothing mounted here reaches the outside; /proc shows only the run, none of the
    kernel's own files only its owner may read (`_mask_owner_only_files`), and none of its
    settings to write (KERNEL_SETTINGS)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mask_owner_only_files("/proc")
    for name in KERNEL_SETTINGS:
        with contextlib.suppress(OSError):
            _mount(f"/proc/{name}", f"/proc/{name}", None, MS_BIND | MS_REC)
            _read_only(f"/proc/{name}")


def _mask_owner_only_files(folder: str) -> None:
    """Cover each file at the top of `folder` that others may neither read nor write with
    /dev/null: as kata runs as root, a run's root is the host's, and the owner's rights
    alone read /proc/slabinfo, /proc/timer_list, /proc/kcore and the like (Docker masks
    such files the same way). A file the kernel adds later is covered on the next run;
    what a run's own processes own (/proc/PID) stays theirs."""
    for entry in os.scandir(folder):
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and not entry.stat().st_mode & 0o006:
                _mount("/dev/null", entry.path, None, MS_BIND)


def _reap_until_judge_ends(status_write: int) -> None:
    """As PID 1: fork the judge (return None in it), reap every orphan until the judge
    ends, tell the supervisor how, and exit: the kernel then kills what is left."""
    judge = os.fork()
    if judge == 0:
        os.close(status_write)
        return None
    close_all_but({0, 1, 2, status_write})  # the events pipe and the rest: the judge's alone
    _undumpable()
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    while True:
        try:
            pid, status = os.wait()
        except InterruptedError:
            continue
        if pid == judge:
            os.write(status_write, str(status).encode())
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def settle(spec: Spec) -> None:
    """In the run's judge, before any learner code exists: make the run's mounts (where it
    has a mount namespace), then give up every capability."""
    if "mount" in _layers_here:
        mount_run(spec)
    drop_privileges()
    _undumpable()


def _undumpable() -> None:
    """Nobody without CAP_SYS_PTRACE may trace this process or open its /proc files (its
    descriptors, memory, environment): not a learner's process of the same user, even
    where Landlock, which forbids that too, is missing. Inherited by what it forks."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def mount_run(spec: Spec) -> None:
    """In the run's mount namespace (while it still has the capabilities): the shared
    temporary folders emptied, a /dev of its own, no cgroup but its own, the capped scratch,
    /dev/shm, hidden answers, and every other mount read-only, the course and submission
    among them."""
    visible = [*spec.visible, *spec.read_only, *confinement.installation_paths()]
    made = [spec.scratch] if spec.scratch else []
    for folder in COVERED:
        _cover(folder, [p for p in visible if p != spec.scratch], made)
    _cover("/dev", _devices(), ["/dev/shm"], DEVICE_LINKS)
    for folder in confinement.SYSTEM_HIDDEN:  # as Landlock hides them, for where it is off
        _cover(folder, [])
    if _cgroup_here:
        _cover(str(CGROUP_ROOT), list(_cgroup_here))
    if spec.scratch:
        size = f"size={spec.scratch_bytes},mode=0700"
        in_scratch = os.getcwd() == spec.scratch
        _mount("tmpfs", spec.scratch, "tmpfs", MS_NOSUID | MS_NODEV, size)
        if in_scratch:  # the folder it is in now is the one underneath
            os.chdir(spec.scratch)
        with contextlib.suppress(OSError):
            _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, size)
    for path in spec.read_only:
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _read_only(path)
    for path in spec.hidden:
        if os.path.isdir(path):
            flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
            _mount("tmpfs", path, "tmpfs", flags, "size=4k,mode=000")
    for path in _sockets_outside:
        _mask_socket(path)
    writable = [p for p in (spec.scratch, *spec.writable) if p and os.path.isdir(p)]
    _read_only_but([*writable, "/dev/shm"] if spec.scratch else writable)


def _path_sockets() -> list[str]:
    """The paths the Unix sockets of this network namespace are bound to (/proc/net/unix:
    its last field, where it starts with "/"; "@" is an abstract name)."""
    paths = []
    with contextlib.suppress(OSError), open("/proc/net/unix", errors="replace") as lines:
        next(lines, None)
        for line in lines:
            fields = line.rstrip("\n").split(None, 7)
            if len(fields) == 8 and fields[7].startswith("/"):
                paths.append(fields[7])
    return paths


def _mask_socket(path: str) -> None:
    """Cover a Unix socket outside the run with /dev/null: a socket with a path is reached
    through the file system whatever the network namespace, Landlock governs no connect()
    to one, and a read-only mount refuses none (an agent's socket in a home folder, a
    database's under /var/lib). One in a folder the run has emptied is gone already."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.stat(path).st_mode):
            _mount("/dev/null", path, None, MS_BIND)


def _read_only_but(writable: list[str]) -> None:
    """Every mount read-only but the run's /proc and the folders in `writable` (each bound
    onto itself first, a mount of its own). Landlock keeps a run from writing files, not
    from changing the metadata of those its user owns (as root, the system's): their mode,
    times and extended attributes, which a read-only mount refuses (EROFS). No run raises
    its own caps in cgroupfs either."""
    points = set(_mount_points_under("/"))
    for path in writable:
        if path not in points:
            _mount(path, path, None, MS_BIND | MS_REC)
    for point in _mount_points_under("/"):
        if not _within(point, "/proc") and not any(_within(point, w) for w in writable):
            with contextlib.suppress(OSError):  # one under a hidden folder is out of reach
                _read_only(point)


def _read_only(point: str) -> None:
    kept = os.statvfs(point).f_flag & MS_KEPT  # flags the parent namespace locked on
    _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def _cover(
    folder: str, visible: list[str], made: Iterable[str] = (), links: dict[str, str] | None = None
) -> None:
    """Mount an empty, read-only tmpfs on `folder`, then put back the paths in `visible`
    that lie in it (bound through descriptors opened before), the empty folders `made` (mount
    points: the scratch, /dev/shm) and the symbolic `links` (name in `folder`: target).
    What else was there (other users' files, Unix sockets with a path: the warm grader's,
    a desktop's, a container runtime's; the host's devices; other runs' cgroups) is out of
    the run's reach."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return
    inside = sorted({os.path.realpath(p) for p in visible if _within(os.path.realpath(p), folder)})
    held = {}
    for path in inside:
        with contextlib.suppress(OSError):
            held[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        for path in made:
            if _within(path, folder):
                os.makedirs(path, exist_ok=True)
        for name, target in (links or {}).items():
            os.symlink(target, os.path.join(folder, name))
        for path, fd in held.items():
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                Path(path).touch()
        _mount(None, folder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        for path, fd in held.items():
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
    finally:
        for fd in held.values():
            os.close(fd)


def _devices() -> list[str]:
    """The device nodes a run finds in its /dev: DEVICES and any accelerator's."""
    accelerators = confinement.accelerator_paths()[0]
    return [f"/dev/{name}" for name in DEVICES] + [d for d in accelerators if d != "/dev/shm"]


def _mount_points_under(folder: str) -> list[str]:
    """The mount points at or below `folder`, from /proc/self/mountinfo (which writes a
    space, a tab, a newline and a backslash in a path as octal escapes)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as lines:
        points = [_MOUNTINFO_ESCAPE.sub(_unescaped, line.split()[4]) for line in lines]
    return [p for p in points if _within(p, folder)]


_MOUNTINFO_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescaped(match: re.Match) -> str:
    return chr(int(match.group(1), 8))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


# seccomp: socket() and socketpair() of any family but these and netlink fail with
# EAFNOSUPPORT. AF_VSOCK, for one, reaches a virtual machine's host whatever the network
# namespace.
SOCKET_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6)
AF_NETLINK = 16
# Netlink's protocols but these fail with EPROTONOSUPPORT. NETLINK_ROUTE (0) is what glibc's
# getaddrinfo and getifaddrs ask about the run's own (down) interfaces; the others speak to
# the kernel beyond the network namespace: its uevents (the host's devices), audit, the
# connector's process events, SELinux, and generic netlink's families.
NETLINK_PROTOCOLS = (0,)
# Namespace flags a clone() may not carry: a run makes no container of its own.
NAMESPACE_FLAGS = 0x7E020080  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET}, CLONE_NEWTIME
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


# Refused with ENOSYS, as if the kernel lacked them, so that callers fall back: io_uring runs
# socket() and the rest inside the kernel, past this filter (IORING_OP_SOCKET made a vsock
# socket), and clone3 passes its flags where a filter cannot read them (glibc falls back
# to clone, whose flags it can).
# inotify and fanotify, absent too (callers poll instead), would tell a run when another
# run, graded beside it, opens or reads a file both can see (the course, Python's library):
# a channel between two students' code.
ABSENT_CALLS = (
    "io_uring_setup", "io_uring_enter", "io_uring_register", "clone3",
    "inotify_init", "inotify_init1", "fanotify_init",
    # openat2 passes its mode in a structure a filter cannot read (callers fall back to
    # openat, whose mode it can).
    "openat2",
)  # fmt: skip
# Refused with ENOLCK, as on a file system that keeps no locks: a lock on a file both runs
# can open (flock, fcntl's record locks, open file description locks and leases) or a
# directory's change notice (fcntl F_NOTIFY) is state in the kernel that another run
# sees, a bit at a time. Record locks and the rest are fcntl commands: F_GETLK, F_SETLK,
# F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE, F_GETLEASE, F_NOTIFY.
LOCK_CALLS = ("flock",)
LOCK_COMMANDS = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
# Calls that give a file its mode, and which of their arguments is the mode: one that
# would set the set-user-ID or set-group-ID bit is refused with EPERM. A run's uid may be
# the host's (kata run as root), and the folders it writes (the course's compilation cache)
# outlive it: a set-user-ID file left there would run as that user for anyone on the host.
# (`open` and `openat` read the mode only when creating; glibc passes 0 otherwise.)
MODE_ARGUMENTS = {
    "chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2,
    "open": 2, "openat": 3, "creat": 1, "mknod": 1, "mknodat": 2,
}  # fmt: skip
SET_ID_BITS = 0o6000
# Refused with EPERM: what no run needs, each reaching kernel state beyond the run (Docker's
# default profile refuses them too): keyrings, BPF, perf events, userfaultfd, namespaces
# and mounts of its own, tracing or reading other processes' memory, and file handles that
# bypass path checks.
REFUSED_CALLS = (
    "add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd",
    "unshare", "setns", "mount", "umount2", "pivot_root",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "ptrace", "process_vm_readv", "process_vm_writev", "name_to_handle_at", "open_by_handle_at",
)  # fmt: skip
# Each architecture's seccomp audit value and its system call numbers.
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Calls added since Linux 5.1 have one number on every architecture.
_UNIFIED_NUMBERS = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "openat2": 437,
    "fchmodat2": 452,
}
_SYSCALL_NUMBERS = {
    "x86_64": _UNIFIED_NUMBERS
    | {
        "socket": 41,
        "socketpair": 53,
        "chmod": 90,
        "fchmod": 91,
        "fchmodat": 268,
        "open": 2,
        "openat": 257,
        "creat": 85,
        "mknod": 133,
        "mknodat": 259,
        "clone": 56,
        "fcntl": 72,
        "flock": 73,
        "inotify_init": 253,
        "inotify_init1": 294,
        "fanotify_init": 300,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "unshare": 272,
        "setns": 308,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
    },
    "aarch64": _UNIFIED_NUMBERS
    | {
        "socket": 198,
        "socketpair": 199,
        "fchmod": 52,
        "fchmodat": 53,
        "openat": 56,
        "mknodat": 33,
        "clone": 220,
        "fcntl": 25,
        "flock": 32,
        "inotify_init1": 26,
        "fanotify_init": 262,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "unshare": 97,
        "setns": 268,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
    },
}
# x86_64's x32 calls carry this bit in their number; a 64-bit process makes none.
_X32_BIT = 0x40000000


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as classic BPF steps (code, jump if true, jump if false, k).

    A call from another architecture's ABI (int 0x80 from a 64-bit process, x32) is
    refused whole: its numbers differ, so it would pass every rule below."""
    load, equal, at_least, any_bit, give = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, number = 0x7FFF0000, _SYSCALL_NUMBERS[machine]

    def refuse(code: int) -> int:
        return 0x00050000 | code

    # Steps are built with jumps to named ends, resolved into offsets below.
    steps: list[tuple[int, object, object, int]] = [
        (load, 0, 0, 4),  # the architecture
        (equal, 0, "absent", _AUDIT_ARCH[machine]),
        (load, 0, 0, 0),  # the system call
        (at_least, "absent", 0, _X32_BIT),
        # aarch64 has no inotify_init: only inotify_init1.
        *((equal, "absent", 0, number[call]) for call in ABSENT_CALLS if call in number),
        *((equal, "refused", 0, number[call]) for call in REFUSED_CALLS),
        *((equal, "no_locks", 0, number[call]) for call in LOCK_CALLS),
        (equal, "fcntl", 0, number["fcntl"]),
        # aarch64 has only the *at calls: chmod, open, creat and mknod are x86_64's.
        *(
            (equal, f"mode_in_argument_{argument}", 0, number[call])
            for call, argument in MODE_ARGUMENTS.items()
            if call in number
        ),
        (equal, "family", 0, number["socket"]),
        (equal, "family", 0, number["socketpair"]),
        (equal, 0, "allow", number["clone"]),
        (load, 0, 0, 16),  # clone's flags
        (any_bit, "refused", "allow", NAMESPACE_FLAGS),
        ("family", 0, 0, 0),
        (load, 0, 0, 16),  # socket's first argument: the family
        *((equal, "allow", 0, family) for family in SOCKET_FAMILIES),
        (equal, "netlink", 0, AF_NETLINK),
        (give, 0, 0, refuse(errno.EAFNOSUPPORT)),
        ("netlink", 0, 0, 0),
        (load, 0, 0, 32),  # its third: the protocol
        *((equal, "allow", 0, protocol) for protocol in NETLINK_PROTOCOLS),
        (give, 0, 0, refuse(errno.EPROTONOSUPPORT)),
        ("fcntl", 0, 0, 0),
        (load, 0, 0, 24),  # its second argument: the command
        *((equal, "no_locks", 0, command) for command in LOCK_COMMANDS),
        (give, 0, 0, allow),
        *(
            step
            for argument in sorted(set(MODE_ARGUMENTS.values()))
            for step in (
                (f"mode_in_argument_{argument}", 0, 0, 0),
                (load, 0, 0, 16 + 8 * argument),  # its low 32 bits: the mode
                (any_bit, "refused", "allow", SET_ID_BITS),
            )
        ),
        ("allow", 0, 0, 0),
        (give, 0, 0, allow),
        ("absent", 0, 0, 0),
        (give, 0, 0, refuse(errno.ENOSYS)),
        ("refused", 0, 0, 0),
        (give, 0, 0, refuse(errno.EPERM)),
        ("no_locks", 0, 0, 0),
        (give, 0, 0, refuse(errno.ENOLCK)),
    ]
    labels, program = {}, []
    for step in steps:
        if isinstance(step[0], str):
            labels[step[0]] = len(program)
        else:
            program.append(step)

    def offset(target: object, here: int) -> int:
        return labels[target] - here - 1 if isinstance(target, str) else int(target)  # type: ignore[arg-type]

    return [
        (code, offset(yes, i), offset(no, i), k) for i, (code, yes, no, k) in enumerate(program)
    ]


def _install_seccomp_filter() -> None:
    """The run's seccomp filter (`seccomp_program`), for good."""
    machine = os.uname().machine
    if _LIBC is None or machine not in _SYSCALL_NUMBERS:
        return
    program = seccomp_program(machine)
    filters = (_SockFilter * len(program))(*(_SockFilter(*step) for step in program))
    fprog = _SockFprog(len(program), filters)
    _check(_LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _check(_LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def drop_privileges() -> None:
    """Give up every capability, for good, the sockets and the system calls
    `seccomp_program` refuses: the judge before it forks the learner's process
    (and that process, if it was forked sooner). Root inside the run is then a user."""
    if _LIBC is None:
        return
    _install_seccomp_filter()
    for capability in range(64):
        if _LIBC.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows (or none to drop)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_LIBC.capset(header, data), "capset")


def in_own_pid_namespace() -> bool:
    """Whether this process is in a PID namespace of a run (not the one it started in)."""
    return os.getpid() == 1 or Path("/proc/self").resolve().name != str(os.getpid())


# What is on here ------------------------------------------------------------------


@functools.cache
def _probed_layers(off: frozenset[str]) -> frozenset[str]:
    """Which layers a run gets here: a throwaway container is built in a child to see."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return frozenset()
    read, write = os.pipe()
    with warnings.catch_warnings():
        # JAX warns on every fork once it is imported (`kata doctor` has); the probe's
        # processes run no JAX code.
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        child = os.fork()
    if child == 0:
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        os.close(read)
        code = 0
        try:
            supervisor = enter(Spec())
            if supervisor is None:  # in the run's judge: nothing to do
                os._exit(0)
            supervisor.wait()
            os.write(write, ",".join(sorted(supervisor.layers)).encode())
        except BaseException:  # noqa: BLE001 — a probe that fails finds nothing
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        found = pipe.read().decode()
    os.waitpid(child, 0)
    layers = set(found.split(",")) if found else set()
    if "pid" in layers:  # mounts are made in the run's mount namespace
        layers.add("mount")
    return frozenset(layers - off)


def available_layers() -> frozenset[str]:
    """The container layers a grading run gets on this system, as things stand."""
    return _probed_layers(frozenset(switched_off()))


def describe(layers: frozenset[str] | None = None) -> str:
    """Which layers are on, in one line (for `kata doctor` and `kata grade`)."""
    layers = available_layers() if layers is None else layers
    kind = cgroup_parents()
    words = {
        "user": "user namespace",
        "pid": "own PIDs and /proc (atomic kill)",
        "ipc": "own IPC",
        "net": "no network",
        "mount": "capped tmpfs scratch, read-only course, own /dev",
        "cgroup": f"cgroup {kind[0] if kind else ''} memory+pids cap".replace("  ", " "),
    }
    on = [words[layer] for layer in LAYERS if layer in layers]
    off = [layer for layer in LAYERS if layer not in layers]
    text = ", ".join(on) if on else "none"
    return text + (f"; off: {', '.join(off)}" if off else "")


# What a grading run is protected by, all layers together -----------------------------

# The classes of harm `kata grade` insists on covering, and the layer that covers each.
REQUIRED = {"files": "Landlock", "processes": "pid", "memory": "cgroup"}


def protections(confined: bool) -> dict[str, bool]:
    """Whether runs here are covered for files (Landlock), processes (a PID namespace) and
    memory (a cgroup); `confined` says whether runs are to be confined at all."""
    layers = available_layers()
    return {
        "files": confined and confinement.abi_version() > 0,
        "processes": "pid" in layers,
        "memory": "cgroup" in layers,
    }


def missing_protections(confined: bool) -> list[str]:
    return [name for name, on in protections(confined).items() if not on]


def cgroup_advice() -> str:
    """Where runs get no cgroup: how an instructor gives them one."""
    root = _v2_root()
    if root is not None and set(CAPPED) <= _controllers(root, "cgroup.controllers"):
        return (
            "for a memory cap, run kata in a cgroup delegated to you: "
            "systemd-run --user --scope -p Delegate=yes kata grade …"
        )
    return (
        "for a memory cap, run kata grade as root (memory and pids are cgroup v1's here, "
        "which delegates to no user)"
    )


def summary(confined: bool) -> str:
    """The layers that protect a run here, in one line (the first of `kata grade`)."""
    landlock = confinement.describe().split(":")[0] if confined else "off (--unconfined)"
    return f"protection: Landlock {landlock.removeprefix('Landlock ')}; container: {describe()}"
