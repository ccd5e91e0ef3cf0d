"""Tracing a function that reads Python numbers off its own values: 08's `fit`, a loop
around a compiled step that reads each step's loss as a float (`float(loss)`,
`loss.item()`) or tests it (`if jnp.isnan(loss):`), right when called, where JAX raises
ConcretizationTypeError under a trace.

Without a program of its own, the judge would have only the reference to hold such a
function's timed calls to, and a loop of NumPy on the host meets the reference too, fast;
a learner's exception would then choose weaker evidence. So the judge traces it anyway
(`answered_when_traced`): each scalar read off one of the function's own traced values is
answered with a placeholder (0, 0.0, 0j, False) where JAX would raise; reads inside a
function it jits are not (JAX keeps that function's trace, and its later calls would run
it), nor is any other error. What the program computes from the arguments is then the
function's own computation, and the numbers it read become constants.

The placeholders grant nothing: the judge holds the function's timed calls, bit for bit,
to this program, run by the judge (kata.checking.learner_calls.LearnerFunction.speed_vs).
A function whose calls compute otherwise (NumPy on the host, a branch the placeholder did
not take) disagrees with it, one whose program calls back to the host is refused, and one
whose trace still raises fails with its error, as any function under `exported` does.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

# What JAX's tracers raise ConcretizationTypeError for (a value not known while traced),
# and the placeholder each is answered with here; `item` answers a zero of the value's dtype.
PLACEHOLDERS: dict[str, Any] = {
    "__float__": 0.0,
    "__int__": 0,
    "__complex__": 0j,
    "__bool__": False,
}
READS = (*PLACEHOLDERS, "item")


def answered_when_traced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, whose scalar reads off its own traced values are answered with placeholders
    while it is traced; called on arrays, `fn` itself, untouched."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        import jax

        leaves = jax.tree.leaves((args, kwargs))
        traces = [leaf._trace for leaf in leaves if isinstance(leaf, jax.core.Tracer)]
        if not traces:
            return fn(*args, **kwargs)
        with _reads_answered(traces):
            return fn(*args, **kwargs)

    return call


@contextlib.contextmanager
def _reads_answered(traces: list[Any]) -> Iterator[None]:
    """JAX's tracers answer scalar reads off a value of `traces` for the block."""
    import jax

    tracer = jax.core.Tracer
    saved = {name: tracer.__dict__[name] for name in READS}
    for name, original in saved.items():
        setattr(tracer, name, _answered(name, original, traces))
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(tracer, name, original)


def _answered(name: str, original: Callable[..., Any], traces: list[Any]) -> Callable[..., Any]:
    """The tracer method `name`: JAX's own answer, or, where it raises ConcretizationTypeError
    for a value of one of `traces` (the traced function's own, not a function it jits), a
    placeholder."""
    from jax.errors import ConcretizationTypeError

    def read(self: Any, *args: Any) -> Any:
        try:
            return original(self, *args)
        except ConcretizationTypeError:
            if not any(self._trace is trace for trace in traces):
                raise
            if name == "item":
                import numpy as np

                return np.zeros((), self.aval.dtype).item()
            return PLACEHOLDERS[name]

    return read
