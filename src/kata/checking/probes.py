"""Counting what XLA compiled, in the learner's process, for the compile-count checks.

How many times XLA compiled tells a compiled function from one built anew each call. The
count is taken where the learner's code runs, so it is that process's word: a listener
cleared or shadowed there is named as tampering (kata.grading.integrity), and the size of
a program is counted by the judge from the program itself (`LearnerFunction.exported`).
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


@dataclass
class Compilations:
    """The functions XLA compiled inside a `count_compilations()` block, in order."""

    names: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.names)


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
