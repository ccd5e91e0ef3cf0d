"""Confinement of a process that runs untrusted code: Linux's Landlock, through ctypes.

Landlock is an unprivileged Linux security module (kernel 5.13+): a process restricts
itself, and everything it starts, to the access rights it lists, with no root, no
namespaces and no container runtime, so it works inside CI's and Gradescope's containers
too. A confined grading process may:

- read (and execute) the Python installation, its packages, kata, the course's checks and
  manifest, the copy of the submission, and the system files Python and JAX need;
- write only inside its run's scratch folder;
- not connect or bind any TCP port, loopback included (Landlock ABI 4+);
- not signal processes outside its run, nor reach their abstract Unix sockets (ABI 6+);
  ptracing a process outside its run is refused at every ABI.

Only the rights the running kernel's ABI knows are asked for (best effort: ABI 1 files, 2
moving files between folders, 3 truncation, 4 TCP, 5 device ioctls, 6 scoping). Where
Landlock is missing (not Linux, kernel before 5.13, the LSM not enabled) `confine` changes
nothing and `unavailable_reason` says why; callers decide whether to go on.

Not covered by Landlock up to ABI 7: connecting to a Unix socket that has a path (its file
need not be readable), reading metadata (stat) outside the rules, and UDP. Resource caps are
rlimits: RLIMIT_FSIZE caps each file written; what a whole folder holds has no unprivileged
kernel cap, so the parent measures the scratch folder as the run goes
(kata.supervisor.runner).

Also here: the sweep that ends every process a run left behind (`become_subreaper`,
`end_descendants`), for processes that detached themselves with setsid or a double fork.
Standard library only, and nothing else of kata's, so the module can move.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    import resource
except ImportError:  # Windows: no rlimits, and no Landlock either
    resource = None  # type: ignore[assignment]

# Set to "off" to treat Landlock as missing (for tests, or a kernel whose Landlock misbehaves).
SWITCH_VARIABLE = "KATA_CONFINEMENT"

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights, by the ABI that introduced them.
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_ABI1 = (1 << 13) - 1  # execute … make_sym
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
# The rights that apply to a file (rather than to what a folder holds).
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR

# A file may grow to this; a write past it fails with "File too large" (EFBIG).
FILE_SIZE_LIMIT_BYTES = 256 * 2**20

SYSTEM_READABLE = (
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/proc",  # other processes' secrets (environ, mem) need ptrace rights, which it lacks
    "/sys",  # CPU count and cgroup limits (XLA), the accelerators' topology
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
)
SYSTEM_WRITABLE = ("/dev/null",)
# Device nodes the GPU and TPU runtimes open, and where their drivers' libraries live.
ACCELERATOR_DEVICES = ("nvidia*", "accel*", "vfio", "dri", "kfd")
ACCELERATOR_LIBRARIES = ("/usr/local/cuda*", "/usr/local/nvidia", "/opt/rocm*")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args: object) -> int:
    result = _libc().syscall(ctypes.c_long(number), *args)
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI, 0 where there is none (or KATA_CONFINEMENT=off)."""
    return 0 if os.environ.get(SWITCH_VARIABLE) == "off" else _kernel_abi()


@functools.cache
def _kernel_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0


def unavailable_reason() -> str | None:
    """Why code cannot be confined here, in a few words; None where it can."""
    if os.environ.get(SWITCH_VARIABLE) == "off":
        return f"confinement is switched off ({SWITCH_VARIABLE}=off)"
    if not sys.platform.startswith("linux"):
        return f"confinement needs Linux's Landlock, and this is {sys.platform}"
    if abi_version() == 0:
        return "this Linux kernel has no Landlock (5.13+, with the LSM enabled)"
    return None


def handled_rights(abi: int) -> tuple[int, int, int]:
    """The (filesystem, network, scope) rights a ruleset handles under `abi`."""
    fs = FS_ABI1
    fs |= FS_REFER if abi >= 2 else 0
    fs |= FS_TRUNCATE if abi >= 3 else 0
    fs |= FS_IOCTL_DEV if abi >= 5 else 0
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    return fs, net, scoped


@dataclass(frozen=True)
class Policy:
    """What a confined process may reach: paths to read, to write, and devices to use."""

    readable: tuple[str, ...]
    writable: tuple[str, ...]
    devices: tuple[str, ...] = ()


def _existing(paths: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for p in paths if p and os.path.exists(p)))


def accelerator_paths(dev: str = "/dev") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(devices, libraries) of any GPU or TPU present: device nodes (read, write, ioctl)
    and shared memory where one is, and the driver libraries' folders to read."""
    devices = sorted(p for pattern in ACCELERATOR_DEVICES for p in glob.glob(f"{dev}/{pattern}"))
    if devices:  # the CUDA and TPU runtimes share memory with their helpers through it
        devices += glob.glob(f"{dev}/shm")
    libraries = sorted(p for pattern in ACCELERATOR_LIBRARIES for p in glob.glob(pattern))
    return tuple(devices), tuple(libraries)


@functools.cache
def _installation() -> tuple[str, ...]:
    """Python, its packages and kata: whatever this process could import."""
    # kata's whole package (this module sits in kata/isolation/): an editable install reaches
    # it through an import hook, not a folder on sys.path.
    package = Path(__file__).resolve().parents[1]
    return (
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        str(Path(sys.executable).resolve().parent.parent),
        *(os.path.abspath(p) for p in sys.path if p),
        str(package),
    )


def installation_paths() -> tuple[str, ...]:
    """Python, its packages and kata (a run needs them all)."""
    return _installation()


# Under what is readable, what no run needs and only root could read: the machine's
# firmware tables (ACPI's, with its serial numbers), the kernel's debug and tracing files.
SYSTEM_HIDDEN = ("/sys/firmware", "/sys/kernel/debug", "/sys/kernel/tracing")


@functools.cache
def _system_policy(dev: str, hidden: tuple[str, ...]) -> Policy:
    """What every run may reach; found once (a warm worker finds it before it forks)."""
    devices, libraries = accelerator_paths(dev)
    hidden += tuple(h for h in SYSTEM_HIDDEN if os.path.isdir(h))
    return Policy(
        readable=excluding(_existing([*_installation(), *SYSTEM_READABLE, *libraries]), hidden),
        writable=_existing(list(SYSTEM_WRITABLE)),
        devices=devices,
    )


def grading_policy(
    readable: list[str], writable: list[str], dev: str = "/dev", hidden: tuple[str, ...] = ()
) -> Policy:
    """The policy of a grading run: `readable` (the course, the submission) and `writable`
    (its scratch folder) on top of what Python, JAX and any accelerator need; nothing in
    the folders `hidden` (the reference solutions) is readable, wherever they lie."""
    hidden = tuple(os.path.realpath(h) for h in hidden if os.path.isdir(h))
    system = _system_policy(dev, hidden)
    return Policy(
        readable=system.readable + excluding(_existing(readable), hidden),
        writable=system.writable + _existing(writable),
        devices=system.devices,
    )


def excluding(paths: tuple[str, ...], hidden: tuple[str, ...]) -> tuple[str, ...]:
    """`paths` less the folders `hidden`: Landlock rules only allow whole hierarchies, so a
    path above a hidden folder is replaced by its entries, down to the hidden folder's
    siblings (a wheel's site-packages, then kata/, then kata/bundled_course/: a few
    hundred rules)."""
    if not hidden:
        return paths
    kept: list[str] = []
    for path in paths:
        kept += _entries_but(os.path.realpath(path), hidden)
    return tuple(dict.fromkeys(kept))


def _entries_but(path: str, hidden: tuple[str, ...]) -> list[str]:
    inside = [h for h in hidden if h == path or h.startswith(path.rstrip("/") + "/")]
    if not inside:
        return [path]
    if path in inside or not os.path.isdir(path):
        return []
    try:
        # Resolved: a rule on a link (a venv's lib64) allows what it points to.
        entries = [os.path.realpath(entry.path) for entry in os.scandir(path)]
    except OSError:
        return []
    return [kept for entry in entries for kept in _entries_but(entry, tuple(inside))]


def readable_under(policy: Policy, folder: str) -> bool:
    """Whether anything in `folder` is readable under `policy`."""
    folder = os.path.realpath(folder)
    return any(
        folder == path or folder.startswith(path.rstrip("/") + "/") or path.startswith(folder + "/")
        for path in map(os.path.realpath, policy.readable + policy.writable)
    )


def confine(policy: Policy, signals_scoped: bool = True) -> int:
    """Restrict this process and all it starts to `policy`; the Landlock ABI in force, or 0
    where Landlock is unavailable and nothing changed. Also caps the size of files.
    `signals_scoped` (ABI 6) keeps it from signalling processes outside its domain."""
    if resource is not None:
        limit = (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES)
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
    abi = abi_version()
    if abi == 0:
        return 0
    fs, net, scoped = handled_rights(abi)
    if not signals_scoped:
        scoped &= ~SCOPE_SIGNAL
    attr = _RulesetAttr(fs, net, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # the struct as this ABI knows it
    ruleset = _syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    try:
        for paths, rights in (
            (policy.readable, READ_RIGHTS),
            (policy.writable, fs & ~FS_IOCTL_DEV),
            (policy.devices, fs),
        ):
            for path in paths:
                _allow(ruleset, path, rights & fs)
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    global _in_force
    _in_force = policy
    return abi


# The policy this process last confined itself to (what it forks inherits it).
_in_force: Policy | None = None


def policy_in_force() -> Policy | None:
    """The policy this process (or the one it was forked from) last confined itself to;
    None where it never did. A domain nested inside it can reach no more than this."""
    return _in_force


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # gone since the policy was made: nothing to allow
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        attr = _PathBeneathAttr(rights, fd)
        _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(attr), 0)
    finally:
        os.close(fd)


def describe() -> str:
    """The confinement in force for grading runs here, in one line (for `kata doctor`)."""
    reason = unavailable_reason()
    if reason:
        return f"none: {reason}; learner code runs with your rights"
    abi = abi_version()
    covered = ["files (read the course and Python, write only the run's folder)"]
    covered.append("no TCP" if abi >= 4 else "network not covered (needs ABI 4)")
    covered.append("no signals out" if abi >= 6 else "signals not covered (needs ABI 6)")
    covered.append(f"files up to {FILE_SIZE_LIMIT_BYTES // 2**20} MiB")
    return f"Landlock ABI {abi}: " + ", ".join(covered)


# Ending what a run leaves behind ---------------------------------------------------


def become_subreaper() -> bool:
    """Make the processes that this one's descendants orphan its children rather than
    init's, so `end_descendants` can find them; False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    return _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _children() -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:  # it ended meanwhile
            continue
        if fields[1:2] == [me]:
            found.append(int(entry.name))
    return found


def end_descendants() -> None:
    """Kill every process descending from this subreaper, and reap them.

    Each child killed hands its own children to this process; repeat until none is left.
    Costs nothing when there are none (one waitpid), else a scan of /proc per generation.
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        for child in _children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
