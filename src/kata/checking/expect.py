"""What checks build inputs with, and assertions that explain a wrong answer in the
learner's terms.

Each assertion raises AssertionError with a message that names the call, what was
expected and what came back, which the grader shows as the check's verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.tree_util import KeyPath, PyTreeDef

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
    """`actual` matches `expected` in shape and, within tolerance, in value."""
    try:
        got = np.asarray(actual, dtype=np.float64)
    except Exception as error:
        raise AssertionError(
            f"{call} should return an array, but returned {type(actual).__name__}: "
            f"{show(actual)} ({error})"
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
        raise AssertionError(
            f"{call} should return shape {want.shape}, but returned shape {got.shape}{container}"
        )
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        wrong = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        where = tuple(int(i) for i in np.argwhere(wrong)[0]) if got.ndim else ()
        raise AssertionError(
            f"{call} returned a wrong value: expected {show(want)}, got {show(got)}"
            + (f" (first difference at index {where})" if where else "")
        )


@dataclass(frozen=True)
class Snapshot:
    """A tree as `snapshot` saw it: its structure and, leaf by leaf, its place, the leaf
    object and a host copy of its values."""

    structure: PyTreeDef
    leaves: tuple[tuple[KeyPath, Any, np.ndarray], ...]


def snapshot(tree: Any) -> Snapshot:
    """What the caller's `tree` holds before a learner's function gets it."""
    leaves, structure = jax.tree_util.tree_flatten_with_path(tree)
    return Snapshot(structure, tuple((path, leaf, np.array(leaf)) for path, leaf in leaves))


def assert_unchanged(
    tree: Any,
    before: Snapshot,
    name: str,
    *,
    reshaped: Callable[[Any, Any], str],
    changed: Callable[[str], str],
    replaced: Callable[[str], str] | None = None,
    unreadable: Callable[[str, RuntimeError], str] | None = None,
) -> None:
    """`tree`, the caller's `name`, still holds what `snapshot` saw.

    The messages are each check's own words: `reshaped` gets the tree as it was and as it
    is now; the others get the leaf's place, as `name['w1']`, in JAX's order of leaves.
    Without `replaced`, a leaf swapped for an equal array passes; without `unreadable`, a
    leaf that can no longer be read raises JAX's own error.
    """
    leaves, structure = jax.tree_util.tree_flatten_with_path(tree)
    if structure != before.structure:
        was = jax.tree.unflatten(before.structure, [leaf for _, leaf, _ in before.leaves])
        raise AssertionError(reshaped(was, tree))
    for (path, leaf), (_, original, values) in zip(leaves, before.leaves, strict=True):
        where = f"{name}{jax.tree_util.keystr(path)}"
        if replaced is not None and leaf is not original:
            raise AssertionError(replaced(where))
        try:
            now = np.array(leaf)
        except RuntimeError as error:  # a donated buffer is deleted
            if unreadable is None:
                raise
            raise AssertionError(unreadable(where, error)) from None
        if not np.array_equal(now, values):
            raise AssertionError(changed(where))


def assert_calls_agree(first: Any, second: Any, call: str) -> None:
    """Two calls with the same arguments gave the same numbers: nothing carried over from
    the first to the second (an optimizer state, a model or a counter kept at module level)."""
    first, second = np.asarray(first, np.float64), np.asarray(second, np.float64)
    # One program on the same inputs: the same numbers, up to float32 reassociation.
    same = first.shape == second.shape and np.allclose(first, second, rtol=1e-5, atol=1e-6)
    assert same, (
        f"{call}, called twice with the same arguments, gave {show(first)}, then "
        f"{show(second)}: the second call carried on from state the first left behind (an "
        "optimizer state, a model or a counter kept at module level). Start every call from "
        "its arguments alone: build such state inside the function"
    )


def unrolled(small: int, large: int, added: int) -> bool:
    """Whether a program grew from `small` to `large` operations by at least one for each of
    the `added` steps or examples: a Python loop traced once per step. A loop that compiles
    (`vmap`, `lax.fori_loop`, `scan`) keeps its size, up to a constant or two: equal constants
    are shared in the exported program (09's fori_loop measured 37 operations at 3 steps and
    38 at 30), never one operation per step."""
    return large - small >= added


def observed(tree: Any) -> dict[str, Any]:
    """What a tree holds, taken in the learner's process: its structure and its leaves'
    values (copies: a NumPy view of a buffer would keep a step from donating it), or why
    they cannot be read."""
    leaves, structure = jax.tree_util.tree_flatten(tree)
    values = []
    for leaf in leaves:
        try:
            values.append(np.array(leaf))
        except RuntimeError as error:  # a donated buffer is deleted
            return {"structure": str(structure), "values": values, "unreadable": str(error)}
    return {"structure": str(structure), "values": values, "unreadable": None}


def assert_untouched_by_step(
    after: dict[str, Any], before: dict[str, Any], what: str, call: str
) -> None:
    """`after`, what the caller's `what` held after `call` (`observed`), is what it held
    `before`."""
    assert after["structure"] == before["structure"], (
        f"{call} changed the structure of your {what}: a JAX step returns new values and "
        "leaves its inputs as they were"
    )
    # `after` stops at the first leaf it could not read: the leaves before it count first.
    pairs = zip(after["values"], before["values"], strict=False)
    unchanged = all(np.array_equal(now, was) for now, was in pairs)
    assert unchanged, (
        f"{call} changed the values in your {what}, as PyTorch's `optimizer.step()` does in "
        "place: a JAX step leaves its inputs as they were and returns new ones"
    )
    assert after["unreadable"] is None, (
        f"after {call}, your {what} can no longer be read ({after['unreadable']}): the step "
        "gave away (donated) the caller's arrays; leave the inputs usable"
    )
