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
  it would see on the files both can open (kata.isolation.seccomp).
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

The namespaces, the run's PID 1 and its supervisor are here; the cgroup is in
kata.isolation.cgroups, the mounts in kata.isolation.mounts, and the seccomp filter, with the
dropping of capabilities, in kata.isolation.seccomp. Standard library only (ctypes, through
kata.isolation.libc, for unshare, mount and prctl), and kata.isolation.confinement's sweep
where there is no PID namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import os
import secrets
import signal
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kata.isolation import confinement, mounts
from kata.isolation.cgroups import CGROUP_PREFIX, Cgroup, cgroup_parents
from kata.isolation.libc import LIBC, check
from kata.isolation.seccomp import drop_privileges

LAYERS = ("user", "pid", "ipc", "net", "mount", "cgroup")
NAMESPACE_LAYERS = ("user", "pid", "ipc", "net", "mount")
# Names layers to treat as missing, comma-separated, or "all".
WITHOUT_VARIABLE = "KATA_CONTAINER_WITHOUT"

CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_PR_SET_DUMPABLE = 4
# The layers of the run this process is in, its cgroup's folders, and the paths of the Unix
# sockets outside it (set in a run's first process by `enter`).
_layers_here: frozenset[str] = frozenset()
_cgroup_here: tuple[str, ...] = ()
_sockets_outside: tuple[str, ...] = ()


def _unshare(flags: int) -> None:
    assert LIBC is not None
    check(LIBC.unshare(ctypes.c_int(flags)), "unshare")


def switched_off() -> set[str]:
    """The layers KATA_CONTAINER_WITHOUT names."""
    named = {n.strip() for n in os.environ.get(WITHOUT_VARIABLE, "").split(",") if n.strip()}
    return set(LAYERS) if "all" in named else named & set(LAYERS)


# Building the container ------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """What a run's container holds back: its caps, and the folders its mounts change."""

    memory_bytes: int | None = None
    scratch: str | None = None  # becomes a tmpfs of `scratch_bytes`
    scratch_bytes: int = 2**30
    read_only: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()  # covered by an empty, unreadable folder
    # What the run may use in the folders it gets empty (mounts.COVERED), put back in them.
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
    if LIBC is None:  # no kernel to build it with: the caller is the run's judge
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
    sockets = mounts.path_sockets()  # the network namespace's own list: read before leaving it
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
            mounts.mount_proc()
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
    if LIBC is None or not set(NAMESPACE_LAYERS) - off:
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
        mounts.mount_run(
            scratch=spec.scratch,
            scratch_bytes=spec.scratch_bytes,
            read_only=spec.read_only,
            hidden=spec.hidden,
            visible=spec.visible,
            writable=spec.writable,
            cgroup=_cgroup_here,
            sockets_outside=_sockets_outside,
        )
    drop_privileges()
    _undumpable()


def _undumpable() -> None:
    """Nobody without CAP_SYS_PTRACE may trace this process or open its /proc files (its
    descriptors, memory, environment): not a learner's process of the same user, even
    where Landlock, which forbids that too, is missing. Inherited by what it forks."""
    if LIBC is not None:
        LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


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


def summary(confined: bool) -> str:
    """The layers that protect a run here, in one line (the first of `kata grade`)."""
    landlock = confinement.describe().split(":")[0] if confined else "off (--unconfined)"
    return f"protection: Landlock {landlock.removeprefix('Landlock ')}; container: {describe()}"
