"""Checks for 09_control_flow: loops that run inside the compiled program.

Every reference here is the check's own NumPy loop in float64. A Python loop inside the
function shows twice: a traced count or stopping test makes it raise under `jax.jit`, and
a loop over a fixed count makes the program grow with the count, which the judge counts
in the program the learner's function exports at lengths it draws anew each run
(`equation_count`), held to the size of its own program, a `jax.lax` loop
(kata.checking.measured.unbounded_program).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kata.checking.expect import as_float32, assert_close, random_array, rounds_matched, rounds_said
from kata.checking.learner_calls import count_compilations
from kata.checking.measured import judge_program_size, lengths_drawn, unbounded_program
from kata.findings import Finding

# newton_sqrt: the curriculum's slack for float32 rounding of x * x, relative to a.
ROUNDING_SLACK = 4 * 2.0**-24


def count(n):
    """A loop count as the checks pass it: an int32 scalar, traced under jax.jit."""
    return np.int32(n)


# --- power_iteration --------------------------------------------------------------------


def spd_matrix(rng, size, second=None, scale=1.0):
    """A symmetric matrix with top eigenvalue 1 and the others in [0.1, 0.7] (the second
    `second` where given), all times `scale`.

    The gap makes power iteration contract towards one direction, so float32 rounding
    does not pile up over 1000 rounds and the float64 reference stays comparable.
    """
    basis, _ = np.linalg.qr(rng.normal(size=(size, size)))
    others = rng.uniform(0.1, 0.7, size=size - 1)
    if second is not None:
        others[0] = second
    eigenvalues = np.concatenate([[1.0], others])
    return as_float32(scale * ((basis * eigenvalues) @ basis.T))


def np_power_iteration(m, v, n):
    m, v = np.asarray(m, np.float64), np.asarray(v, np.float64)
    for _ in range(n):
        v = m @ v
        v = v / np.linalg.norm(v)
    return v


# From a v nearly orthogonal to m's top eigenvector, float32 rounding along that eigenvector
# grows with it round after round, and a correct loop strays past the tolerance before it
# converges: drawn freely, at n = 9 in 1.2e-5 of draws, and at n = 50 in 4e-6, mostly on the
# 25%-rescaled m and v the judge runs the exported program on again (measured). Drawn again
# while v has less than this share of its length along it: none of 1e6 draws failed. (At
# the sizes drawn here, 7 or fewer, a v has this share in 47% of draws or more.)
TOP_SHARE = 0.3


def power_inputs(rng, size):
    m = spd_matrix(rng, size)
    top = np.linalg.eigh(np.asarray(m, np.float64))[1][:, -1]
    while True:
        v = random_array(rng, size)
        if abs(top @ np.asarray(v, np.float64)) >= TOP_SHARE * np.linalg.norm(v):
            return m, v


# A second eigenvalue 0.99 of the top one: v still turns towards the top eigenvector at
# round 1000 (its part along the second shrinks by 0.99**100 = 0.37 in 100 rounds, by
# 0.99**1000 = 4e-5 in 1000), so a loop that stops after a fixed count of rounds (100, 500)
# gives another v. The float32 rounding of a correct loop still stays within 7% of
# assert_close's tolerance (measured: the worst of 12000 draws, fori_loop, scan and
# while_loop alike, at every scale below).
SECOND = 0.99


def slow_inputs(rng, size, scale):
    """m with eigenvalues scale and 0.99 * scale on top, and a v with at least TOP_SHARE of
    its length along each of their eigenvectors (so the rounds after 100 move it)."""
    m = spd_matrix(rng, size, second=SECOND, scale=scale)
    top_two = np.linalg.eigh(np.asarray(m, np.float64))[1][:, -2:]
    while True:
        v = random_array(rng, size)
        shares = np.abs(top_two.T @ np.asarray(v, np.float64))
        if np.all(shares >= TOP_SHARE * np.linalg.norm(v)):
            return m, v


# Where the rounds a loop ran are counted: at these n the v of n - 1, n and n + 1 rounds
# lie apart past assert_close's tolerance (the eigenvalue gap, 0.7 at most, shrinks v's
# part off the top eigenvector by 0.7 or less a round), and n = 9 tells a loop one round
# short (8) from one that runs none (0), which n = 1 alone cannot.
COUNTED_AT = (1, 9)
ROUNDS_RUN = "rounds run"


def rounds_counted(jitted, rng):
    """(n, the count of rounds its result is the reference's for, or None) at each n of
    COUNTED_AT, on inputs drawn anew."""
    counted = []
    for n in COUNTED_AT:
        m, v = power_inputs(rng, 6)
        got = jitted(m, v, count(n))
        reference_for = lambda rounds, m=m, v=v: np_power_iteration(m, v, rounds)  # noqa: E731
        counted.append((n, rounds_matched(got, reference_for, n)))
    return counted


@pytest.mark.task("power_iteration")
def test_power_iteration_with_traced_n(ex, rng):
    """power_iteration: n rounds of v = m @ v, v = v / norm(v) under jax.jit, n traced"""
    jitted = ex.power_iteration.jit()
    for n in (1, 9, 1000):
        m, v = power_inputs(rng, 6)
        call = f"jax.jit(power_iteration)(m, v, n={n})"
        try:
            assert_close(jitted(m, v, count(n)), np_power_iteration(m, v, n), call)
        except AssertionError:
            said = rounds_said(rounds_counted(jitted, rng), "v")
            if not said:
                raise
            raise Finding(ROUNDS_RUN, f"{call} returned a wrong value: {said}") from None
    # Near the contract's 1000 rounds, on an m that is slow to settle and of any scale: a
    # loop capped at a fixed count stops early, and a v normalised only once, at the end,
    # grows (shrinks) by the scale every round, past float32's 3e38 (below its 1e-38) in
    # about 40 rounds at a scale of 10 (0.1), and comes back NaN.
    for scale in (1.0, 10.0, 0.1):
        m, v = slow_inputs(rng, 6, scale)
        n = int(rng.integers(900, 1001))
        call = (
            f"jax.jit(power_iteration)(m, v, n={n}) for an m whose top eigenvalues are "
            f"{scale:g} and {SECOND * scale:g}"
        )
        got = jitted(m, v, count(n))
        try:
            assert_close(got, np_power_iteration(m, v, n), call)
        except AssertionError as wrong:
            finite = np.all(np.isfinite(np.asarray(got, np.float64)))
            raise AssertionError(
                f"{wrong}. "
                + (
                    "Without a division by its norm every round, v's length changes by "
                    "about m's top eigenvalue each round and leaves float32's range "
                    "(overflow to inf, or underflow to 0) long before round n: normalise "
                    "inside the loop, as the contract's rounds do"
                    if not finite
                    else "With the second eigenvalue this close to the top one, v still "
                    "moves after hundreds of rounds: run exactly n rounds (the loop's upper "
                    "bound is n, traced), not a fixed number of rounds"
                )
            ) from None
    # m need only be square: on a symmetric one, torch's row-vector habit `v @ m` (which is
    # m.T @ v) gives the same rounds.
    m, v = power_inputs(rng, 6)
    m = as_float32(np.asarray(m, np.float64) + 0.3 * np.triu(rng.normal(size=m.shape), 1))
    for n in (1, 3):
        assert_close(
            jitted(m, v, count(n)),
            np_power_iteration(m, v, n),
            f"jax.jit(power_iteration)(m, v, n={n}) for an m that is not symmetric "
            "(m @ v, not v @ m)",
        )


@pytest.mark.task("power_iteration")
def test_power_iteration_compiles_once_per_shape(ex, rng):
    """power_iteration: a new n costs no compilation, a new shape of m one"""
    jitted = ex.power_iteration.jit()
    small = [power_inputs(rng, 6) for _ in range(3)]
    large = [power_inputs(rng, 7) for _ in range(2)]
    counts = [count(n) for n in (3, 40, 700)]
    with count_compilations() as compiled:
        for (m, v), n in zip(small, counts, strict=True):
            jitted(m, v, n)
        for (m, v), n in zip(large, counts, strict=False):
            jitted(m, v, n)
    assert compiled.count <= 2, (
        f"jax.jit(power_iteration) compiled {compiled.count} times for 5 calls with two shapes "
        f"of m and n = 3, 40, 700, 3, 40 ({', '.join(compiled.names[:4])}): a new value of n "
        "should reuse the program. The loop count must stay a traced value (a loop inside "
        "the program), not a Python int that makes a new program"
    )


def own_power_iteration(m, v, n):
    """The grader's own power_iteration, a fori_loop: what a right answer's size is held to."""

    def one_round(_, v):
        v = m @ v
        return v / jnp.linalg.norm(v)

    return jax.lax.fori_loop(0, n, one_round, v)


# The rounds the program is measured at, one drawn from each range anew every run, over the
# contract's 1 to 1000. n is traced, so a Python loop over it cannot be written; one over a
# fixed count (1000 rounds, those past n masked off) is the same program for every n, and
# its size, held to the grader's fori_loop (16 operations), shows it: 12,000.
ROUND_RANGES = (1, 32, 1001)


@pytest.mark.task("power_iteration")
def test_power_iteration_program_size_does_not_grow(ex, rng):
    """power_iteration: its traced program stays a loop's size, whatever n (drawn in 1-1000)"""
    m, v = power_inputs(rng, 4)

    def measured_at(n):
        program = ex.power_iteration.equation_count(m, v, count(n), reference=np_power_iteration)
        return program, judge_program_size(own_power_iteration, m, v, count(n))

    sizes = unbounded_program(measured_at, lengths_drawn(rng, ROUND_RANGES), flat_from=1)
    assert sizes is None, (
        sizes.said("power_iteration", "n = {}")
        + ". The rounds are unrolled, one copy each: a Python loop over a fixed count of "
        "rounds copies its body into the program however many rounds n asks for. Loop "
        "inside the program: jax.lax.fori_loop(0, n, body, v)"
    )


# --- rnn_states -------------------------------------------------------------------------

HIDDEN, INPUTS = 4, 3


def rnn_inputs(rng, steps, recurrence=1.0):
    """`recurrence` scales w_h. At 1 the cell sits at the edge of chaos, as trained RNNs do;
    over hundreds of steps that amplifies float32's rounding, so a right answer's states
    drift from the float64 reference: past 1e-4 in 3 of 2,000 draws of 480 steps (the
    judge's draws scaled by up to 1.25), up to 4.7e-5 off. At 0.5 each state forgets the
    last one's error: 3.0e-7 at most in 2,000."""
    w_h = random_array(rng, HIDDEN, HIDDEN, scale=recurrence / np.sqrt(HIDDEN))
    w_x = random_array(rng, INPUTS, HIDDEN, scale=1 / np.sqrt(INPUTS))
    h0 = random_array(rng, HIDDEN, scale=0.5)
    xs = random_array(rng, steps, INPUTS)
    return w_h, w_x, h0, xs


def np_rnn_states(w_h, w_x, h0, xs):
    w_h, w_x = np.asarray(w_h, np.float64), np.asarray(w_x, np.float64)
    h, states = np.asarray(h0, np.float64), []
    for x_t in np.asarray(xs, np.float64):
        h = np.tanh(h @ w_h + x_t @ w_x)
        states.append(h)
    return np.stack(states)


@pytest.mark.task("rnn_states")
def test_rnn_states_match_reference(ex, rng):
    """rnn_states: all T states h_t = tanh(h_{t-1} @ w_h + x_t @ w_x), under jax.jit"""
    jitted = ex.rnn_states.jit()
    for steps in (1, 40, 40):
        inputs = rnn_inputs(rng, steps)
        call = f"jax.jit(rnn_states)(w_h, w_x, h0, xs) for xs of shape ({steps}, {INPUTS})"
        got = jitted(*inputs)
        # scan returns (final_carry, stacked_outputs): a learner keeps the wrong one, or both.
        scan_pair = isinstance(got, tuple) and len(got) == 2
        if scan_pair or np.shape(got) == np.shape(inputs[2]):
            raise Finding(
                "scan's pair",
                f"{call} returned "
                + ("a pair, scan's whole result" if scan_pair else "one state, of h0's shape")
                + f", not the {steps} stacked states: `jax.lax.scan(cell, h0, xs)` returns "
                "`(final_carry, stacked_outputs)`, and the states are the stacked outputs: "
                "`_, states = jax.lax.scan(cell, h0, xs)`, with the cell returning `(h, h)`",
            )
        said = states_counted(got, steps)
        if said:
            raise Finding(STATES_COUNTED, f"{call} returned {said}")
        assert_close(got, np_rnn_states(*inputs), call)


STATES_COUNTED = "states counted"


def states_counted(got, steps):
    """Where `got` holds one state more or fewer than the `steps` rows of xs, how many and
    what a loop does to run one more or one fewer step; else "" (a shape off otherwise is
    assert_close's to tell)."""
    rows = np.shape(got)[0] if np.ndim(got) == 2 and np.shape(got)[1] == HIDDEN else None
    if rows is None or abs(rows - steps) != 1:
        return ""
    rows_of_xs = f"{steps} row{'s' if steps != 1 else ''} of xs"
    return f"{rows} states for {rows_of_xs}: one state is asked for each row, h_t after " + (
        "x_t, and h0, the state before the first row, is not one of them (scan's stacked "
        "outputs are the states after each row; stacking h0 in front adds one)"
        if rows > steps
        else "x_t, from the first row on: a loop over range(1, T), or a scan over xs[1:], "
        "runs one step fewer; `jax.lax.scan(cell, h0, xs)` runs one step per row"
    )


def own_rnn_states(w_h, w_x, h0, xs):
    """The grader's own rnn_states, a scan: what a right answer's size is held to."""

    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    return jax.lax.scan(cell, h0, xs)[1]


# Sequence lengths the program is measured at, one drawn from each range anew every run. A
# scan unrolled up to 40 times (`unroll=40`) holds 40 to 79 copies of its cell once it
# loops twice, from T = 80 on, so there its sizes stay within twice. Below, one length from
# 20 that a longer one may not shrink to under half of: a Python loop below some length
# and a scan above it holds 141 operations or more there, 7 times the scan's 20 (drawn from
# 1, a switch at 100 steps would pass in 28% of runs: a loop of 5 steps or fewer, 41% of
# draws, and the second length past 100, 68%). The longest, 640 to 1280, is past the length
# a Python loop padded up to SIZE_SLACK times the grader's 20 operations (1,280) stays flat
# over: 183 steps of 7 operations, 427 of the 3 a step needs at least (a product, a sum, a
# tanh). The stub's Python loop fails at the third length or before, and a size that fails
# is never compiled (compiling 120 steps of it took 4.4 s).
STEP_RANGES = (20, 80, 160, 640, 1281)
FLAT_FROM = 80


@pytest.mark.task("rnn_states")
def test_rnn_states_program_size_does_not_grow(ex, rng):
    """rnn_states: its traced program stays a loop's size, for T drawn from 20 to 1280"""

    def measured_at(steps):
        inputs = rnn_inputs(rng, steps, recurrence=0.5)
        program = ex.rnn_states.equation_count(*inputs, reference=np_rnn_states)
        return program, judge_program_size(own_rnn_states, *inputs)

    sizes = unbounded_program(measured_at, lengths_drawn(rng, STEP_RANGES), FLAT_FROM)
    assert sizes is None, (
        sizes.said("rnn_states", "{} time steps")
        + ". A Python loop over the rows of xs is unrolled while tracing, one copy of the "
        "cell per step, like an RNN cell called from a Python loop in PyTorch: "
        "jax.lax.scan(cell, h0, xs) loops inside the program"
    )


# --- newton_sqrt ------------------------------------------------------------------------


def positive_scalars(rng, size):
    """float32 values spread evenly in log scale over [1e-3, 1e6], both ends included."""
    inner = 10.0 ** rng.uniform(-3, 6, size=size - 2)
    return np.concatenate([[1e-3, 1e6], inner]).astype(np.float32)


def tolerances(rng):
    """The contract's strictest tol, 1e-6, one drawn below STOP_TOLERANCES, and one drawn in
    them: Python floats, as a lambda's closure holds them (drawn anew each run)."""
    low, high = STOP_TOLERANCES
    return (1e-6, float(10.0 ** rng.uniform(-6, np.log10(low))), float(rng.uniform(low, high)))


# Where a loop's stopping test is judged: the top of the contract's tol, [1e-6, 1e-2]. A
# Newton round squares the error, so the x a loop stops at, the first within tol, came from
# one outside it, and from x the judge finds that one (`error_before`). Measured for right
# while_loops started from a, 1, (a + 1) / 2, a / 2 or max(a, 1), testing before each round
# or after it: 0.986 of tol at least in 2.2 million a far from one (float32's rounding of
# x); a loop that ran on past tol (a fixed count of rounds, a stricter tol of its own)
# leaves under half of it.
STOP_TOLERANCES = (5e-3, 1e-2)


def scalars_far_from_one(rng, size):
    """float32 values spread evenly in log scale over [1e-3, 0.1] and [10, 1e6], the ends
    included: where no start a loop would take (a, 1, (a + 1) / 2) is already within tol,
    so that the x it returns came from a round, whether it tests before or after it."""
    logs = rng.uniform(-3, 4, size=size - 2)
    logs = np.where(logs < -1, logs, logs + 2)  # [-3, -1) and [1, 6), as evenly
    return np.concatenate([[1e-3, 1e6], 10.0**logs]).astype(np.float32)


def error_before(x, a):
    """|x' * x' - a| / a for the x' that one Newton round `x = (x' + a / x') / 2` takes to
    `x`, in float64: x' is either root of x'² - 2 x x' + a = 0, x ± sqrt(x * x - a) (their
    product is a), and this is the smaller error of the two, x - sqrt(x * x - a)'s."""
    x64, a64 = np.asarray(x, np.float64), np.asarray(a, np.float64)
    gap = np.sqrt(np.abs(x64 * x64 - a64))
    return 2 * gap * np.abs(x64 - gap) / a64


def assert_stopped_at_tol(x, a, tol, call):
    """`x` is the first of Newton's rounds within tol: the round before it was not."""
    x, a = np.ravel(np.asarray(x, np.float64)), np.ravel(np.asarray(a, np.float64))
    before = error_before(x, a)
    ran_on = before <= tol / 2
    if ran_on.any():
        i = int(np.argmax(ran_on))
        x64, a64 = float(x[i]), float(a[i])
        raise AssertionError(
            f"{call} returned x = {x64:.8g} for a = {a64:.8g}: |x * x - a| = "
            f"{abs(x64 * x64 - a64):.3g}, and the Newton round that gives this x starts from "
            f"an x' with |x' * x' - a| = {before[i] * a64:.3g}, already within tol * a = "
            f"{tol * a64:.3g}"
            + (f" ({int(ran_on.sum())} of {ran_on.size} values)" if ran_on.size > 1 else "")
            + ". The loop ran on "
            "past the first x within tol, as a fixed number of rounds or a stopping test "
            "that does not read tol does: stop as soon as |x * x - a| <= tol * a "
            "(jax.lax.while_loop)"
        )


def assert_square_root(x, a, tol, call):
    x64, a64 = np.asarray(x, np.float64), np.asarray(a, np.float64)
    assert x64.shape == a64.shape, f"{call} should return shape {a64.shape}, got {x64.shape}"
    # Exact in float64: a float32 x has 24 significant bits, its square 48.
    error = np.abs(x64 * x64 - a64)
    allowed = tol * a64 + ROUNDING_SLACK * a64
    wrong = ~((x64 > 0) & (error <= allowed))
    if wrong.any():
        i = np.unravel_index(int(np.argmax(wrong)), wrong.shape) if wrong.ndim else ()
        raise AssertionError(
            f"{call} returned x = {float(x64[i]):.8g} for a = {float(a64[i]):.8g}: "
            f"|x * x - a| = {float(error[i]):.3g}, but it must be positive with "
            f"|x * x - a| <= tol * a = {tol * float(a64[i]):.3g}"
            + ("; it is NaN" if np.isnan(x64[i]) else "")
            + f" ({int(wrong.sum())} of {wrong.size} values wrong)"
        )


def jitted_call(tol):
    return f"jax.jit(lambda a: newton_sqrt(a, {tol:.3g}))(a)"


@pytest.mark.task("newton_sqrt")
def test_newton_sqrt_under_jit(ex, rng):
    """newton_sqrt: under jax.jit, rounds until |x*x - a| <= tol*a and no further, for a in
    [1e-3, 1e6] and tol in [1e-6, 1e-2] drawn anew, tol fixed"""
    # tol static, a Python float, as the lambda's closure would hold it.
    sqrt = ex.newton_sqrt.jit(static_argnums=(1,))
    strictest, drawn, top = tolerances(rng)
    for tol in (strictest, drawn, top):
        for a in positive_scalars(rng, 5):
            assert_square_root(sqrt(a, tol), a, tol, jitted_call(tol))
    for a in scalars_far_from_one(rng, 5):
        x = sqrt(a, top)
        assert_square_root(x, a, top, jitted_call(top))
        assert_stopped_at_tol(x, a, top, jitted_call(top))


@pytest.mark.task("newton_sqrt")
def test_newton_sqrt_under_vmap(ex, rng):
    """newton_sqrt: under jax.jit(jax.vmap(...)) over a batch of a, each one converges"""
    tol = float(10.0 ** rng.uniform(-6, -2))  # the contract's range, drawn anew
    batch = positive_scalars(rng, 64)
    sqrt = ex.newton_sqrt.vmap(in_axes=(0, None)).jit(static_argnums=(1,))
    assert_square_root(
        sqrt(batch, tol),
        batch,
        tol,
        f"jax.jit(jax.vmap(lambda a: newton_sqrt(a, {tol:.3g})))(a)",
    )
