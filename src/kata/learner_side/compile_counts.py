"""Counting what XLA compiled, in the learner's process, for the compile-count checks.

How many times XLA compiled tells a compiled function from one built anew each call. The
count is taken where the learner's code runs, so it is that process's word: a listener
cleared or shadowed there is named as tampering (kata.isolation.integrity), and the size of
a program is counted by the judge from the program itself (`LearnerFunction.exported`).
The judge corroborates the count from outside: a request whose CPU time and bytes read
and written, as the kernel counts them, only a compilation explains counts as one,
whatever the process reports (kata.checking.learner_calls). That holds a count down,
never up: "compiled nothing more" rests on the kernel; "compiled one program, not one per
operation" (one compilation or thirty cost alike) and "compiled something" (`reported`)
rest on the process's word.

Where the kernel's count of a process's CPU never ticks (under gVisor: kata.cpu_clocks), the
judge's own wall clock across each request is what it holds: a reply that came back faster
than any compilation takes had none on its way (`FASTEST_COMPILATION_SECONDS`), so "at least
k of these calls compiled nothing" rests on the judge (`Compilations.answered_too_fast_to_compile`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import jax

# JAX records this event once per real XLA compilation (a persistent-cache hit included,
# as a compile-count check wants), in every JAX version from 0.4.30 to 0.12, with the
# program's name from 0.6 on (jax-notes.md). Unlike the "Finished XLA compilation" log
# line read before, it still arrives when learner code quiets logging: measured, a module
# that runs `logging.disable(logging.WARNING)` made an unjitted 07 step look like "one
# program" to the log reader.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

# What the kernel counts of one request to the learner's process, past which only a
# compilation explains it (the judge counts such a request as one, whatever the process
# reports): its CPU time, and the bytes it read and wrote (`bytes_moved`), since every
# compilation either reads its program from the persistent cache or writes it there.
#
# Measured over every compile-count check, warm and cold, of the solved course (02, 08, 12
# and 14 on JAX 0.5.3 too) and of 02, 07, 08, 12, 14 and 16's stubs: each request that
# compiled moved 2.8 to 18 KB (one entry per program), and none of the others moved a
# byte. CPU alone cannot tell them apart: over 800 requests with the load at 4 to 9, one
# that compiled nothing took up to 6.4 ms (the wire, the call, the fingerprint), and with
# the suite beside it (load 5 to 9) an eager 02 stub's 300 operations (3.7 ms quiet) went
# past 8 ms, as had correct 02, 12 and 16 files' calls once at a load of 6 to 10; while a
# jitted function built anew whose program the cache holds costs 8.7 to 12 ms. So:
# - a request that moved a cache entry's bytes counts from 4 ms of CPU;
# - one that moved none, from 15 ms: below what a process that switched its cache off
#   pays for the cheapest compilation here (17 ms on JAX 0.5.3, 25 ms on 0.10.2, one of
#   08's row sums), above any request seen that compiled nothing;
# - where the kernel does not count bytes, from 8 ms, as before it did.
# Python's collector does not run inside a counted request
# (kata.learner_side.learner_process.collect_garbage_outside_counted_calls): on JAX 0.5.3 a full
# collection of what 16's checks had left in JAX's caches took 6 ms inside one of its 8
# train steps, quiet, and pushed that step past 15 ms every time.
# Two things cost as much as a compilation without one, so a count over them uses
# `reported`: a trace alone (`jit(f).lower(...)`, 23 ms), and on JAX 0.10.2 the first run
# of a program compiled ahead of time, whose code generation XLA finishes then (38 ms for
# 14's `deep`).
CACHE_ENTRY_BYTES = 1024
COMPILE_CPU_SECONDS = 0.004
UNCACHED_COMPILE_CPU_SECONDS = 0.015
UNCOUNTED_BYTES_COMPILE_CPU_SECONDS = 0.008
# A request the judge's wall clock saw answered, from sending it to reading its reply, in
# less than this compiled nothing on its way: where the kernel's clocks are dead, the only
# evidence for a count (`Compilations.answered_too_fast_to_compile`). The clock bounds
# whatever the learner's process did for the reply once the request reached it, and a call
# that compiles there traces, lowers, and compiles or reads JAX's persistent cache.
# Measured in one process, the least of 40 new lengths each (here, 2 cores; and on a TPU
# VM's 13 under gVisor, JAX 0.10.2): a program that sums a row (`jit(jnp.sum)`, or
# `jnp.sum` run eagerly) took at least 4.5 ms on JAX 0.5.3 and 5.9 ms on 0.10.2 (7.1 ms on
# the VM) with its program in the cache, 25 ms and more without. A right answer's call that
# compiles nothing took 1.0 to 2.0 ms here when quiet, 1.5 to 2.8 ms on the VM, also beside
# two busy loops on the two cores it was held to (most of it the process checking that
# kata's functions are its own, kata.isolation.integrity); load only slows a call, so it can
# fail a right answer, which a check then times again, never pass a wrong one. What comes
# back sooner and still compiled, as the kernel's bound above misses it too: a program
# read from a cache that an earlier compilation of it filled, lowered ahead of the call
# (`jit(f).lower(x)`: 0.8 to 1.4 ms) or the identity (3.0 ms on JAX 0.5.3), where a run
# that compiled it once could as well have kept it (and a run of any other folder than the
# course's own, `kata grade`'s, is named no cache: kata.isolation.caches); and a compilation
# in another thread, which the reply did not wait for.
FASTEST_COMPILATION_SECONDS = 0.004
# What a count lists for a request the kernel saw compile and the process did not report
# (one name for all, so that a check's message can group them).
UNREPORTED_COMPILATION = "one its process did not report (the kernel counted its CPU time)"


def bytes_moved(pid: int) -> int | None:
    """The bytes the kernel has counted process `pid` passing to read() and write() calls
    (/proc/PID/io's rchar and wchar: files, pipes and terminals, not sockets), threads that
    ended and children it reaped included; None where the kernel does not tell, or does
    not let this process see (it must be one that could trace `pid`)."""
    try:
        with open(f"/proc/{pid}/io") as counts:
            fields = dict(line.split(":") for line in counts.read().splitlines())
        return int(fields["rchar"]) + int(fields["wchar"])
    except (OSError, KeyError, ValueError):
        return None


def kernel_saw_a_compilation(cpu: float | None, moved: int | None) -> bool:
    """Whether a request's CPU time and bytes read and written, as the kernel counted them
    (None where it does not), are what only a compilation explains."""
    if cpu is None:
        return False
    if moved is None:
        return cpu >= UNCOUNTED_BYTES_COMPILE_CPU_SECONDS
    if moved >= CACHE_ENTRY_BYTES:
        return cpu >= COMPILE_CPU_SECONDS
    return cpu >= UNCACHED_COMPILE_CPU_SECONDS


@dataclass
class Compilations:
    """The functions XLA compiled inside a `count_compilations()` block, in order: as the
    learner's process reported them, and, on the judge's side, one more for each request
    that reported none but cost what only a compilation explains (`kernel_saw_a_compilation`)."""

    names: list[str] = field(default_factory=list)
    # Each request's time on the judge's wall clock, from sending it to reading its reply.
    judge_seconds: list[float] = field(default_factory=list)
    # Whether the kernel counted the CPU of every request (kata.cpu_clocks): where it did
    # not, nothing outside the process corroborates `count`.
    kernel_counted: bool = True

    @property
    def count(self) -> int:
        return len(self.names)

    @property
    def answered_too_fast_to_compile(self) -> int:
        """The requests answered faster, by the judge's clock, than any compilation takes
        (`FASTEST_COMPILATION_SECONDS`): none of them compiled on its way, whatever the
        process reports."""
        return sum(seconds < FASTEST_COMPILATION_SECONDS for seconds in self.judge_seconds)

    @property
    def reported(self) -> list[str]:
        """The compilations the learner's process reported: its word alone, without those
        the kernel's CPU count added (`UNREPORTED_COMPILATION`)."""
        return [name for name in self.names if name != UNREPORTED_COMPILATION]


# The blocks being counted now (nested blocks each see every compilation).
_open_counts: list[Compilations] = []


def _on_event(event: str, duration: float, **details: Any) -> None:
    if event == COMPILE_EVENT:
        for seen in _open_counts:
            seen.names.append(str(details.get("fun_name", "a program")))


# One listener for the life of the process, registered as the checks are imported, before
# any learner module: JAX only lets a listener be unregistered from 0.8 on.
jax.monitoring.register_event_duration_secs_listener(_on_event)


@contextmanager
def counting_into(open_counts: list[Compilations]) -> Iterator[Compilations]:
    """A `Compilations` that every compilation reported to `open_counts` joins while the
    block runs (here, or, for the judge, in the learner's process)."""
    seen = Compilations()
    open_counts.append(seen)
    try:
        yield seen
    finally:
        open_counts.remove(seen)


def compilations_here() -> AbstractContextManager[Compilations]:
    """Count the XLA compilations this process makes in the block (the learner's process
    counts each request's; the checks' `count_compilations`, in
    kata.checking.learner_calls, gathers those counts on the judge's side).

    Build every input before the block: eager ops compile too (once per new shape), and
    give inputs explicit dtypes, since weak-typed Python scalars compile separately.
    """
    return counting_into(_open_counts)
