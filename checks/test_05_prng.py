"""Checks for 05_prng: the key alone decides the numbers, and no key is used twice.

The learner's functions get typed keys from `jax.random.key`, made here from the checks'
seeds. The checks that no key is used twice run them with JAX's key-reuse checker on
(`keys_checked()`), so drawing twice from one key, or from a parent key after splitting
it, fails in JAX's own words even where the numbers would look random. That checker is
the learner's process's word, and a key wrapped anew escapes it: the point rests on the
function's program, which the grader reads for keys drawn from twice
(`assert_each_key_used_once`). The other checks judge the numbers alone, so a key reused
costs the one check about keys, whether JAX's checker saw it or not.

The statistical checks use bounds that a correct answer misses with probability under
1e-12 each (worked out next to each bound), and that the wrong answers miss by far.
"""

import math
import random

import jax
import numpy as np
import pytest

from kata.checking.expect import assert_close, show
from kata.checking.learner_calls import in_learner_process


def seeds(rng, count):
    """`count` different seeds for `jax.random.key`."""
    chosen: list[int] = []
    while len(chosen) < count:
        seed = int(rng.integers(0, 2**31 - 1))
        if seed not in chosen:
            chosen.append(seed)
    return chosen


def key(seed):
    # A new key object for every call: the checker tracks each key object it has seen used,
    # so "the same key" twice means two keys made from the same seed.
    return jax.random.key(seed)


def arrays(result):
    """The arrays of a result (one array, or a list or tuple of them), as float64."""
    return [np.asarray(leaf, dtype=np.float64) for leaf in jax.tree.leaves(result)]


def same(first, second):
    a, b = arrays(first), arrays(second)
    return len(a) == len(b) and all(
        x.shape == y.shape and np.allclose(x, y, rtol=1e-6, atol=1e-7)
        for x, y in zip(a, b, strict=True)
    )


def preview(result):
    found = arrays(result)
    return show(found[0]) if found else show(result)


def global_rng_state():
    name, state, position, has_gauss, gauss = np.random.get_state()
    return name, state.tolist(), position, has_gauss, gauss, random.getstate()


def draws(ex, name, key_seeds, *args):
    """`name(key, *args)` with a key made from each seed."""
    fn = getattr(ex, name)
    return [fn(key(seed), *args) for seed in key_seeds]


@in_learner_process
def draws_under_global_seeds(ex, name, seed, *args):
    """Two calls `name(key, *args)` with keys from one seed, NumPy's and Python's global
    generators seeded differently before each, and the generators' states just before and
    after the second call. The generators are left as they were."""
    saved_numpy, saved_python = np.random.get_state(), random.getstate()
    try:
        np.random.seed(1)
        random.seed(1)
        first = getattr(ex, name)(key(seed), *args)
        np.random.seed(2)
        random.seed(2)
        before = global_rng_state()
        second = getattr(ex, name)(key(seed), *args)
        after = global_rng_state()
    finally:
        np.random.set_state(saved_numpy)
        random.setstate(saved_python)
    return first, second, before, after


def draws_under_jit(ex, name, key_seeds, traced, fixed):
    """One `jax.jit` of `name(key, *traced, *fixed)`, `fixed` static, called with a key made
    from each seed."""
    static = tuple(range(1 + len(traced), 1 + len(traced) + len(fixed)))
    fn = getattr(ex, name).jit(static_argnums=static)
    return [fn(key(seed), *traced, *fixed) for seed in key_seeds]


def assert_each_key_used_once(ex, rng, name, *args):
    """`name(key, *args)` uses no key twice: JAX's key-reuse checker, in the learner's
    process, says so in JAX's words; the point rests on the program the grader reads.
    `args` are drawn anew each run (`drawn_shape`, `drawn_sizes`, `walk_lengths`): a
    function can use its keys one way for the arguments a check file holds and another for
    all the rest."""
    (seed,) = seeds(rng, 1)
    # The program first, for a key the learner's process has not met yet.
    program = getattr(ex, name).exported(key(seed), *args)
    getattr(ex, name).keys_checked()(key(seed), *args)
    program.assert_each_key_used_once(name)


# The arguments the key checks draw stay small: the grader follows a key's words to every
# number drawn from them (kata.checking.key_use), in a time that grows with how many there
# are: 0.11 s for two_normals' (2, 3, 4), 0.56 s for (6, 6, 6); 0.25 s for init_layers'
# [5, 7, 7, 3], 0.57 s for four layers 9 wide, 1.45 s 16 wide; 14 s for a dropout of
# 18,432 elements.


def drawn_shape(rng):
    """A shape of two or three axes, each 1 to 5 long, drawn anew: where torch's sizes as
    separate numbers, `normal(key, *shape)`, raise (at () or (5,) they draw what `shape=`
    would; the statistics check draws the scalar's ())."""
    return tuple(int(n) for n in rng.integers(1, 6, size=int(rng.integers(2, 4))))


def drawn_sizes(rng):
    """Layer sizes for 2 to 4 layers (one key for every layer shows from two on), each 1 to
    9 wide, drawn anew (SIZES again once in 20,000 draws)."""
    return [int(n) for n in rng.integers(1, 10, size=int(rng.integers(3, 6)))]


def drawn(ex, rng, name, *args):
    """`name(key, *args)` with a key from a new seed."""
    (result,) = draws(ex, name, seeds(rng, 1), *args)
    return result


def assert_same_key_same_result(ex, rng, name, *args):
    """`name(key, *args)` twice with one seed gives the same result; another seed another."""
    seed, other = seeds(rng, 2)
    first, again, different = draws(ex, name, [seed, seed, other], *args)
    repeatable, varies = same(first, again), not same(first, different)
    assert repeatable, (
        f"{name} gave different results for the same key: "
        f"{preview(first)} then {preview(again)}. The numbers must come "
        "from the key alone, not from a generator that moves on with every call."
    )
    assert varies, (
        f"{name} gave the same result for two different keys: draw the numbers from the key."
    )


def assert_only_the_key_matters(ex, rng, name, *args):
    """Global seeds change nothing, and the call leaves the global generators alone."""
    (seed,) = seeds(rng, 1)
    first, second, before, after = draws_under_global_seeds(ex, name, seed, *args)
    untouched, repeatable = before == after, same(first, second)
    assert untouched, (
        f"{name} drew from NumPy's or Python's global random generator (np.random, random), "
        "the torch.manual_seed way: in JAX every random number comes from the key argument."
    )
    # NumPy's and Python's generators were left alone (checked above), so what moved is
    # some other state: a key or generator kept at module level.
    assert repeatable, (
        f"{name} gave different results on two calls with the same key: it draws from "
        "something besides its key argument, like a key or generator kept at module level "
        "(the torch.manual_seed habit), which moves on with every call. The result must "
        "depend on the key alone."
    )


def assert_different_keys_under_jit(first, second, what):
    """`first` and `second` came from one jitted function, called with different keys."""
    varies = not same(first, second)
    assert varies, (
        f"{what} gave the same result for two different keys. Under jax.jit a global "
        "generator (np.random) runs once, while tracing, and its numbers are frozen into the "
        "compiled function: draw them from the key."
    )


def normal_cdf(x):
    return 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def distance_to_normal(samples):
    """Largest gap between the samples' empirical CDF and the standard normal's (KS)."""
    x = np.sort(samples)
    n = x.size
    cdf = normal_cdf(x)
    return float(max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max()))


def assert_standard_normal(samples, what, *, mean_within, mean_square, distance_within):
    x = np.asarray(samples, dtype=np.float64).ravel()
    mean, mean_square_got = float(x.mean()), float(np.mean(x**2))
    assert abs(mean) <= mean_within, (
        f"{what} average {mean:.3f}; standard-normal numbers average 0 "
        f"(a correct answer stays within ±{mean_within} for {x.size} numbers)"
    )
    low, high = mean_square
    assert low <= mean_square_got <= high, (
        f"{what} have mean square {mean_square_got:.3f}; standard-normal numbers have "
        f"variance 1 (a correct answer stays within [{low}, {high}] for {x.size} numbers)"
    )
    distance = distance_to_normal(x)
    assert distance <= distance_within, (
        f"{what} do not look standard normal: their distribution is {distance:.3f} away from "
        f"it (a correct answer stays under {distance_within} for {x.size} numbers)"
    )


# Few distinct shapes: eager JAX compiles each random draw once per new shape (~0.3 s here).
SMALL = (2, 3, 4)
SIZES = [5, 7, 7, 3]
BIG_SIZES = [256, 128, 128, 128]


def cosine(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


# ---------------------------------------------------------------------------- two_normals


@pytest.mark.task("two_normals")
def test_two_normals_uses_each_key_once(ex, rng):
    """two_normals: uses no key twice, in JAX's checker and in its program, for any shape"""
    assert_each_key_used_once(ex, rng, "two_normals", drawn_shape(rng))


@pytest.mark.task("two_normals")
def test_two_normals_are_standard_normal(ex, rng):
    """two_normals: two arrays of `shape` (a scalar's () too), each standard normal"""
    for shape in [SMALL, (100, 200), ()]:
        result = drawn(ex, rng, "two_normals", shape)
        assert len(result) == 2, f"two_normals(key, {shape}) should return two arrays"
        for half in result:
            assert np.shape(half) == shape, (
                f"two_normals(key, {shape}) returned an array of shape {np.shape(half)}"
            )
    # 20,000 numbers per sample. A correct answer misses a bound with probability:
    # mean (exactly normal, sd 0.0071): 2e-17; mean square (chi-square, Chernoff): 4e-21;
    # distance (Dvoretzky-Kiefer-Wolfowitz, 2·exp(-2·n·0.03²)): 5e-16.
    first, second = drawn(ex, rng, "two_normals", (100, 200))
    for name, sample in (("first", first), ("second", second)):
        assert_standard_normal(
            sample,
            f"the {name} sample of two_normals(key, (100, 200))",
            mean_within=0.06,
            mean_square=(0.9, 1.1),
            distance_within=0.03,
        )


@pytest.mark.task("two_normals")
def test_two_normals_halves_differ(ex, rng):
    """two_normals: the two samples are independent, not copies of each other"""
    first, second = drawn(ex, rng, "two_normals", (100, 200))
    first, second = np.asarray(first, np.float64), np.asarray(second, np.float64)
    assert not np.allclose(first, second), (
        "two_normals returned the same numbers twice: each sample needs a key of its own "
        "(split the key)."
    )
    # For independent samples of 20,000 numbers, |cosine| > 0.1 has probability < 1e-43.
    similarity = cosine(first, second)
    assert abs(similarity) < 0.1, (
        f"the two samples of two_normals are related (correlation {similarity:.2f}): "
        "draw each from its own key, split from `key`."
    )


@pytest.mark.task("two_normals")
def test_two_normals_same_key_same_samples(ex, rng):
    """two_normals: the same key gives the same samples, another key other samples"""
    assert_same_key_same_result(ex, rng, "two_normals", SMALL)


@pytest.mark.task("two_normals")
def test_two_normals_uses_only_the_key(ex, rng):
    """two_normals: no global generator (NumPy's, Python's): only the key decides"""
    assert_only_the_key_matters(ex, rng, "two_normals", SMALL)


@pytest.mark.task("two_normals")
def test_two_normals_under_jit(ex, rng):
    """two_normals: works under jax.jit, where different keys still give different samples"""
    drawn_first, *pair = draws_under_jit(ex, "two_normals", seeds(rng, 3), (), (SMALL,))
    first, second = drawn_first
    assert np.shape(first) == np.shape(second) == SMALL, "jax.jit(two_normals) changed shapes"
    assert_different_keys_under_jit(*pair, "jax.jit(two_normals)")


# ---------------------------------------------------------------------------- init_layers


@pytest.mark.task("init_layers")
def test_init_layers_uses_each_key_once(ex, rng):
    """init_layers: uses no key twice, in JAX's checker and in its program, for any sizes"""
    assert_each_key_used_once(ex, rng, "init_layers", drawn_sizes(rng))


@pytest.mark.task("init_layers")
def test_init_layers_shapes(ex, rng):
    """init_layers: one (sizes[i], sizes[i+1]) matrix per layer"""
    for sizes in (SIZES, BIG_SIZES):
        layers = list(drawn(ex, rng, "init_layers", sizes))
        want = [(m, n) for m, n in zip(sizes[:-1], sizes[1:], strict=True)]
        got = [tuple(np.shape(w)) for w in layers]
        assert got == want, f"init_layers(key, {sizes}) gave shapes {got}, expected {want}"


@pytest.mark.task("init_layers")
def test_init_layers_spread(ex, rng):
    """init_layers: weights are normal around 0 with spread 1/sqrt(fan_in)"""
    sizes = BIG_SIZES
    layers = list(drawn(ex, rng, "init_layers", sizes))
    assert len(layers) == 3, f"init_layers(key, {sizes}) should give 3 matrices"
    # Each layer holds ≥ 16,384 weights. For a correct answer, mean·sqrt(fan_in) beyond ±0.1
    # has probability < 1e-36, and mean square·fan_in outside [0.8, 1.25] < 1e-82.
    for i, w in enumerate(layers):
        w = np.asarray(w, dtype=np.float64)
        fan_in = sizes[i]
        mean = float(w.mean()) * math.sqrt(fan_in)
        assert abs(mean) <= 0.1, (
            f"layer {i} of init_layers(key, {sizes}) is not centred on 0: its mean is "
            f"{mean:.2f} / sqrt(fan_in)"
        )
        spread = math.sqrt(float(np.mean(w**2)) * fan_in)
        assert 0.8 <= spread**2 <= 1.25, (
            f"layer {i} of init_layers(key, {sizes}), shape {w.shape}, has spread "
            f"{spread:.3f} / sqrt(fan_in); expected 1 / sqrt(fan_in) = 1 / sqrt({fan_in}) "
            "(fan_in is sizes[i], the number of inputs of the layer)"
        )


@pytest.mark.task("init_layers")
def test_init_layers_layers_differ(ex, rng):
    """init_layers: layers of equal shape get different weights (a key per layer)"""
    sizes = BIG_SIZES
    layers = [np.asarray(w, np.float64) for w in drawn(ex, rng, "init_layers", sizes)]
    assert len(layers) == 3, f"init_layers(key, {sizes}) should give 3 matrices"
    # Two independent 128×128 layers: |cosine| > 0.1 has probability < 1e-35.
    similarity = cosine(layers[1], layers[2])
    assert abs(similarity) < 0.1, (
        f"layers 1 and 2 of init_layers(key, {sizes}), both 128×128, are related "
        f"(correlation {similarity:.2f}): every layer needs its own key, split from `key`."
    )


@pytest.mark.task("init_layers")
def test_init_layers_same_key_same_weights(ex, rng):
    """init_layers: the same key gives the same weights, another key other weights"""
    assert_same_key_same_result(ex, rng, "init_layers", SIZES)


@pytest.mark.task("init_layers")
def test_init_layers_uses_only_the_key(ex, rng):
    """init_layers: no global generator (NumPy's, Python's): only the key decides"""
    assert_only_the_key_matters(ex, rng, "init_layers", SIZES)


@pytest.mark.task("init_layers")
def test_init_layers_under_jit(ex, rng):
    """init_layers: works under jax.jit, where different keys still give different weights"""
    layers, *pair = draws_under_jit(ex, "init_layers", seeds(rng, 3), (), (SIZES,))
    got = [tuple(np.shape(w)) for w in layers]
    assert got == [(5, 7), (7, 7), (7, 3)], f"jax.jit(init_layers)(key, {SIZES}) gave {got}"
    assert_different_keys_under_jit(*pair, "jax.jit(init_layers)")


# -------------------------------------------------------------------------------- dropout


def positive_inputs(rng, shape):
    # Bounded away from 0, so that a zero in the output always means "dropped".
    return np.asarray(rng.uniform(0.5, 2.0, size=shape), dtype=np.float32)


def drawn_dropout_inputs(rng):
    """x of 128 to 256 elements and a rate in [0.1, 0.9], drawn anew: the program must give
    two keys two masks, and two masks of n elements agree with probability 0.82**n at most
    (1e-11 at 128)."""
    return positive_inputs(rng, (int(rng.integers(128, 257)),)), float(rng.uniform(0.1, 0.9))


@pytest.mark.task("dropout")
def test_dropout_uses_each_key_once(ex, rng):
    """dropout: uses no key twice, in JAX's checker and in its program, for any x and rate"""
    assert_each_key_used_once(ex, rng, "dropout", *drawn_dropout_inputs(rng))


@pytest.mark.task("dropout")
def test_dropout_zeroes_about_rate(ex, rng):
    """dropout: zeroes about `rate` of the elements, spread at random"""
    x = positive_inputs(rng, (400, 500))
    # 200,000 elements: a zeroed fraction off `rate` by more than 0.01 has probability
    # 2·exp(-2·200000·0.01²) < 1e-17 (Hoeffding); by more than 0.015 in either half of the
    # rows (100,000 elements each), < 1e-19.
    for rate in (0.2, 0.7):
        out = np.asarray(drawn(ex, rng, "dropout", x, rate))
        assert out.shape == x.shape, (
            f"dropout(key, x, {rate}) should keep x's shape {x.shape}, got {out.shape}"
        )
        dropped = out == 0
        fraction = float(dropped.mean())
        hint = ""
        if abs(fraction - (1 - rate)) <= 0.01:
            hint = ": it keeps a fraction `rate` instead; `rate` is the probability to DROP"
        assert abs(fraction - rate) <= 0.01, (
            f"dropout(key, x, rate={rate}) zeroed {fraction:.1%} of the elements; expected "
            f"about {rate:.0%}{hint}"
        )
        for half, rows in (("first", dropped[:200]), ("second", dropped[200:])):
            part = float(rows.mean())
            assert abs(part - rate) <= 0.015, (
                f"dropout(key, x, rate={rate}) zeroed {part:.1%} of the {half} half of the "
                f"rows and {fraction:.1%} overall: the zeros should fall at random"
            )


@pytest.mark.task("dropout")
def test_dropout_scales_kept_elements(ex, rng):
    """dropout: scales the kept elements by 1/(1-rate)"""
    x = positive_inputs(rng, (400, 500))
    for rate in (0.25, 0.6):
        out = np.asarray(drawn(ex, rng, "dropout", x, rate), dtype=np.float64)
        assert out.shape == x.shape, f"dropout(key, x, {rate}) changed the shape to {out.shape}"
        kept = out != 0
        assert kept.any(), f"dropout(key, x, {rate}) zeroed every element"
        assert_close(
            out[kept],
            np.asarray(x, np.float64)[kept] / (1.0 - rate),
            f"dropout(key, x, rate={rate}) on the kept elements (inverted dropout divides "
            f"them by 1 - rate = {1 - rate:g}, so the expected value stays x)",
            rtol=1e-5,
            atol=1e-6,
        )


@pytest.mark.task("dropout")
def test_dropout_same_key_same_mask(ex, rng):
    """dropout: the same key gives the same mask, another key another mask"""
    x = positive_inputs(rng, (200,))
    assert_same_key_same_result(ex, rng, "dropout", x, 0.5)


@pytest.mark.task("dropout")
def test_dropout_uses_only_the_key(ex, rng):
    """dropout: no global generator (NumPy's, Python's): only the key decides"""
    x = positive_inputs(rng, (200,))
    assert_only_the_key_matters(ex, rng, "dropout", x, 0.5)


@pytest.mark.task("dropout")
def test_dropout_under_jit(ex, rng):
    """dropout: under jax.jit, different keys give different masks"""
    x = positive_inputs(rng, (200,))
    out, *pair = draws_under_jit(ex, "dropout", seeds(rng, 3), (x,), (0.5,))
    assert np.shape(out) == x.shape, f"jax.jit(dropout) returned shape {np.shape(out)}"
    assert_different_keys_under_jit(*pair, "jax.jit(dropout)")


# ---------------------------------------------------------------------------- random_walk


def steps_of(positions):
    positions = np.asarray(positions, dtype=np.float64)
    return np.diff(positions, prepend=0.0)


def walk_lengths(rng):
    """Two walk lengths drawn anew, one in 2-8 and one in 9-16, one odd and one even: a key
    reused from one step to the next shows in either, and a walk cannot be right at the
    lengths a check file holds alone, nor at one parity. Not 1: one step shows no reuse,
    and a walk that drops its first step draws nothing at 1, so its verdict here would
    be the draw's (it flipped between two gradings of one file). Not past 16: the grader compiles
    each program to run it, and a right Python loop that splits its key every step took
    it 0.6 s at 8 steps, 1.8 s at 16, 5.5 s at 32 and 24 s at 64, past the 10 s a program
    may take (measured)."""
    short, long = int(rng.integers(2, 9)), int(rng.integers(9, 17))
    if long % 2 == short % 2:
        long += 1 if long < 16 else -1
    return short, long


@pytest.mark.task("random_walk")
def test_random_walk_uses_each_key_once(ex, rng):
    """random_walk: uses no key twice, in JAX's checker and in its program, at two n drawn"""
    for n in walk_lengths(rng):
        assert_each_key_used_once(ex, rng, "random_walk", n)


@pytest.mark.task("random_walk")
def test_random_walk_returns_n_positions(ex, rng):
    """random_walk: returns `n` positions, for n from 1 to 1000"""
    for n in (1, 20, 1000):
        walk = drawn(ex, rng, "random_walk", n)
        assert np.shape(walk) == (n,), (
            f"random_walk(key, {n}) should return {n} positions, shape ({n},); "
            f"got shape {np.shape(walk)}"
        )


@pytest.mark.task("random_walk")
def test_random_walk_steps_are_standard_normal(ex, rng):
    """random_walk: the steps between positions are independent standard normals"""
    n = 1000
    walk = drawn(ex, rng, "random_walk", n)
    assert np.shape(walk) == (n,), f"random_walk(key, {n}) returned shape {np.shape(walk)}"
    # A walk that gives out each position before its step starts at exactly 0 and drops
    # the last step: one step in 1000, too few for the statistics below.
    assert np.asarray(walk, dtype=np.float64)[0] != 0.0, (
        f"random_walk(key, {n})[0] is 0: the first position is where the first step lands, "
        f"and the last is after all {n} steps (in a scan, give out the position after the "
        "step: `new = position + step; return new, new`)"
    )
    steps = steps_of(walk)
    distinct = len(np.unique(steps))
    assert distinct > n // 2, (
        f"random_walk(key, {n}) took only {distinct} different steps in {n}: every step "
        "needs a fresh key (split it, and carry the new key forward)"
    )
    # A correct answer misses: mean (sd 0.032) beyond ±0.3: 2e-21; mean square outside
    # [0.7, 1.4] (chi-square, Chernoff): 5e-13; distance over 0.12 (DKW): 6e-13.
    assert_standard_normal(
        steps,
        f"the steps of random_walk(key, {n})",
        mean_within=0.3,
        mean_square=(0.7, 1.4),
        distance_within=0.12,
    )


@pytest.mark.task("random_walk")
def test_random_walk_same_key_same_walk(ex, rng):
    """random_walk: the same key gives the same walk, another key another walk"""
    assert_same_key_same_result(ex, rng, "random_walk", 20)


@pytest.mark.task("random_walk")
def test_random_walk_uses_only_the_key(ex, rng):
    """random_walk: no global generator (NumPy's, Python's): only the key decides"""
    assert_only_the_key_matters(ex, rng, "random_walk", 20)


@pytest.mark.task("random_walk")
def test_random_walk_under_jit(ex, rng):
    """random_walk: works under jax.jit, where different keys still give different walks"""
    walk, *pair = draws_under_jit(ex, "random_walk", seeds(rng, 3), (), (8,))
    assert np.shape(walk) == (8,), f"jax.jit(random_walk)(key, 8) returned {np.shape(walk)}"
    assert_different_keys_under_jit(*pair, "jax.jit(random_walk)")
