"""What checks build inputs with, and assertions that explain a wrong answer in the
learner's terms.

Each assertion raises a Finding (an AssertionError, kata.findings) with a message
that names the call, what was expected and what came back, which the grader shows as the
check's verdict, and the kind of failure, which a hint may answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from kata import findings
from kata.checking.call_inputs import unchanged_input_note
from kata.findings import Finding

SHOWN_ELEMENTS = 6


def as_float32(values: Any) -> jax.Array:
    """`values` as a float32 JAX array, converted on the host and then moved.

    `jnp.asarray(values, dtype=jnp.float32)` compiles a program of its own for every new
    shape, and the learner waits for each of them.
    """
    return jax.device_put(np.asarray(values, dtype=np.float32))


def random_array(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> jax.Array:
    """A float32 JAX array of `shape` (a scalar with none), normal with mean 0 and sd `scale`."""
    return as_float32(rng.normal(scale=scale, size=shape))


def show(value: Any) -> str:
    """A short rendering of an array or value for a failure message."""
    try:
        array = np.asarray(value)
    except Exception:
        return repr(value)[:200]
    if array.dtype == object:
        return repr(value)[:200]
    flat = array.reshape(-1)
    numbers = np.array2string(flat[:SHOWN_ELEMENTS], precision=4, separator=", ")
    if flat.size > SHOWN_ELEMENTS:
        numbers = numbers[:-1] + ", …]"
    return f"{numbers} (shape {tuple(array.shape)})" if array.ndim > 1 else numbers


def assert_close(
    actual: Any, expected: Any, call: str, *, rtol: float = 1e-4, atol: float = 1e-5
) -> None:
    """`actual` matches `expected` in shape and, within tolerance, in value; a wrong value
    that is the call's own input, or keeps it where the answer changes it, is told so."""
    try:
        got = np.asarray(actual, dtype=np.float64)
    except Exception as error:
        raise Finding(
            findings.NOT_AN_ARRAY,
            f"{call} should return an array, but returned {type(actual).__name__}: "
            f"{show(actual)} ({error})",
        ) from None
    want = np.asarray(expected, dtype=np.float64)
    if got.shape != want.shape:
        container = (
            f" (a {type(actual).__name__} of {len(actual)}, "
            + ("a 1-tuple: `return y,` with a trailing comma makes one" if len(actual) == 1
               else "not one array")
            + ")"
            if isinstance(actual, tuple | list) and got.ndim == want.ndim + 1
            else ""
        )  # fmt: skip
        raise Finding(
            findings.WRONG_SHAPE,
            f"{call} should return shape {want.shape}, but returned shape {got.shape}{container}",
        )
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        wrong = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        where = tuple(int(i) for i in np.argwhere(wrong)[0]) if got.ndim else ()
        unchanged = unchanged_input_note(actual, got, want, rtol, atol)
        raise Finding(
            findings.YOUR_INPUT if unchanged else findings.WRONG_VALUE,
            f"{call} returned a wrong value: expected {show(want)}, got {show(got)}"
            + (f" (first difference at index {where})" if where else "")
            + unchanged,
        )


def assert_calls_agree(first: Any, second: Any, call: str) -> None:
    """Two calls with the same arguments gave the same numbers: nothing carried over from
    the first to the second (an optimizer state, a model or a counter kept at module level)."""
    first, second = np.asarray(first, np.float64), np.asarray(second, np.float64)
    # One program on the same inputs: the same numbers, up to float32 reassociation.
    same = first.shape == second.shape and np.allclose(first, second, rtol=1e-5, atol=1e-6)
    if not same:
        raise Finding(
            findings.CALLS_DISAGREE,
            f"{call}, called twice with the same arguments, gave {show(first)}, then "
            f"{show(second)}: the second call carried on from state the first left behind (an "
            "optimizer state, a model or a counter kept at module level). Start every call from "
            "its arguments alone: build such state inside the function",
        )


@dataclass(frozen=True)
class CountedProgram:
    """A program's size (`operations`), and `confirm()`, which holds the program to the
    check's reference (kata.checking.learner_calls.LearnerFunction.equation_count)."""

    operations: int
    confirm: Callable[[], None]


def sizes_growing_each_step(
    size_at: Callable[[int], CountedProgram], lengths: Sequence[int], far: int | None = None
) -> dict[int, int] | None:
    """The program sizes `size_at(length)` gives at each of `lengths` (ascending: steps,
    examples), if from each to the next it grew by at least one operation per step added:
    a Python loop, traced once per step, each step adding at least the operations that
    compute it. None as soon as it grows less: the program is bounded, as a loop that
    compiles keeps it. `vmap`, `lax.fori_loop` and `scan` keep their size up to a constant or
    two (equal constants are shared: 09's fori_loop measured 37 operations at 3 steps, 38 at
    30); a scan unrolled u times (`unroll=u`) holds u copies of its step and one for each of
    the T mod u left over, so its size goes up and down with T but stops growing (09's
    rnn_states with unroll=4: 26, 65, 47, 47 at T = 3, 30, 60, 300). Two lengths cannot
    tell that from a loop (26 to 65 grows 39 for 27 steps): each check measures on until a
    length past the unrolls it lets pass, and a full unroll (`unroll=True`) grows as a
    Python loop does, at every length.

    Growing less than a step's worth between two lengths is not yet bounded: a Python loop
    over chunks of 16 rows, each a scan, grew 20 operations from T = 3 to 24 and on without
    end (142 at 120, 1285 at 1200; found by a red team). So where `far` is given (a length
    well past `lengths`), the program there must hold at most twice the most operations
    seen before: an unrolled scan holds at most 2u - 1 copies of its step at any length, and
    some measured length already held u of them; a loop over chunks of c steps holds T / c.

    Nor is a program bounded that stopped growing by shrinking to under half the largest
    seen: it holds fewer copies of its step than a shorter length did, a Python loop below
    some length and a loop that compiles above it (found by a red team: a switch at 100
    steps passed 09's check at T = 3 to 120). Past u steps an unrolled scan holds u to
    2u - 1 copies at every length, so never under half its largest; a switch passes only
    where its Python loop is no longer than an unroll that passes.

    A pass rests on the programs that did not grow, each confirmed (run against the
    reference); sizes that fail need no confirming, since they earn nothing."""
    counted = {lengths[0]: size_at(lengths[0])}
    for shorter, longer in itertools.pairwise(lengths):
        counted[longer] = size_at(longer)
        if counted[longer].operations - counted[shorter].operations < longer - shorter:
            most = max(program.operations for program in counted.values())
            if 2 * counted[longer].operations < most:
                return {length: program.operations for length, program in counted.items()}
            if far is not None:
                counted[far] = size_at(far)
                if counted[far].operations > 2 * most:
                    return {length: program.operations for length, program in counted.items()}
                counted[far].confirm()
            counted[shorter].confirm()
            counted[longer].confirm()
            return None
    return {length: program.operations for length, program in counted.items()}


def observed(tree: Any, kept: Sequence[Any] | None = None) -> dict[str, Any]:
    """What the caller's `tree` holds, read where the call ran (the learner's process, or
    here for arguments that came back across the wire): its structure and, leaf by leaf,
    its place (`['w1']`) and a copy of its values, or why they cannot be read (a donated
    array is deleted). Given `kept`, `jax.tree.leaves(tree)` taken before the call, each
    leaf also says whether it is still that object.

    Copies, since a NumPy view of a buffer would keep a step from donating it.
    """
    leaves, structure = jax.tree_util.tree_flatten_with_path(tree)
    seen = []
    for index, (path, leaf) in enumerate(leaves):
        entry: dict[str, Any] = {"at": jax.tree_util.keystr(path)}
        if kept is not None:
            entry["same"] = index < len(kept) and leaf is kept[index]
        try:
            entry["values"] = np.array(leaf)
        except RuntimeError as error:  # a donated buffer is deleted
            entry["unreadable"] = str(error)
        seen.append(entry)
    return {"structure": str(structure), "leaves": seen}


def assert_untouched(now: dict[str, Any], was: dict[str, Any], what: str, call: str) -> None:
    """The caller's `what`, as `call` left it (`observed` after), still holds what it held
    before (`observed` before): the same structure, the same values, still readable, and,
    where `now` was observed with the leaves kept, the same objects."""
    try:
        _assert_leaves_untouched(now, was, what, call)
    except AssertionError as changed:
        raise Finding(findings.INPUTS_CHANGED, str(changed)) from None


def _assert_leaves_untouched(
    now: dict[str, Any], was: dict[str, Any], what: str, call: str
) -> None:
    assert now["structure"] == was["structure"], (
        f"{call} changed the structure of your {what}: it now looks like "
        f"{now['structure'][:200]}, not {was['structure'][:200]}. Unlike a PyTorch "
        "optimizer's in-place step, a JAX function returns new values and leaves its inputs "
        "as they were"
    )
    for leaf, original in zip(now["leaves"], was["leaves"], strict=True):
        where = f"{what}{leaf['at']}"
        assert leaf.get("same", True), (
            f"{call} replaced {where} in your {what}: that is PyTorch's in-place "
            "`optimizer.step()`. A JAX step leaves the caller's arrays as they were and "
            "returns new ones (`params = step(params, x, y)`)"
        )
        assert "unreadable" not in leaf, (
            f"after {call}, your {where} can no longer be read ({leaf['unreadable']}): the "
            "step gave away (donated) the caller's arrays; leave the inputs usable"
        )
        assert np.array_equal(leaf["values"], original["values"]), (
            f"{call} changed the values of your {where}, as PyTorch's in-place "
            "`p -= lr * g` or `optimizer.step()` does: a JAX function leaves its inputs as "
            "they were and returns new ones"
        )
