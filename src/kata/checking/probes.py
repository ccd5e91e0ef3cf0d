"""Measuring what JAX did, for the checks: real XLA compilations and traced-program size.

Checks judge behaviour, and these are the behaviours that tell a compiled, batched
program from a Python loop: how many times XLA compiled, and how many operations the
traced program holds (which a Python loop over examples grows with the batch).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import jax

# `jax.log_compiles()` logs this line once per real XLA compilation, in every JAX version
# from 0.4.30 to 0.12 (jax-notes.md); counters of Python calls or cache entries do not
# tell a new `jax.jit` wrapper from a cache hit.
COMPILATION_LINE = "Finished XLA compilation of "


@dataclass
class Compilations:
    """The functions XLA compiled inside a `count_compilations()` block, in order."""

    names: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.names)


class _CompilationLog(logging.Handler):
    def __init__(self, seen: Compilations) -> None:
        super().__init__(level=logging.DEBUG)
        self.seen = seen

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if COMPILATION_LINE in message:
            self.seen.names.append(message.split(COMPILATION_LINE, 1)[1].split(" in ")[0])


@contextmanager
def count_compilations() -> Iterator[Compilations]:
    """Count the XLA compilations in the block.

    Build every input before the block: eager ops compile too (once per new shape), and
    give inputs explicit dtypes, since weak-typed Python scalars compile separately.
    """
    seen = Compilations()
    handler = _CompilationLog(seen)
    logger = logging.getLogger("jax")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    # The log lines reach our handler; without this they would also print to stderr.
    quiet = [h for h in logger.handlers if h is not handler]
    for h in quiet:
        logger.removeHandler(h)
    try:
        with jax.log_compiles():
            yield seen
    finally:
        logger.removeHandler(handler)
        for h in quiet:
            logger.addHandler(h)
        logger.setLevel(old_level)


def traced_equation_count(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """The number of operations in `fn`'s traced program, sub-programs included.

    A Python loop inside a `jax.jit` shows as one top-level call, so the count walks into
    every nested jaxpr (jit, scan, cond, custom derivatives).
    """
    closed = jax.make_jaxpr(fn)(*args, **kwargs)
    return _count_equations(closed.jaxpr)


def _count_equations(jaxpr: Any) -> int:
    total = 0
    for equation in jaxpr.eqns:
        total += 1
        for value in equation.params.values():
            for inner in value if isinstance(value, (list, tuple)) else (value,):
                if hasattr(inner, "eqns"):
                    total += _count_equations(inner)
                elif hasattr(inner, "jaxpr") and hasattr(inner.jaxpr, "eqns"):
                    total += _count_equations(inner.jaxpr)
    return total
