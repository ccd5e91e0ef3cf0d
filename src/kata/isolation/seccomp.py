"""What a run's processes give up before any learner code exists: every capability, and the
system calls and sockets a seccomp filter refuses (`drop_privileges`).

The filter (`seccomp_program`) refuses every socket family but Unix, IPv4, IPv6 and
netlink's routing protocol; io_uring, which makes sockets past it; the calls that reach
kernel state beyond the run (keyrings, BPF, perf events, namespaces and mounts of its own,
ptrace); file locks, leases and watches, which a run graded beside it would see; and any
mode with the set-user-ID or set-group-ID bit. kata.isolation.pausing builds its own filter
from the same numbers.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket

from kata.isolation.libc import LIBC, check

_PR_CAPBSET_DROP, _CAPABILITY_VERSION_3 = 24, 0x20080522

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
# Calls that start a process, or put another program in this process's place: a learner's
# process makes none (`forbid_new_processes`). Its compilations, its CPU and the bytes it
# moves are read from it alone, so a helper it started (forked, or exec'd and talked to over
# a socket) would do the work where nothing counts it: 20 lengths "compiled at most 10
# times" while a helper compiled each. clone() is allowed for threads alone (CLONE_THREAD),
# which live in the process the counts read; clone3, whose flags a filter cannot read, is
# refused as absent, so that glibc falls back to clone.
PROCESS_CALLS = ("fork", "vfork", "execve", "execveat")
CLONE_THREAD = 0x00010000
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
        "fork": 57,
        "vfork": 58,
        "execve": 59,
        "execveat": 322,
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
        "execve": 221,
        "execveat": 281,
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
    return _resolved(steps)


def _resolved(steps: list[tuple[object, object, object, int]]) -> list[tuple[int, int, int, int]]:
    """`steps` with their named ends (a step whose code is a name marks where it stands)
    turned into classic BPF's jump offsets."""
    labels, program = {}, []
    for step in steps:
        if isinstance(step[0], str):
            labels[step[0]] = len(program)
        else:
            program.append(step)

    def offset(target: object, here: int) -> int:
        return labels[target] - here - 1 if isinstance(target, str) else int(target)  # type: ignore[arg-type]

    return [
        (int(code), offset(yes, i), offset(no, i), k)  # type: ignore[call-overload]
        for i, (code, yes, no, k) in enumerate(program)
    ]


def processes_refused_program(machine: str) -> list[tuple[int, int, int, int]]:
    """A filter that refuses every call in PROCESS_CALLS and every clone() but a thread's
    with EPERM, and clone3 with ENOSYS; a call from another architecture's ABI is refused
    whole, as in `seccomp_program`."""
    load, equal, at_least, any_bit, give = 0x20, 0x15, 0x35, 0x45, 0x06
    number = _SYSCALL_NUMBERS[machine]
    steps: list[tuple[object, object, object, int]] = [
        (load, 0, 0, 4),  # the architecture
        (equal, 0, "refused", _AUDIT_ARCH[machine]),
        (load, 0, 0, 0),  # the system call
        (at_least, "refused", 0, _X32_BIT),
        (equal, "absent", 0, number["clone3"]),
        *((equal, "refused", 0, number[call]) for call in PROCESS_CALLS if call in number),
        (equal, 0, "allow", number["clone"]),
        (load, 0, 0, 16),  # clone's flags
        (any_bit, "allow", "refused", CLONE_THREAD),
        ("allow", 0, 0, 0),
        (give, 0, 0, 0x7FFF0000),
        ("absent", 0, 0, 0),
        (give, 0, 0, 0x00050000 | errno.ENOSYS),
        ("refused", 0, 0, 0),
        (give, 0, 0, 0x00050000 | errno.EPERM),
    ]
    return _resolved(steps)


def _install(program: list[tuple[int, int, int, int]]) -> None:
    filters = (_SockFilter * len(program))(*(_SockFilter(*step) for step in program))
    fprog = _SockFprog(len(program), filters)
    check(LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    check(LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def _install_seccomp_filter() -> None:
    """The run's seccomp filter (`seccomp_program`), for good."""
    machine = os.uname().machine
    if LIBC is None or machine not in _SYSCALL_NUMBERS:
        return
    _install(seccomp_program(machine))


def forbid_new_processes() -> bool:
    """Refuse this process, for good, the starting of any process and the running of
    another program (`processes_refused_program`): a learner's process, before the
    learner's module is imported. Whether the filter is in force (not where the kernel or
    architecture has none)."""
    machine = os.uname().machine
    if LIBC is None or machine not in _SYSCALL_NUMBERS:
        return False
    _install(processes_refused_program(machine))
    return True


def drop_privileges() -> None:
    """Give up every capability, for good, the sockets and the system calls
    `seccomp_program` refuses: the judge before it forks the learner's process
    (and that process, if it was forked sooner). Root inside the run is then a user."""
    if LIBC is None:
        return
    _install_seccomp_filter()
    for capability in range(64):
        if LIBC.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows (or none to drop)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    check(LIBC.capset(header, data), "capset")
