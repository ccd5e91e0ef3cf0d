"""Holding the learner's processes still while the judge times its own code.

The judge's baseline (its eager reference, kata.checking.speed) runs on a CPU the learner's
processes share: 40 forked processes that spun only while the learner's process was idle
slowed the judge's eager slow_fn from 9 ms of CPU to 235 ms by the clock, and an eager
fast_fn read 81× (issue #48). So while the judge times anything it compares against, every
process descending from the learner's starter is stopped (SIGSTOP), and continued after.

- Found: the starter is a child subreaper, so a process that the learner's code orphans (a
  double fork, a setsid'd daemon) is handed to the starter, not to init, and stays in its
  tree; the tree is read from /proc's parent links (no cgroup, PID namespace or
  /proc/PID/task/TID/children needed: all may be off).
- Stopped for good: a stop is repeated until one reading of the tree finds every thread of
  every process stopped, so a process forked meanwhile is stopped too. A learner's process
  may not send SIGCONT (`forbid_continuing`, a seccomp filter it inherits), so one
  stopped process cannot be continued by another still running.
- Stayed stopped: the kernel itself may continue a stopped process (a POSIX timer armed to
  send SIGCONT, an I/O signal, a parent's death signal), which no filter on the learner's
  calls can refuse; so the hold's end reads each process's CPU, as the kernel counts it,
  and its state again (`ran_while_stopped`), and a process that ran meanwhile voids what
  the judge timed (kata.checking.learner_connection: the check fails, saying so).
- Never left stopped: the judge continues them in a `finally`; the starter continues them
  on its own once the judge has said nothing for PAUSE_LIMIT_SECONDS, and ends them all
  when the judge hangs up. A stopped process still ends at SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
import time
from collections import defaultdict

# States of a thread that runs no code: stopped (by a signal or a tracer), or gone.
STILL_STATES = frozenset("TtZXx")
# How long a stop may take to reach every thread before the judge times anyway: a stopped
# process is one that has a stop pending and runs no code of its own before it stops.
STOP_SECONDS = 2.0
# The longest the starter keeps processes stopped without a word from the judge: far
# longer than any baseline the judge times at once (02's eager slow_fn, 9 ms quiet, 0.3 s
# at load 25), short enough that a judge stuck elsewhere leaves nothing frozen for long.
PAUSE_LIMIT_SECONDS = 30.0


def _parents() -> dict[int, int]:
    """Every process /proc lists, with its parent's pid."""
    parents = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        stat = f"/proc/{entry.name}/stat"
        # An OSError: it ended meanwhile.
        with contextlib.suppress(OSError), open(stat, encoding="utf-8", errors="replace") as line:
            parents[int(entry.name)] = int(line.read().rpartition(")")[2].split()[1])
    return parents


def descendants(root: int) -> set[int]:
    """The processes descending from `root` (not `root` itself), as /proc lists them now."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in _parents().items():
        children[parent].append(pid)
    found, frontier = set(), [root]
    while frontier:
        for child in children.pop(frontier.pop(), []):
            found.add(child)
            frontier.append(child)
    return found


def _still(pid: int) -> bool:
    """Whether every thread of process `pid` is stopped or gone."""
    try:
        tasks = list(os.scandir(f"/proc/{pid}/task"))
    except OSError:
        return True  # gone
    for task in tasks:
        stat = f"{task.path}/stat"
        # An OSError: that thread ended.
        with contextlib.suppress(OSError), open(stat, encoding="utf-8", errors="replace") as line:
            if line.read().rpartition(")")[2].split()[0] not in STILL_STATES:
                return False
    return True


def stop_tree(root: int, including_root: bool = False) -> set[int]:
    """Stop every process descending from `root` (and `root`, `including_root`): the pids
    to continue (`resume`). Returns once every process of a reading of the tree taken
    after all the ones before it were seen stopped is stopped (a process stopped mid-fork
    has finished it: its child is in that reading), or after STOP_SECONDS.

    A reading of /proc is the costly part (42 ms for 207 processes at load 25, where the
    run has no PID namespace of its own): the common case takes two, and waits between
    them on the stopped processes alone."""
    stopped: set[int] = set()
    unreachable: set[int] = set()
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline:
        tree = descendants(root) | ({root} if including_root else set())
        running = {pid for pid in tree - unreachable if not _still(pid)}
        if not running:
            break
        for pid in running:
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)
            except ProcessLookupError:
                pass
            except PermissionError:  # another user's: not the learner's to begin with
                unreachable.add(pid)
        while time.monotonic() < deadline and not all(_still(pid) for pid in running):
            time.sleep(0.0005)
    return stopped


# CPU a process stopped for the whole of a hold may show at its end, read from the moment
# `stop_tree` saw it stopped: none (measured here: 0 over 304 holds of 30 ms of 6 spinners,
# load 5 to 7); the margin is for a kernel that books a thread's last slice late.
STILL_CPU_SECONDS = 0.002


def stopped_cpu(root: int, including_root: bool = False) -> dict[int, float | None]:
    """Each process descending from `root` (and `root`, `including_root`), with the CPU the
    kernel has counted for it (None where it does not count: kata.cpu_clocks), read once
    `stop_tree` stopped them all."""
    from kata.cpu_clocks import cpu_seconds

    tree = descendants(root) | ({root} if including_root else set())
    return {pid: cpu_seconds(pid) for pid in tree}


def ran_while_stopped(
    root: int, before: dict[int, float | None], including_root: bool = False
) -> list[int]:
    """The processes of `root`'s tree that ran since `before` (`stopped_cpu`), though all
    were stopped then: one the kernel counted more CPU for, one not stopped now, or one
    new (something continued a process: a learner's process may send no SIGCONT, but the
    kernel sends one for a POSIX timer armed to, an I/O signal or a parent's death)."""
    now = stopped_cpu(root, including_root)
    ran = [pid for pid in now if pid not in before or not _still(pid)]
    for pid, cpu in now.items():
        earlier = before.get(pid)
        if cpu is not None and earlier is not None and cpu - earlier > STILL_CPU_SECONDS:
            ran.append(pid)
    return sorted(set(ran))


def resume(pids: set[int]) -> None:
    """Continue the processes `stop_tree` stopped."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)


# The calls that send a signal, and which of their arguments is the signal (the kernel's
# numbers, as in kata.isolation.seccomp).
_SIGNAL_CALLS = {
    "x86_64": {62: 1, 200: 1, 234: 2, 129: 1, 297: 2, 424: 1},
    "aarch64": {129: 1, 130: 1, 131: 2, 138: 1, 240: 2, 424: 1},
}
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def continuing_refused_program(machine: str) -> list[tuple[int, int, int, int]]:
    """A seccomp filter as classic BPF steps (code, jump if true, jump if false, k):
    kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo and pidfd_send_signal with
    SIGCONT are refused with EPERM, and so is every call of another architecture's ABI
    (int 0x80 from a 64-bit process, x32), whose numbers differ; every other call passes
    (to the run's own filter, where there is one)."""
    from kata.isolation.seccomp import _AUDIT_ARCH, _X32_BIT

    load, equal, at_least, give = 0x20, 0x15, 0x35, 0x06
    allow, refuse = 0x7FFF0000, 0x00050000 | errno.EPERM
    calls = _SIGNAL_CALLS[machine]
    program: list[tuple[int, int, int, int]] = [
        (load, 0, 0, 4),  # the architecture
        (equal, 1, 0, _AUDIT_ARCH[machine]),
        (give, 0, 0, refuse),
        (load, 0, 0, 0),  # the system call
        (at_least, 0, 1, _X32_BIT),
        (give, 0, 0, refuse),
    ]
    # Each call: if it is this one, load its signal argument and refuse SIGCONT; the
    # blocks follow each other, each jumping past itself when the number differs.
    for number, argument in calls.items():
        program += [
            (equal, 0, 4, number),
            (load, 0, 0, 16 + 8 * argument),  # the argument's low 32 bits
            (equal, 0, 1, signal.SIGCONT),
            (give, 0, 0, refuse),
            (give, 0, 0, allow),
        ]
    return [*program, (give, 0, 0, allow)]


def forbid_continuing() -> bool:
    """Refuse this process, and all it starts, the sending of SIGCONT
    (`continuing_refused_program`): a learner's process, before any learner code runs.
    Whether the filter is in force (not where the kernel or architecture has none)."""
    from kata.isolation.seccomp import _SockFilter, _SockFprog

    machine = os.uname().machine
    if not sys.platform.startswith("linux") or machine not in _SIGNAL_CALLS:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    program = continuing_refused_program(machine)
    filters = (_SockFilter * len(program))(*(_SockFilter(*step) for step in program))
    fprog = _SockFprog(len(program), filters)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
