"""How many rounds a loop ran, counted against the rounds it was asked for.

`jax.lax.fori_loop(1, n, ...)` runs n - 1 rounds, and at n = 1 none: compared at one count,
its result is only a wrong value (at n = 1, the input unchanged, which reads as an update
dropped). Compared with the reference run for each count near n, it is the reference's for
n - 1, and at a second n again one short: the evidence names the bound. `rounds_matched`
counts the rounds one result holds; `rounds_said` says what the counts at several n share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

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
