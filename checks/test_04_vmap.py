"""Checks for 04_vmap: batched results equal a reference loop, and the traced program does not
grow with the batch (a Python loop over examples traces one copy per example): measured at
batches the judge draws anew each run and held to the size of its own program, a vmap
(kata.checking.measured.unbounded_program)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kata.checking.expect import as_float32, assert_close, random_array
from kata.checking.measured import judge_program_size, lengths_drawn, unbounded_program


def distance(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.sqrt(np.sum((a - b) ** 2))


def np_batched_euclid(pa, pb):
    # Rows of NumPy arrays: a JAX array's rows are each an operation of its own (1.2 s for
    # 200 pairs of rows of pairwise_distances' reference, 0.005 s as NumPy's).
    pa, pb = np.asarray(pa, np.float64), np.asarray(pb, np.float64)
    return np.array([distance(a, b) for a, b in zip(pa, pb, strict=True)])


def np_pairwise(A, B):
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    return np.array([[distance(a, b) for b in B] for a in A])


def close_to(rng, rows):
    """`rows` again, the first exactly (a distance of 0) and the others moved by about 1e-4.

    Distances of 0 and near 0 are in every contract here: `|a|² + |b|² - 2 a·b`, the matmul
    form `torch.cdist` uses for large inputs, cancels there, leaving float32 rounding under a
    square root. Measured, it lands within tolerance of a 1e-4 distance in 0.3–3% of pairs
    (d = 4 to 2), and of a 0 distance in 90%, so every draw carries several moved rows."""
    moved = np.array(rows, dtype=np.float64) + 1e-4 * rng.normal(size=np.shape(rows))
    moved[0] = rows[0]
    return np.asarray(moved, np.float32)


def with_close_rows(rng, a, b, pairs):
    """`b` with rows `pairs[1]` replaced by `close_to` rows `pairs[0]` of `a`."""
    a, b = np.asarray(a), np.array(b)
    b[pairs[1]] = close_to(rng, a[pairs[0]])
    return as_float32(b)


# The grader's own programs, vmaps: what a right answer's size is held to.


def own_euclid(a, b):
    return jnp.sqrt(jnp.sum((a - b) ** 2))


def own_batched_euclid(pa, pb):
    return jax.vmap(own_euclid)(pa, pb)


def own_pairwise(A, B):
    return jax.vmap(jax.vmap(own_euclid, in_axes=(None, 0)), in_axes=(0, None))(A, B)


def own_per_example_grads(params, xs, ys):
    def loss(params, x, y):
        return (jnp.tanh(x @ params["w"] + params["b"]) - y) ** 2

    return jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(params, xs, ys)


# Batch sizes the program is measured at, one drawn from each range anew every run. A scan
# over examples unrolled up to 16 times (`unroll=16`) holds 16 to 31 copies of its step once
# it loops twice, from 32 on, so there its sizes stay within twice. Below, one batch from 8
# that a larger one may not shrink to under half of: a Python loop below some batch and a
# vmap above it holds 88 operations or more there, 12 times the vmap's 7. The largest, 256
# to 511, is past the batch a Python loop padded up to SIZE_SLACK times the grader's vmap
# stays flat over: 40 examples of batched_euclid's 11 operations (448 = 64 × 7), 64 rows of
# A of pairwise_distances' 11 (704 = 64 × 11), 256 of any loop of more than 1.75
# operations an example (2.75 for pairwise_distances, 4.25 for per_example_grads, whose
# loop takes a gradient an example). A stub's Python loop fails at the second or third
# batch, and a size that fails is never compiled.
BATCH_RANGES = (8, 32, 64, 256, 512)
FLAT_FROM = 32


def assert_program_size_bounded(rng, name, measured_at, batch="a batch of {}"):
    """`measured_at(n)`: the program's operations for `n` examples (`batch`: what `n`
    counts), the learner's counted and the grader's own (kata.checking.measured)."""
    sizes = unbounded_program(measured_at, lengths_drawn(rng, BATCH_RANGES), FLAT_FROM)
    assert sizes is None, (
        sizes.said(name, batch) + ". It loops over examples in Python, one copy each. With "
        "jax.vmap the program is the same size for any batch."
    )


# batched_euclid


@pytest.mark.task("batched_euclid")
def test_batched_euclid_matches_loop(ex, rng):
    """batched_euclid: the distance of each pair of rows, equal rows too, for several batches"""
    for n, d in [(1, 3), (5, 2), (33, 4)]:
        pa, pb = random_array(rng, n, d), random_array(rng, n, d)
        rows = rng.choice(n, size=max(1, n // 3), replace=False)
        pb = with_close_rows(rng, pa, pb, (rows, rows))
        expected = np_batched_euclid(pa, pb)
        got = ex.batched_euclid(pa, pb)
        assert_close(got, expected, f"batched_euclid(pa, pb) for a batch of {n}")


@pytest.mark.task("batched_euclid")
def test_batched_euclid_program_size_independent_of_batch(ex, rng):
    """batched_euclid: no Python loop over rows (its program stays vmap's size, any batch)"""

    def measured_at(n):
        pa, pb = random_array(rng, n, 3), random_array(rng, n, 3)
        program = ex.batched_euclid.equation_count(pa, pb, reference=np_batched_euclid)
        return program, judge_program_size(own_batched_euclid, pa, pb)

    assert_program_size_bounded(rng, "batched_euclid", measured_at)


# pairwise_distances


@pytest.mark.task("pairwise_distances")
def test_pairwise_distances_matches_loop(ex, rng):
    """pairwise_distances: an (N, M) matrix of distances, also when N ≠ M and for equal rows"""
    for n, m, d in [(3, 5, 2), (6, 2, 3), (4, 4, 3), (1, 7, 2)]:
        A, B = random_array(rng, n, d), random_array(rng, m, d)
        shared = min(n, m)
        pairs = (rng.choice(n, shared, replace=False), rng.choice(m, shared, replace=False))
        B = with_close_rows(rng, A, B, pairs)
        expected = np_pairwise(A, B)
        got = ex.pairwise_distances(A, B)
        assert_close(got, expected, f"pairwise_distances(A, B) for A {n}×{d}, B {m}×{d}")


@pytest.mark.task("pairwise_distances")
def test_pairwise_distances_program_size_independent_of_batch(ex, rng):
    """pairwise_distances: no Python loop over rows (its program stays vmap's size, however
    many rows A and B have)"""
    # Each side grown alone, the other 2 rows: two nested Python loops export one euclid per
    # pair (992 took 8.6 s of the stub's 12 s), and a loop over either side grows with it.
    for grown, rows in (("A", lambda n: (n, 2)), ("B", lambda n: (2, n))):

        def measured_at(n, rows=rows):
            A, B = (random_array(rng, count, 3) for count in rows(n))
            program = ex.pairwise_distances.equation_count(A, B, reference=np_pairwise)
            return program, judge_program_size(own_pairwise, A, B)

        assert_program_size_bounded(
            rng, "pairwise_distances", measured_at, batch=f"{{}} rows of {grown}"
        )


# per_example_grads: loss = (t - y)² with t = tanh(x·w + b);
# d/dw = 2 (t - y)(1 - t²) x, d/db = 2 (t - y)(1 - t²)

FEATURES = 4  # never a batch size below, so batching params by mistake cannot line up


def example_inputs(rng, n):
    params = {"w": random_array(rng, FEATURES), "b": random_array(rng)}
    return params, random_array(rng, n, FEATURES), random_array(rng, n)


def reference_grads(params, xs, ys):
    w, b = np.asarray(params["w"], dtype=np.float64), float(params["b"])
    rows_w, rows_b = [], []
    xs, ys = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    for x, y in zip(xs, ys, strict=True):
        t = np.tanh(x @ w + b)
        dz = 2 * (t - y) * (1 - t**2)
        rows_w.append(dz * x)
        rows_b.append(dz)
    return {"w": np.array(rows_w), "b": np.array(rows_b)}


def check_structure(grads, n):
    assert isinstance(grads, dict) and set(grads) == {"w", "b"}, (
        "per_example_grads should return a pytree like params (a dict with keys 'w' and "
        f"'b'), but returned {type(grads).__name__}"
        + (f" with keys {sorted(grads)}" if isinstance(grads, dict) else "")
    )
    for name, shape in [("w", (n, FEATURES)), ("b", (n,))]:
        assert np.shape(grads[name]) == shape, (
            f"per_example_grads(...)['{name}'] should have shape {shape}, one gradient per "
            f"example stacked on a leading batch axis of {n}, but has shape "
            f"{np.shape(grads[name])}"
        )


@pytest.mark.task("per_example_grads")
def test_per_example_grads_shapes(ex, rng):
    """per_example_grads: params shared, every leaf gets a leading batch axis"""
    for n in [1, 7]:
        params, xs, ys = example_inputs(rng, n)
        check_structure(ex.per_example_grads(params, xs, ys), n)


@pytest.mark.task("per_example_grads")
def test_per_example_grads_match_loop(ex, rng):
    """per_example_grads: each example's own gradient, for several batch sizes"""
    for n in [1, 7, 20]:
        params, xs, ys = example_inputs(rng, n)
        grads = ex.per_example_grads(params, xs, ys)
        check_structure(grads, n)
        expected = reference_grads(params, xs, ys)
        rows = np.asarray(grads["b"], dtype=np.float64)
        assert n == 1 or not np.allclose(rows, rows[0]), (
            f"per_example_grads gave all {n} examples the same gradient: that is one "
            "gradient for the whole batch, copied, not one gradient per example"
        )
        for name in ["w", "b"]:
            call = f"per_example_grads(params, xs, ys)['{name}'] for {n} examples"
            assert_close(grads[name], expected[name], call)


@pytest.mark.task("per_example_grads")
def test_per_example_grads_program_size_independent_of_batch(ex, rng):
    """per_example_grads: no Python loop over examples (its program stays vmap's size)"""

    def measured_at(n):
        inputs = example_inputs(rng, n)
        program = ex.per_example_grads.equation_count(*inputs, reference=reference_grads)
        return program, judge_program_size(own_per_example_grads, *inputs)

    assert_program_size_bounded(rng, "per_example_grads", measured_at)
