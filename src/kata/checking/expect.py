"""What checks build inputs with, and assertions that explain a wrong answer in the
learner's terms.

Each assertion raises a Finding (an AssertionError, kata.findings) with a message
that names the call, what was expected and what came back, which the grader shows as the
check's verdict, and the kind of failure, which a hint may answer.
"""

from __future__ import annotations

import functools
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
    actual: Any,
    expected: Any,
    call: str,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    moved_from: Any = None,
) -> None:
    """`actual` matches `expected` in shape and, within tolerance, in value; a wrong value
    that is the call's own input, or keeps it where the answer changes it, is told so, and
    one that one thing relates to the expected value is told what (`how_it_is_off`; for a
    step's new parameters, `moved_from` the ones it started from: what relates its step)."""
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
        relation = "" if unchanged else how_it_is_off(got, want)
        if moved_from is not None and not unchanged:
            start = np.asarray(moved_from, dtype=np.float64)
            rounding = 4 * float(np.finfo(np.float32).eps) * float(np.abs(start).max(initial=0))
            relation = how_the_step_is_off(got - start, want - start, rounding) or relation
        raise Finding(
            findings.YOUR_INPUT if unchanged else findings.WRONG_VALUE,
            f"{call} returned a wrong value: expected {show(want)}, got {show(got)}"
            + (f" (first difference at index {where})" if where else "")
            + unchanged
            + (f"; {relation}" if relation else ""),
        )


# A relation between a wrong value and the expected one holds where it holds for every
# element to this relative tolerance: a float32 answer against the float64 reference rounds
# at about 1e-6 (sums over a few hundred, 1e-5), and a value right by chance rarely shares
# one factor with all the others. Tight enough to tell 64/63 from sqrt(31/30) (6.5e-4 apart).
RELATION_RTOL = 5e-5
# The counts a factor is read as (a batch, devices, an axis): 2 to this.
LARGEST_COUNT = 4096


def how_it_is_off(got: np.ndarray, want: np.ndarray) -> str:
    """What relates a wrong value to the expected one, where one thing relates every
    element: the same factor (×16: summed where a mean was meant, over 16; 64/63: Bessel's
    correction), the sign flipped, the same offset (a shift not added back), the axes
    swapped. "" where nothing does, or there are too few elements to tell."""
    finite = np.isfinite(got) & np.isfinite(want)
    if finite.sum() < 2 or not finite.all():
        return ""
    square = got.ndim == 2 and got.shape[0] == got.shape[1] > 1
    if square and np.allclose(got, want.T, rtol=RELATION_RTOL, atol=1e-6):
        return "it is the expected value transposed: the axes are swapped"
    factor = _one_factor(got, want)
    if factor is not None:
        return _factor_said(factor)
    offset = got - want
    spread = np.abs(offset - offset.flat[0]).max()
    if abs(offset.flat[0]) > 1e-6 and spread <= RELATION_RTOL * abs(offset.flat[0]):
        return (
            f"every value is off by the same {offset.flat[0]:+.4g}: a constant added or left "
            "out (a shift subtracted for stability and not added back?)"
        )
    return ""


def how_the_step_is_off(step: np.ndarray, want: np.ndarray, slack: float = 0.0) -> str:
    """What relates a step (new parameters less the old) to the expected one, where one
    factor relates every element: ×8, gradients summed over 8 devices (psum) where their
    mean was meant; 1/10, a learning rate ten times smaller (torch's default Adam lr 1e-3
    where 1e-2 was asked); −1, a step uphill. "" where none does."""
    if not (np.isfinite(step).all() and step.size > 1):
        return ""
    factor = _one_factor(step, want, slack)
    if factor is None:
        return ""
    # The median of steps read off float32 params strays from an exact 1/10 by up to ~1e-4;
    # the factors named here (n, 1/n, -1) lie far further apart.
    near = lambda value: abs(factor - value) <= 1e-3 * abs(value)  # noqa: E731
    count = round(factor) if factor > 1 else round(1 / factor) if factor > 0 else 0
    if near(-1.0):
        return "its step goes the other way: uphill, + where - was meant?"
    if count > 1 and near(count):
        return (
            f"its step is {count}× the expected one: gradients summed over {count} (a batch, "
            "devices: psum where pmean was meant) where their mean was meant, or a learning "
            f"rate {count}× the one asked?"
        )
    if count > 1 and near(1 / count):
        return (
            f"its step is 1/{count} of the expected one: a learning rate {count}× smaller than "
            "the one asked (a PyTorch default?), or gradients divided once too often?"
        )
    return f"its step is {factor:.4g}× the expected one, for every parameter alike"


def _one_factor(got: np.ndarray, want: np.ndarray, slack: float = 0.0) -> float | None:
    """The one factor every element of `got` is of `want`'s, to RELATION_RTOL and an
    absolute `slack` (a step read off float32 params carries their rounding), where there
    is one. It is read off the elements of `want` far from 0 (a ratio near 0 says nothing),
    at least half of them, and held on every element: a drawn gradient with a few elements
    near 0 hid 15's ×8 (psum for pmean) in a CI run."""
    telling = np.abs(want) > max(1e-6 * max(1.0, np.abs(want).max()), 10 * slack)
    if telling.sum() < max(2, (want.size + 1) // 2):
        return None
    factor = float(np.median(got[telling] / want[telling]))
    if abs(factor - 1) <= RELATION_RTOL or abs(factor) < 1e-9:
        return None
    off = np.abs(got - factor * want)
    if (off > RELATION_RTOL * np.abs(factor * want) + slack).any():
        return None
    return factor


def _factor_said(factor: float) -> str:
    """A factor in words, with what it usually means: the nearest of the factors that mean
    something, where one is within RELATION_RTOL."""
    distance, said = min(
        (abs(factor - value) / abs(value), said) for value, said in _telling_factors()
    )
    if distance <= RELATION_RTOL:
        return said
    return f"every value is {factor:.4g}× the expected: one factor off for all of them"


@functools.cache
def _telling_factors() -> tuple[tuple[float, str], ...]:
    """The factors a wrong value is often off by, each with what it usually means."""
    said = [(-1.0, "every value has its sign flipped: a minus sign too many or too few")]
    for n in range(2, LARGEST_COUNT + 1):
        said += [
            (
                float(n),
                f"every value is {n}× the expected: a sum where a mean was meant (over {n} "
                "items: a batch, devices, an axis)?",
            ),
            (
                1 / n,
                f"every value is 1/{n} of the expected: a mean where a sum was meant, or "
                f"divided by {n} once too often?",
            ),
        ]
        if n > 2:
            said += [
                (
                    n / (n - 1),
                    f"every value is {n}/{n - 1} of the expected: Bessel's correction (ddof=1, "
                    f"torch's default `unbiased=True`) where the mean over all {n} was meant?",
                ),
                (
                    float(np.sqrt(n / (n - 1))),
                    f"every value is sqrt({n}/{n - 1}) of the expected: a standard deviation "
                    "with Bessel's correction (ddof=1, torch's default) where ddof=0 was meant?",
                ),
            ]
    return tuple(said)


# --- a loop's rounds, counted against the rounds it was asked for ---------------------------
# `jax.lax.fori_loop(1, n, ...)` runs n - 1 rounds, and at n = 1 none: compared at one count,
# its result is only a wrong value (at n = 1, the input unchanged, which reads as an update
# dropped). Compared with the reference run for each count near n, it is the reference's for
# n - 1, and at a second n again one short: the evidence names the bound. `rounds_matched`
# counts the rounds one result holds; `rounds_said` says what the counts at several n share.

# How far past the count asked a result is looked for: an upper bound of n + 1, or a
# `<=` in a hand-written loop's test, runs one more; n + 2 leaves room for both at once.
ROUNDS_PAST = 2


def rounds_matched(
    got: np.ndarray,
    reference_for: Callable[[int], np.ndarray],
    asked: int,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> int | None:
    """The count of rounds, 0 to `asked` + ROUNDS_PAST, whose reference result
    (`reference_for(count)`) `got` is, within tolerance: the closest where several are.
    None where it is none of them (a loop body that is wrong, not its count)."""
    got = np.asarray(got, np.float64)
    closest, count = np.inf, None
    for rounds in range(asked + ROUNDS_PAST + 1):
        want = np.asarray(reference_for(rounds), np.float64)
        if want.shape != got.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
            continue
        off = float(np.max(np.abs(got - want), initial=0.0))
        if off < closest:
            closest, count = off, rounds
    return count


def rounds_said(counted: Sequence[tuple[int, int | None]], carry: str) -> str:
    """What the rounds run at each count asked (`(asked, ran)` pairs, `ran` None where no
    count matched) say about the loop, naming the carried value `carry`; "" where each ran
    the rounds asked, or none could be counted."""
    known = [(asked, ran) for asked, ran in counted if ran is not None]
    if not known or all(ran == asked for asked, ran in known):
        return ""
    runs = ", ".join(f"{ran} for n = {asked}" for asked, ran in known)
    offsets = {ran - asked for asked, ran in known}
    if len(known) > 1 and all(ran == 0 for _, ran in known):
        return (
            f"it ran no rounds at all, whatever n ({runs}): its result is {carry} as given. "
            "Either the loop runs none, as `jax.lax.fori_loop(lower, upper, ...)` does with "
            "lower equal to upper (it runs upper - lower rounds, like Python's range), or its "
            f"result is dropped: JAX's loops return the final {carry} and change nothing in "
            f"place, so keep it: `{carry} = jax.lax.fori_loop(0, n, body, {carry})`"
        )
    if len(known) > 1 and len(offsets) == 1:
        (offset,) = offsets
        return (
            f"it ran n {'-' if offset < 0 else '+'} {abs(offset)} rounds where n were asked "
            f"({runs}): `jax.lax.fori_loop(lower, upper, ...)` runs upper - lower rounds, "
            "like Python's `range(lower, upper)`, so `fori_loop(0, n, body, "
            f"{carry})` runs n"
            + (
                ": starting at 1 (or stopping at n - 1) runs one round short"
                if offset == -1
                else ": the upper bound is left out, as range's is, so an upper bound of n + 1 "
                "(or a while_loop's test `i <= n`) runs one round more"
                if offset == 1
                else ""
            )
        )
    return (
        f"it ran another count of rounds than the n asked ({runs}): "
        "`jax.lax.fori_loop(lower, upper, ...)` runs upper - lower rounds, like Python's "
        f"`range(lower, upper)`, so `fori_loop(0, n, body, {carry})` runs n"
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
