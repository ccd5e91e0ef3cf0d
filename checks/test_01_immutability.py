"""Checks for 01_immutability: each function returns the updated copy, eagerly and jitted."""

import numpy as np
import pytest

from kata.checking.expect import as_float32, assert_close, random_array


@pytest.mark.task("set_first")
def test_set_first_returns_updated_copy(ex, rng):
    """set_first: returns x with element 0 replaced"""
    x = random_array(rng, 7)
    expected = np.asarray(x).copy()
    expected[0] = 3.5
    assert_close(ex.set_first(x, 3.5), expected, "set_first(x, 3.5)")


@pytest.mark.task("set_first")
def test_set_first_under_jit(ex, rng):
    """set_first: works inside jax.jit"""
    x = random_array(rng, 7)
    expected = np.asarray(x).copy()
    expected[0] = -2.0
    got = ex.set_first.jit()(x, np.float32(-2.0))
    assert_close(got, expected, "jax.jit(set_first)(x, -2.0)")


@pytest.mark.task("scatter_add")
def test_scatter_add_accumulates_repeated_indices(ex, rng):
    """scatter_add: repeated indices add up, like torch.index_add_"""
    x = random_array(rng, 6)
    idx = np.array([1, 4, 1, 1, 0], dtype=np.int32)
    # Index 1's three values of one sign, off 0: an answer that keeps one of them (NumPy's
    # fancy-index +=) is off by ≥ 1. Drawn freely they cancelled (values[0] + values[2]
    # within tolerance of 0) and let it pass in 7e-5 of draws.
    values = rng.normal(size=5)
    values[[0, 2, 3]] = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0, size=3)
    values = as_float32(values)
    expected = np.asarray(x, dtype=np.float64).copy()
    np.add.at(expected, np.asarray(idx), np.asarray(values, dtype=np.float64))
    assert_close(
        ex.scatter_add(x, idx, values), expected, "scatter_add(x, [1, 4, 1, 1, 0], values)"
    )


@pytest.mark.task("scatter_add")
def test_scatter_add_under_jit(ex, rng):
    """scatter_add: works inside jax.jit (no NumPy round trip)"""
    x = random_array(rng, 8)
    idx = rng.integers(0, 8, size=12).astype(np.int32)
    values = random_array(rng, 12)
    expected = np.asarray(x, dtype=np.float64).copy()
    np.add.at(expected, np.asarray(idx), np.asarray(values, dtype=np.float64))
    got = ex.scatter_add.jit()(x, idx, values)
    assert_close(got, expected, "jax.jit(scatter_add)(x, idx, values)")


@pytest.mark.task("scale_row")
def test_scale_row_scales_only_that_row(ex, rng):
    """scale_row: multiplies row i only"""
    m = random_array(rng, 5, 5)
    expected = np.asarray(m).copy()
    expected[2] *= 4.0
    assert_close(ex.scale_row(m, 2, 4.0), expected, "scale_row(m, 2, 4.0)")


@pytest.mark.task("scale_row")
def test_scale_row_under_jit(ex, rng):
    """scale_row: works inside jax.jit"""
    m = random_array(rng, 4, 4)
    expected = np.asarray(m).copy()
    expected[3] *= -0.5
    got = ex.scale_row.jit(static_argnums=(1,))(m, 3, np.float32(-0.5))
    assert_close(got, expected, "jax.jit(scale_row)(m, 3, -0.5)")


@pytest.mark.task("zero_diagonal")
def test_zero_diagonal_zeroes_only_the_diagonal(ex, rng):
    """zero_diagonal: the diagonal becomes 0, everything else stays"""
    m = random_array(rng, 5, 5)
    expected = np.asarray(m).copy()
    np.fill_diagonal(expected, 0.0)
    assert_close(ex.zero_diagonal(m), expected, "zero_diagonal(m) for a 5×5 m")


@pytest.mark.task("zero_diagonal")
def test_zero_diagonal_under_jit(ex, rng):
    """zero_diagonal: works inside jax.jit, for any size of matrix"""
    # Sizes are checked compiled: one program per size, where eager calls would compile
    # every operation inside zero_diagonal anew for each size.
    for n in (1, 3, 6):
        # The diagonal kept off 0: an answer written for 5×5 leaves m[5, 5] alone, which
        # passed as zeroed (|m[5, 5]| < atol 1e-5) in 8e-6 of draws from N(0, 1).
        m = rng.normal(size=(n, n))
        np.fill_diagonal(m, rng.choice([-1.0, 1.0], n) * rng.uniform(0.5, 2.0, n))
        m = as_float32(m)
        expected = np.asarray(m).copy()
        np.fill_diagonal(expected, 0.0)
        got = ex.zero_diagonal.jit()(m)
        assert_close(got, expected, f"jax.jit(zero_diagonal)(m) for a {n}×{n} m")
