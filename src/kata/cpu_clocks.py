"""The CPU clocks the judge reads, and whether they tick here.

The judge reads the kernel's count of the learner's process's CPU time (/proc/PID/task/*/
schedstat, /proc/PID/stat): to show a speed line's CPU beside its wall time
(kata.checking.speed), to count a compilation its process did not report
(kata.learner_side.compile_counts; where it cannot, a call that came back sooner on the judge's
wall clock than any compilation takes is what shows none), and to tell compiling from
calling (14's compile_for). It
reads a thread's own CPU clock to stop an endless compiled program
(kata.checking.exported_program.finished). A kernel may serve these and never advance them:
under gVisor every one reads 0 (../shared/accelerators.md), and a clock that never ticked
reads as "took no time", which is evidence of nothing. So each process finds out once, as
it first reads one (a spin of at most SPIN_SECONDS), and a clock that did not tick is not
read at all: `cpu_seconds` says None, as where there is no /proc, and what reads it uses
its fallback (the judge's wall clock) or says it cannot be measured here.

KATA_CPU_CLOCKS=frozen makes every clock read here read 0, as gVisor's do, to test the
above on a machine whose clocks tick; like KATA_CONTAINER_WITHOUT, it can only make kata
trust less.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

FROZEN_VARIABLE = "KATA_CPU_CLOCKS"
# At most this long: a live clock advances (by the nanosecond) as soon as this process
# runs at all, and the spin ends then (60-250 µs here, at a load of 20 on 2 cores); a dead
# one costs every judge this once.
SPIN_SECONDS = 0.010
TICK = 1 / os.sysconf("SC_CLK_TCK")


def _frozen() -> bool:
    return os.environ.get(FROZEN_VARIABLE, "") == "frozen"


def thread_seconds() -> float:
    """This thread's CPU time."""
    return 0.0 if _frozen() else time.thread_time()


def process_seconds() -> float:
    """This process's CPU time, as it counts it itself."""
    return 0.0 if _frozen() else time.process_time()


def _schedstat_seconds(pid: int) -> float | None:
    total = 0
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"{task.path}/schedstat") as counts:
                total += int(counts.read().split()[0])
    except OSError:
        return None
    return 0.0 if _frozen() else total / 1e9


@dataclass(frozen=True)
class CpuClocks:
    """Which CPU clocks tick here: a thread's own (`thread`), the process's own
    (`process`), and the kernel's count of a process's CPU that the judge reads of the
    learner's (`kernel`: None where there is no /proc to read it from)."""

    thread: bool
    process: bool
    kernel: bool | None

    @property
    def live(self) -> bool:
        """Every one ticks: all the evidence the judge reads from them is there."""
        return self.thread and self.process and self.kernel is True

    def describe(self) -> str:
        """One line for `kata doctor`: which tick, and what a dead one costs."""
        if self.live:
            return "a thread's, the process's and the kernel's count of a process: all tick"
        named = {"thread": self.thread, "process": self.process, "kernel": self.kernel}
        dead = [name for name, ticks in named.items() if ticks is False]
        said = [f"{', '.join(dead)}: never tick"] if dead else []
        if self.kernel is not True:
            why = "no /proc: " if self.kernel is None else ""
            said.append(
                f"{why}a process's CPU cannot be measured here, so speed lines show none, "
                "checks resting on compile counts alone earn no points (the judge's wall "
                "clock corroborates a count only where a check times calls that came back "
                "sooner than any compilation takes: 08's row_sums) and 14's compile_for is "
                "timed on the wall clock"
            )
        if not self.thread:
            said.append("an endless compiled program is stopped by its check's time limit")
        return "; ".join(said)


def probe_cpu_clocks(
    readers: dict[str, Callable[[], float | None]] | None = None,
    spin_seconds: float = SPIN_SECONDS,
) -> CpuClocks:
    """Spin until each of `readers` (thread, process, kernel; kata's own by default) has
    advanced, for `spin_seconds` at most on the wall clock: one that did not never ticks."""
    readers = readers or {
        "thread": thread_seconds,
        "process": process_seconds,
        "kernel": lambda: _schedstat_seconds(os.getpid()),
    }
    started = {name: read() for name, read in readers.items()}
    deadline = time.perf_counter() + spin_seconds
    advanced: dict[str, float | None] = {}
    while True:
        advanced = {
            name: None if started[name] is None or now is None else now - started[name]
            for name, now in ((name, read()) for name, read in readers.items())
        }
        done = all(a is None or a > 0 for a in advanced.values())
        if done or time.perf_counter() >= deadline:
            break
    ticked = {name: None if a is None else a > 0 for name, a in advanced.items()}
    return CpuClocks(
        thread=bool(ticked["thread"]), process=bool(ticked["process"]), kernel=ticked["kernel"]
    )


@functools.cache
def cpu_clocks() -> CpuClocks:
    """This process's clocks, probed once."""
    return probe_cpu_clocks()


def cpu_seconds(pid: int) -> float | None:
    """The CPU time the kernel has counted for process `pid`'s live threads (not what the
    process says of itself), to the nanosecond; None where the kernel does not tell (no
    /proc) or its count never ticks here."""
    if not cpu_clocks().kernel:
        return None
    return _schedstat_seconds(pid)


@dataclass(frozen=True)
class KernelCpu:
    """What the kernel has counted of process `pid`'s CPU time at one moment: `live`, its
    live threads' to the nanosecond; `ticks`, everything, threads that ended and children
    it reaped included, in whole clock ticks (/proc/PID/stat)."""

    live: float
    ticks: int
    children_ticks: int

    def spent_since(self, before: KernelCpu) -> float:
        """Seconds of CPU between `before` and this moment: the exact count of the live
        threads, unless the tick count (each of its sums rounded down, so up to two ticks
        short or over, four with children reaped) shows more, done in a thread that ended
        or a child process in between."""
        ticks = self.ticks - before.ticks + self.children_ticks - before.children_ticks
        slack = 4 if self.children_ticks != before.children_ticks else 2
        return max(self.live - before.live, (ticks - slack) * TICK)


def kernel_cpu(pid: int) -> KernelCpu | None:
    """The kernel's count of process `pid`'s CPU time now; None where it does not tell."""
    live = cpu_seconds(pid)
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # After the command's closing parenthesis: utime, stime, cutime, cstime are
            # fields 14-17 of the line, 11-14 of what follows it.
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    if live is None:
        return None
    utime, stime, cutime, cstime = (int(n) for n in fields[11:15])
    return KernelCpu(live, utime + stime, cutime + cstime)
