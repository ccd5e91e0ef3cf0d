"""Counting what XLA compiled, in the learner's process, for the compile-count checks.

How many times XLA compiled tells a compiled function from one built anew each call. The
count is taken where the learner's code runs, so it is that process's word: a listener
cleared or shadowed there is named as tampering (kata.grading.integrity), and the size of
a program is counted by the judge from the program itself (`LearnerFunction.exported`).
The judge corroborates the count from outside: a request whose CPU time, as the kernel
counts it, only a compilation explains counts as one, whatever the process reports
(kata.checking.learner_calls). That holds a count down, never up: "compiled nothing more"
rests on the kernel; "compiled one program, not one per operation" (one compilation or
thirty cost alike) and "compiled something" (`reported`) rest on the process's word.
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

# The CPU time of one request to the learner's process, counted by the kernel, above which
# only a compilation explains it (the judge counts such a request as one, whatever the
# process reports). Measured over every compile-count check of 02, 07, 08, 09, 12, 14 and
# 16's solutions: a request with no compilation took at most 3.2 ms quiet and with three
# busy loops on the 2 cores (the wire, the call, the fingerprint), 6.4 ms over 800 requests
# with the load at 4 to 9, and none went past 8 ms in four gradings of the solved course at
# a load of 21. A compilation costs more: 17 ms on JAX 0.5.3 and 25 ms on 0.10.2 for the
# cheapest (one of 08's row sums), and under 12 ms for a jitted function built anew whose
# program the persistent cache holds (at a 12 ms bound, 12's step rebuilt on every call
# passed under a relay that rewrote its counts). So the bound cannot move up, though once,
# with two other test runs beside a grading of the solved course (load 6 to 10), requests
# that compiled nothing went past it and three correct files failed; not seen again. Two
# things cost as much without a compilation, so a count over them uses `reported`: a trace
# alone (`jit(f).lower(...)`, 23 ms), and on JAX 0.10.2 the first run of a program
# compiled ahead of time, whose code generation XLA finishes then (38 ms for 14's `deep`).
COMPILE_CPU_SECONDS = 0.008
# What a count lists for a request the kernel saw compile and the process did not report
# (one name for all, so that a check's message can group them).
UNREPORTED_COMPILATION = "one its process did not report (the kernel counted its CPU time)"


@dataclass
class Compilations:
    """The functions XLA compiled inside a `count_compilations()` block, in order: as the
    learner's process reported them, and, on the judge's side, one more for each request
    that reported none but cost the CPU only a compilation explains (`COMPILE_CPU_SECONDS`)."""

    names: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.names)

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
