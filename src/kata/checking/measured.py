"""Named numbers a check measures (`kata.results.MEASURES`), recorded under the check that
is running.

`measure("speedup", 29.0)` from anywhere in a check: the grader reads each pair back from
the check's report (kata.judge.pytest_plugin) into `CheckResult.measurements`, which the
JSON, Gradescope, the gradebook, the class report and the course's recap read, as numbers,
never parsed out of a line. `kata.checking.fixtures.pytest_configure` registers this module
as a plugin, so every course's checks know which check is running.

A program's size is measured here too: `unbounded_program` says whether a learner's exported
program stays as small as a loop that compiles keeps it, at lengths the judge draws anew
each run (`lengths_drawn`), held to the judge's own program (`judge_program_size`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from kata.results import MEASUREMENT_PROPERTY, MEASURES

if TYPE_CHECKING:
    from kata.checking.expect import CountedProgram

# The check whose body is running (pytest's "call" phase), if any.
_running: list[pytest.Item] = []


@contextmanager
def running(item: pytest.Item) -> Iterator[None]:
    """Measurements made in the block go to `item`'s `user_properties`."""
    _running.append(item)
    try:
        yield
    finally:
        _running.remove(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with running(item):
        yield


def measure(name: str, value: float) -> None:
    """Record `value` as the running check's measurement `name`; outside a check's body
    (a fixture, a plain script) there is nothing to record it under."""
    if name not in MEASURES:
        raise ValueError(f"no measure is named {name!r}: kata.results.MEASURES lists them")
    if _running:
        _running[-1].user_properties.append((MEASUREMENT_PROPERTY, (name, float(value))))


# --- a program's size, at lengths drawn anew each run ----------------------------------------

# How many times the operations of the judge's own program, at the same length, a right answer
# may hold: a scan unrolled up to 16 times, the most 04's lengths let pass (its batched_euclid
# holds 401 operations at 47 examples, 57 times vmap's 7; its per_example_grads 626, 37
# times), and 09's rnn_states as a fori_loop unrolled 13 times over a jitted step of 25
# operations (635 at T = 51, 32 times the scan's 20; measured on JAX 0.10.2). A Python loop
# of k operations a step, padded up to it with operations that compute nothing, looks flat
# only up to SIZE_SLACK times the judge's size over k steps, and each check draws its
# longest length past that for every k a loop can have.
SIZE_SLACK = 64


def lengths_drawn(rng: np.random.Generator, bounds: Sequence[int]) -> list[int]:
    """One length from each range `[bounds[i], bounds[i + 1])`, drawn evenly in log scale:
    lengths that no check file holds, so a program cannot be shaped for them, spread alike
    every run."""
    return [
        min(high - 1, int(np.exp(rng.uniform(np.log(low), np.log(high)))))
        for low, high in itertools.pairwise(bounds)
    ]


def judge_program_size(fn: Callable[..., Any], *args: Any) -> int:
    """Operations in `jax.jit(fn)`'s program for `args`' shapes, the judge's own, exported
    and counted here as a learner's program is (kata.checking.program_walk)."""
    import jax
    from jax import export  # not imported by `import jax` on JAX 0.5

    from kata.checking.program_walk import read_program

    specs = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype), args)
    return read_program(export.export(jax.jit(fn))(*specs).mlir_module()).operations


@dataclass(frozen=True)
class ProgramSizes:
    """A learner's program's operations at each length measured (`sizes`), the judge's own
    at the same lengths (`own`), and the rule they broke (`why`)."""

    sizes: dict[int, int]
    own: dict[int, int]
    why: str

    def said(self, name: str, at: str) -> str:
        """The failure's first sentence: `at` says what a length counts (`"a batch of {}"`)."""
        listed = ", ".join(f"{size} for {at.format(n)}" for n, size in self.sizes.items())
        fewest, most = min(self.own.values()), max(self.own.values())
        own = f"{fewest} at every length" if fewest == most else f"{fewest} to {most}"
        return (
            f"{name}'s traced program holds {listed.replace(' for ', ' operations for ', 1)} "
            f"(the grader's own: {own}): {self.why}"
        )


def unbounded_program(
    measured_at: Callable[[int], tuple[CountedProgram, int]],
    lengths: Sequence[int],
    flat_from: int,
) -> ProgramSizes | None:
    """The sizes, and why they are no bounded program's, where they are not; None where
    they are, every program measured confirmed (run against the check's reference).
    `measured_at(n)`: the learner's counted program for arguments of length `n`
    (`LearnerFunction.equation_count`) and the judge's own program's size for the same
    (`judge_program_size`).

    A program that stops growing is no proof of a bounded one: a Python loop can pad its
    program with operations that compute nothing, as many as its loop holds at a longer
    length, and look flat between two lengths (09's rnn_states, flat from T = 3 to 24 and
    under twice that at 480; a red team's). So the program is measured at every length,
    each drawn anew, in order, and each must pass all three:

    - At most SIZE_SLACK times the judge's own program at that length: what bounds the
      padding, and so the lengths a padded loop looks flat over.
    - From `flat_from` on, the most operations under twice the fewest: a scan unrolled u
      times holds u to 2u - 1 copies of its step once it loops twice or more (at T = u it
      writes no loop: with unroll=40, 288 operations at T = 40, 581 at 79, 302 at 80), and
      a Python loop over chunks of c steps holds T / c of them.
    - No fewer than half the most a shorter length held: a Python loop below some length
      and a loop that compiles above it (09's rnn_states switching at 100 steps).

    Measured shortest first, it stops at the first length that fails: a stub's Python loop
    is exported no further, and a size that fails earns nothing, so it is never run."""
    counted: dict[int, CountedProgram] = {}
    own: dict[int, int] = {}
    for length in sorted(lengths):
        counted[length], own[length] = measured_at(length)
        sizes = {n: program.operations for n, program in counted.items()}
        why = _why_unbounded(sizes, own, flat_from)
        if why:
            return ProgramSizes(sizes, own, why)
    for program in counted.values():
        program.confirm()
    return None


def _why_unbounded(sizes: dict[int, int], own: dict[int, int], flat_from: int) -> str:
    """Which rule the sizes so far break (`unbounded_program`), in words, or "" for none."""
    longest = max(sizes)
    if sizes[longest] > SIZE_SLACK * own[longest]:
        return (
            f"{sizes[longest]} is more than {SIZE_SLACK} times the {own[longest]} operations "
            "of the grader's own program for the same arguments"
        )
    flat = sorted(n for n in sizes if n >= flat_from)
    fewest = min(flat, key=sizes.__getitem__, default=None)
    most = max(flat, key=sizes.__getitem__, default=None)
    if fewest is not None and most is not None and sizes[most] >= 2 * sizes[fewest]:
        first, last = sorted((fewest, most))
        return (
            f"it {'grew' if first == fewest else 'shrank'} from {sizes[first]} to "
            f"{sizes[last]}, by twice or more, where a loop that compiles holds about the "
            "same operations at every length"
        )
    most_before = max((sizes[n] for n in sizes if n < longest), default=0)
    if 2 * sizes[longest] < most_before:
        return (
            f"it shrank from {most_before} to {sizes[longest]}, under half: one kind of "
            "program below some length and another above it, so no one loop"
        )
    return ""
