"""Checks for 08_gotchas: one group per symptom, each failing with the symptom, then the fix.

- gate: a Python `if` on a traced value (ConcretizationTypeError under jax.jit);
- noisy_copies: one key for every draw (identical copies; JAX's key-reuse checker, and the
  program read by the grader);
- fit: a training loop never compiled (as slow as eager);
- row_sums: one compilation per input length.
"""

import time
from collections import Counter
from collections.abc import Mapping

import jax
import numpy as np
import pytest

from kata.checking.expect import assert_close, random_array, show
from kata.checking.learner_calls import (
    LearnerError,
    count_compilations,
    forget_compiled_programs,
    in_learner_process,
    type_name,
)
from kata.checking.mlp_reference import (
    NAMES,
    assert_trains_alike_twice,
    jax_sgd_step,
    make_params,
    np_trajectory,
    regression_data,
    to_numpy,
)
from kata.checking.speed import Eager, assert_faster, format_ratio
from kata.learner_side.compile_counts import FASTEST_COMPILATION_SECONDS
from kata.learner_side.scalar_reads import answered_when_traced

# Measured here (JAX 0.10.2, 2 busy cores): the compiled loop 59-315× faster than under
# jax.disable_jit(), the loop without jit 3-4×.
SPEED_MARGIN = 8.0
FIT_STEPS = 5
COPIES = 8  # noisy_copies: n, and the shape of x, shared by the checks so one compile serves
X_SHAPE = (1024,)
MAX_COMPILATIONS = 10  # power-of-two buckets: 8 for lengths up to 100, 9 to 200; per length, 20
NEW_LENGTHS = 20  # rows of lengths from 1 to LONGEST, none twice
LONGEST = 100
# Where the kernel cannot count the learner's process's CPU (under gVisor every clock reads
# 0: kata.cpu_clocks), no compile count is corroborated and the judge's own clock decides:
# a call answered sooner than any compilation takes compiled nothing on its way
# (kata.learner_side.compile_counts.FASTEST_COMPILATION_SECONDS), so 10 of 20 new lengths
# answered that soon show that at most 10 compiled. Load only slows a call, so it can fail
# a right answer, never pass a wrong one: one too slow for that is called again, from cold,
# after a pause, on 20 lengths up to twice LONGEST that none of the calls before had (so a
# process that keeps what it compiled despite `forget_compiled_programs` gains nothing from
# the tries before), CLOCK_TRIES times in all at most. Measured, the solution's tries of 20
# calls: on a TPU VM under gVisor (its clocks dead), 14 to 17 calls under 4 ms in each of
# 12, 6 of them beside two busy loops on the two cores it was held to; here, 2 cores at a
# load of 6 to 10 from other work, with two busy loops of ours or none, 5 tries of 12 had
# 10 or more each time (every call that compiled nothing, 1.0 to 2.0 ms, in the quietest),
# the others 0 to 9: at that rate 10 tries all fail a right answer once in 230 gradings
# (0.58 ** 10), and 19 gradings of 19 passed there, 14 of them beside the busy loops.
CLOCK_TRIES = 10
CLOCK_PAUSE_SECONDS = 0.5


def seed(rng):
    return int(rng.integers(0, 2**31))


# --- run in the learner's process -----------------------------------------------------------


@in_learner_process
def copies_from_seed(ex, key_seed, x, n, check_key_reuse):
    """noisy_copies(key, x, n) with the key of `key_seed`, JAX's key-reuse checker on or off."""
    with jax.debug_key_reuse(check_key_reuse):
        return jax.block_until_ready(ex.noisy_copies(jax.random.key(key_seed), x, n))


@in_learner_process
def fit_reading_scalars(ex):
    """fit, kept in the learner's process, each Python number it reads off its own traced
    values answered while it is traced (kata.learner_side.scalar_reads): a right loop that
    reads its losses as floats is exported too, and its timed calls held to that program."""
    return answered_when_traced(ex.fit)


def judges_fit(params, x, y, steps):
    """The judge's own training loop, run eagerly (`Eager`): the speed check's baseline."""
    for _ in range(steps):
        params = jax_sgd_step(params, x, y)
    return params


# --- gate -----------------------------------------------------------------------------------


@pytest.mark.task("gate")
def test_gate_under_jit(ex, rng):
    """gate: x where x > threshold, else 0, inside jax.jit"""
    jitted = ex.gate.jit()
    for shape in ((50,), (6, 7)):
        for t in (0.0, 0.7, -0.4):
            threshold = np.float32(t)
            x = on_the_threshold(random_array(rng, *shape), threshold)
            want = np.where(x > threshold, x, 0.0)
            assert_close(
                jitted(x, threshold),
                want,
                f"jax.jit(gate)(x, {t}) with x {shape}, some entries exactly {t} (kept only "
                "where x > threshold, strictly)",
            )


@pytest.mark.task("gate")
def test_gate_eagerly(ex, rng):
    """gate: the same result called directly, with a Python float threshold"""
    x = on_the_threshold(random_array(rng, 20), np.float32(0.25))
    want = np.where(x > np.float32(0.25), x, 0.0)
    assert_close(ex.gate(x, 0.25), want, "gate(x, 0.25), some entries of x exactly 0.25")


def on_the_threshold(x, threshold):
    """`x` with every fifth entry exactly `threshold`, where `>` and `>=` differ."""
    x = np.array(x, dtype=np.float32)
    x.flat[::5] = threshold
    return x


# --- noisy_copies ---------------------------------------------------------------------------


def copies(ex, key_seed, x, n):
    got = np.asarray(copies_from_seed(ex, key_seed, x, n, False), dtype=np.float64)
    want_shape = (n, *x.shape)
    assert got.shape == want_shape, (
        f"noisy_copies(key, x, {n}) with x {tuple(x.shape)} should return shape {want_shape}, "
        f"but returned shape {got.shape}"
    )
    return got


@pytest.mark.task("noisy_copies")
def test_noisy_copies_are_all_different(ex, rng):
    """noisy_copies: n copies of x, each with noise of its own"""
    x = random_array(rng, *X_SHAPE)
    n = COPIES
    got = copies(ex, seed(rng), x, n)
    noise = got - np.asarray(x, dtype=np.float64)
    same = [(i, j) for i in range(n) for j in range(i + 1, n) if np.allclose(noise[i], noise[j])]
    if len(same) == n * (n - 1) // 2:
        raise AssertionError(
            f"all {n} copies are identical ({show(got[0])} each): every copy drew its noise "
            "from the same key, and the same key always gives the same numbers (there is no "
            "global RNG state that moves on). Split the key, one key per copy: "
            "`jax.random.split(key, n)`"
        )
    assert not same, (
        f"copies {same[0][0]} and {same[0][1]} of noisy_copies(key, x, {n}) are identical: "
        "a key was used for more than one copy. Give each copy its own key "
        "(`jax.random.split(key, n)`)"
    )
    assert not np.allclose(noise, 0.0), (
        f"noisy_copies(key, x, {n}) returned x unchanged: add standard-normal noise"
    )


@pytest.mark.task("noisy_copies")
def test_noisy_copies_noise_is_standard_normal(ex, rng):
    """noisy_copies: the noise is standard normal (mean 0, standard deviation 1)"""
    x = random_array(rng, *X_SHAPE, scale=3.0)
    got = copies(ex, seed(rng), x, COPIES)
    noise = got - np.asarray(x, dtype=np.float64)
    mean, std = noise.mean(), noise.std()
    assert abs(mean) < 0.1 and 0.9 < std < 1.1, (
        f"the noise of noisy_copies has mean {mean:.3f} and standard deviation {std:.3f} over "
        f"{noise.size} values; standard-normal noise has mean 0 and standard deviation 1 "
        "(`jax.random.normal`)"
    )
    within = noise.reshape(COPIES, -1).std(axis=1)
    assert np.all((within > 0.8) & (within < 1.2)), (
        f"within each copy the noise should vary element by element (standard deviation 1), "
        f"but the copies' standard deviations are {show(within)}: draw noise of x's shape "
        "for each copy"
    )


@pytest.mark.task("noisy_copies")
def test_noisy_copies_depend_only_on_the_key(ex, rng):
    """noisy_copies: the same key gives the same copies; another key, other copies"""
    x = random_array(rng, *X_SHAPE)
    s = seed(rng)
    # This check reuses a key on purpose: `copies` runs without the key-reuse checker.
    first = copies(ex, s, x, COPIES)
    again = copies(ex, s, x, COPIES)
    other = copies(ex, s + 1, x, COPIES)
    same_key_same_copies = np.array_equal(first, again)
    assert same_key_same_copies, (
        "noisy_copies gave different copies for the same key: the noise must come from the "
        "key alone, not from a global RNG (np.random, random) or hidden state"
    )
    assert not np.allclose(first, other), (
        "noisy_copies gave the same copies for two different keys: draw the noise with "
        "`jax.random` from the key you are given"
    )


@pytest.mark.task("noisy_copies")
def test_noisy_copies_use_no_key_twice(ex, rng, tell):
    """noisy_copies: no key is used twice, in JAX's checker and in its program"""
    x = random_array(rng, 3, 2)  # a shape no other check uses
    key_seed = seed(rng)
    # The program first, for values the learner's process has not met yet. JAX's checker
    # runs in that process, and a key wrapped anew escapes it: the point rests on the
    # program, read by the grader.
    program = ex.noisy_copies.exported(jax.random.key(key_seed), x, 5)
    # A KeyReuseError raised here means one key fed two draws: split it instead.
    try:
        got = copies_from_seed(ex, key_seed, x, 5, True)
    except LearnerError as error:
        if not error.is_a("KeyReuseError"):
            tell(
                "noisy_copies(key, x, 5) with x of shape (3, 2), run with JAX's key-reuse "
                f"checker on, raised {error.types[0]} before any key was reused: the error "
                "below is in the computation, not in how the keys are used"
            )
        raise
    assert np.asarray(got).shape == (5, 3, 2), (
        f"noisy_copies(key, x, 5) with x (3, 2) should return shape (5, 3, 2), "
        f"but returned shape {np.asarray(got).shape}"
    )
    program.assert_each_key_used_once("noisy_copies")


# --- fit ------------------------------------------------------------------------------------


@pytest.mark.task("fit")
def test_fit_matches_reference_sgd(ex, rng):
    """fit: returns (params, losses) of `steps` SGD steps with lr 0.1, like 07's train"""
    # Two outputs: 07's loss is the mean over the batch and the outputs alike.
    params = make_params(rng, n_out=2)
    x, y = regression_data(rng, n_out=2)
    steps = 20
    call = f"fit(params, x, y, {steps})"
    result = ex.fit(params, x, y, steps)
    assert isinstance(result, tuple) and len(result) == 2, (
        f"{call} should return a pair (params, losses), but returned {type_name(result)}"
    )
    trained, losses = result
    assert isinstance(trained, Mapping) and all(k in trained for k in NAMES), (
        f"{call}[0] should be the trained params dict (w1, b1, w2, b2), but is {show(trained)}"
    )
    losses = np.asarray(losses, dtype=np.float64).reshape(-1)
    assert losses.size == steps, f"{call}[1] should hold {steps} losses, but holds {losses.size}"
    want_params, want_losses = np_trajectory(params, x, y, steps)
    before = np.allclose(losses, want_losses[:-1], rtol=1e-3, atol=1e-5)
    after = np.allclose(losses, want_losses[1:], rtol=1e-3, atol=1e-5)
    assert before or after, (
        f"{call}[1] should be the loss before (or after) each step: expected "
        f"{show(want_losses[:-1])}, got {show(losses)}"
    )
    for k in NAMES:
        assert_close(trained[k], want_params[k], f"{call}[0]['{k}']", rtol=1e-3, atol=1e-4)


@pytest.mark.task("fit")
@pytest.mark.speed
def test_fit_beats_eager(ex, rng, record_property):
    """fit: at least 8× faster than the same loop run eagerly"""
    params = make_params(rng)
    x, y = regression_data(rng)
    # A right fit may read its losses as Python floats, which JAX refuses under a trace:
    # those reads answered, it is exported all the same, and whatever it raises when traced
    # fails here (NumPy on the host that raised on purpose, held to the reference alone,
    # passed 116-374×; issue #57).
    fit = ex.invoke(fit_reading_scalars(ex), name="fit")
    assert_faster(
        record_property,
        fit.speed_vs(
            Eager(judges_fit, (params, x, y, FIT_STEPS)),
            params,
            x,
            y,
            FIT_STEPS,
            reference=lambda p, x, y, steps: np_trajectory(to_numpy(p), x, y, steps)[0],
            margin=SPEED_MARGIN,
            path=(0,),
        ),
        labels=("fit", "fit under jax.disable_jit()"),
        failure=lambda result: slow_fit_said(result, recompiled_by_fit(ex, params, x, y)),
    )


def recompiled_by_fit(ex, params, x, y):
    """The compilations JAX reported for a fit call on shapes a call before it has already
    seen: none for a step jitted once, one for a step jitted anew in each call. Reported,
    not the kernel's CPU: an eager loop's calls, with a suite beside them, cost what a
    compilation does (one eager fit read as 1 compilation so)."""
    ex.fit(params, x, y, FIT_STEPS)
    with count_compilations(measured=False) as seen:
        ex.fit(params, x, y, FIT_STEPS)
    return len(seen.reported)


def slow_fit_said(result, recompiled):
    """Why fit is slow, by what was measured: a fit that compiles its step in every call
    (a `jax.jit` of a new function inside it), or one whose steps run eagerly."""
    slow = (
        f"fit is only {format_ratio(result.ratio)}× faster than the same loop under "
        f"jax.disable_jit() (needs {SPEED_MARGIN:g}×): "
    )
    if recompiled:
        return slow + (
            f"each fit call compiles its step again ({recompiled} compilation(s) in a second "
            "call on the same shapes). A `jax.jit` made inside fit, of a function or lambda "
            "made anew each call, is new to JAX, whose compiled programs are kept per "
            "function. Jit the step once, at module level, and call that in the loop"
        )
    return slow + (
        "its steps still run one operation at a time, as in PyTorch eager mode (a second "
        "call compiled nothing). Compile the training step with `jax.jit` (defined once, "
        "outside the loop)"
    )


# --- row_sums -------------------------------------------------------------------------------


def make_rows(rng, lengths):
    return [random_array(rng, n) for n in lengths]


def sums_of(ex, rows, call):
    got = np.asarray(ex.row_sums(rows), dtype=np.float64).reshape(-1)
    want = np.array([np.asarray(r, dtype=np.float64).sum() for r in rows])
    assert_close(got, want, call, rtol=1e-4, atol=1e-4)


def long_row(rng):
    """A row longer than any fixed maximum a tokenizer would pick (MAX_LEN 128 to 4096),
    whose last element, which every truncation drops, is 50 with the sign of the rest's sum:
    the tolerance (1e-4 of a sum under 1000) is far below it, however the rest adds up."""
    row = np.array(random_array(rng, int(rng.integers(4097, 12001))))
    row[-1] = np.float32(50.0) * np.sign(row[:-1].sum(dtype=np.float64))
    return row


@pytest.mark.task("row_sums")
def test_row_sums_values(ex, rng):
    """row_sums: the sum of each row, for rows of lengths 0 to thousands"""
    rows = make_rows(rng, [3, 1, 17, 64, 9, 100])
    sums_of(ex, rows, "row_sums(rows) for rows of lengths [3, 1, 17, 64, 9, 100]")
    sums_of(ex, rows[3:4], "row_sums([row]) for one row of length 64")
    # The contract bounds neither end of a row's length: an empty row sums to 0.
    edges = [rows[0], long_row(rng), np.zeros(0, np.float32)]
    lengths = [row.shape[0] for row in edges]
    sums_of(
        ex, edges, f"row_sums(rows) for rows of lengths {lengths} (past any MAX_LEN, and empty)"
    )


def sums_of_new_lengths(ex, rng, lengths, measured=True):
    """row_sums on rows of `lengths`, one row a call, from cold: the compilations its
    process reported, and the kernel saw, held to at most MAX_COMPILATIONS."""
    rows = make_rows(rng, lengths)  # built before counting: making arrays compiles too
    forget_compiled_programs(ex)  # count from cold, whatever ran before
    with count_compilations(measured) as compiled:
        for row in rows:  # one call per row, as rows of new lengths keep arriving
            sums_of(ex, [row], f"row_sums([row]) for one row of length {row.shape[0]}")
    names = Counter(compiled.names)
    listed = ", ".join(f"{name} ×{count}" for name, count in names.most_common(4))
    assert compiled.count <= MAX_COMPILATIONS, (
        f"compiled {compiled.count} times for {len(lengths)} lengths ({listed}): jax.jit "
        "compiles a new program for every new input shape, and eager jnp operations compile "
        "per shape too. Pad each row, with NumPy on the host, to one of a few sizes (say the "
        "next power of two) and sum the padded rows with one jitted function, so it compiles "
        f"once per size (at most {MAX_COMPILATIONS} here)"
    )
    return compiled


@pytest.mark.task("row_sums")
def test_row_sums_compiles_a_bounded_number_of_times(ex, rng):
    """row_sums: 20 different lengths compile at most 10 times, not once per length"""
    first = [int(n) for n in rng.permutation(np.arange(1, LONGEST + 1))[:NEW_LENGTHS]]
    compiled = sums_of_new_lengths(ex, rng, first)
    if compiled.kernel_counted:
        return  # the count above rests on the kernel's count of the process's CPU
    fast_enough = NEW_LENGTHS - MAX_COMPILATIONS
    unused = [int(n) for n in rng.permutation(np.arange(1, 2 * LONGEST + 1)) if n not in first]
    best, tries = compiled, 1
    while best.answered_too_fast_to_compile < fast_enough and tries < CLOCK_TRIES:
        time.sleep(CLOCK_PAUSE_SECONDS)
        these, unused = unused[:NEW_LENGTHS], unused[NEW_LENGTHS:]
        compiled = sums_of_new_lengths(ex, rng, these, measured=False)
        tries += 1
        if compiled.answered_too_fast_to_compile > best.answered_too_fast_to_compile:
            best = compiled
    took = sorted(best.judge_seconds)[fast_enough - 1]
    assert best.answered_too_fast_to_compile >= fast_enough, (
        f"of {NEW_LENGTHS} calls, each on a row of a new length, only "
        f"{best.answered_too_fast_to_compile} came back sooner than any compilation takes "
        f"({FASTEST_COMPILATION_SECONDS * 1e3:g} ms; the {fast_enough}th soonest took "
        f"{took * 1e3:.1f} ms), the best of {tries} tries from cold: row_sums seems to "
        "compile for most new lengths. The CPU clocks of this machine do not tick, so the "
        "grader times each call on its own clock instead of counting the CPU it cost. A "
        "busy machine slows calls that compile nothing too: if row_sums pads with NumPy to "
        "a few sizes, check again"
    )


@pytest.mark.task("fit")
def test_fit_twice_from_the_same_params_agrees(ex, rng):
    """fit: two calls from the same params give the same losses (no state kept between)"""
    params = make_params(rng)
    x, y = regression_data(rng)
    assert_trains_alike_twice(ex.fit, "fit", params, x, y, 5)
