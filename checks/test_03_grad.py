"""Checks for 03_grad: derivatives against closed forms, argnums, value_and_grad on a pytree."""

import jax
import numpy as np
import pytest

from kata.checking.expect import as_float32, assert_close, random_array


def same_values(got, expected):
    """Whether `got` has the shape and, within tolerance, the values of `expected`."""
    try:
        got = np.asarray(got, dtype=np.float64)
    except Exception:
        return False
    return got.shape == np.shape(expected) and np.allclose(got, expected, atol=1e-4)


def points(rng, n=200):
    return as_float32(rng.uniform(-3.0, 3.0, size=n))


# df, d2f: f(x) = sin(x)², f'(x) = 2 sin(x) cos(x) = sin(2x), f''(x) = 2 cos(2x)


@pytest.mark.task("df")
def test_df_is_the_first_derivative(ex, rng):
    """df: equals f'(x) = sin(2x) at random points"""
    xs = points(rng)
    expected = np.sin(2 * np.asarray(xs, dtype=np.float64))
    assert_close(ex.df.vmap()(xs), expected, "jax.vmap(df)(xs)", atol=1e-4)


@pytest.mark.task("d2f")
def test_d2f_is_the_second_derivative(ex, rng):
    """d2f: equals f''(x) = 2 cos(2x) at random points"""
    xs = points(rng)
    x64 = np.asarray(xs, dtype=np.float64)
    got = ex.d2f.vmap()(xs)
    assert not same_values(got, np.sin(2 * x64)), (
        "d2f returned f'(x) = sin(2x), the first derivative, not the second"
    )
    assert_close(got, 2 * np.cos(2 * x64), "jax.vmap(d2f)(xs)", atol=1e-4)


# dloss_db: loss = mean((x @ w + b)²), d/db = 2 mean(x @ w + b), d/dw = 2 xᵀ(x @ w + b) / n


def linear_inputs(rng, n, d):
    w = random_array(rng, d)
    b = as_float32(rng.normal() + 1.0)
    x = random_array(rng, n, d)
    return w, b, x


@pytest.mark.task("dloss_db")
def test_dloss_db_is_gradient_wrt_b(ex, rng):
    """dloss_db: equals d loss / d b, the gradient for the second argument"""
    for n, d in [(8, 3), (20, 5)]:
        w, b, x = linear_inputs(rng, n, d)
        w64, x64 = np.asarray(w, dtype=np.float64), np.asarray(x, dtype=np.float64)
        out = x64 @ w64 + float(b)
        got = ex.dloss_db(w, b, x)
        if same_values(got, 2 * x64.T @ out / n):
            raise AssertionError(
                "dloss_db returned d loss / d w: jax.grad differentiates with respect to the "
                "first argument (w) unless told which one to use; we want b, the second."
            )
        if same_values(got, 2 * out[:, None] * w64 / n):
            raise AssertionError(
                "dloss_db returned d loss / d x, the third argument: argnums counts from 0, "
                "so b, the second, is argnums=1."
            )
        assert_close(got, 2 * out.mean(), f"dloss_db(w, b, x) with x of shape {(n, d)}")


# loss_and_grads: the MLP loss and its gradients, computed by hand in float64


def mlp_inputs(rng, n=16, d=4, h=6, k=2):
    # Every parameter has a shape of its own, so a transposed or swapped gradient shows.
    params = {
        "w1": random_array(rng, d, h),
        "b1": random_array(rng, h),
        "w2": random_array(rng, h, k),
        "b2": random_array(rng, k),
    }
    return params, random_array(rng, n, d), random_array(rng, n, k)


def mlp_reference(params, x, y):
    """Loss and gradients of mean((tanh(x w1 + b1) w2 + b2 - y)²) by hand, in NumPy."""
    p = {name: np.asarray(value, dtype=np.float64) for name, value in params.items()}
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    hidden = np.tanh(x @ p["w1"] + p["b1"])
    error = hidden @ p["w2"] + p["b2"] - y
    d_prediction = 2 * error / error.size
    d_z1 = (d_prediction @ p["w2"].T) * (1 - hidden**2)
    grads = {
        "w1": x.T @ d_z1,
        "b1": d_z1.sum(axis=0),
        "w2": hidden.T @ d_prediction,
        "b2": d_prediction.sum(axis=0),
    }
    return np.mean(error**2), grads


def unpack(result, call):
    assert isinstance(result, (tuple, list)) and len(result) == 2, (
        f"{call} should return a pair (loss, grads), but returned {type(result).__name__}"
    )
    loss = result[0]
    assert not isinstance(loss, (dict, list, tuple)) and np.ndim(loss) == 0, (
        f"{call} should return (loss, grads) with the scalar loss first, but its first "
        f"element is a {type(loss).__name__}; are loss and grads swapped?"
    )
    return result


@pytest.mark.task("loss_and_grads")
def test_loss_and_grads_loss_value(ex, rng):
    """loss_and_grads: the loss is the MLP loss of params on (x, y)"""
    params, x, y = mlp_inputs(rng)
    loss, _ = unpack(ex.loss_and_grads(params, x, y), "loss_and_grads(params, x, y)")
    expected, _ = mlp_reference(params, x, y)
    assert_close(loss, expected, "the loss from loss_and_grads(params, x, y)")


@pytest.mark.task("loss_and_grads")
def test_loss_and_grads_structure(ex, rng):
    """loss_and_grads: grads has exactly the structure and shapes of params"""
    params, x, y = mlp_inputs(rng)
    _, grads = unpack(ex.loss_and_grads(params, x, y), "loss_and_grads(params, x, y)")
    want, got = jax.tree_util.tree_structure(params), jax.tree_util.tree_structure(grads)
    assert got == want, (
        f"grads should be a pytree shaped like params, {want}, but is {got}: "
        "one gradient per parameter, under the same keys"
    )
    for name, value in params.items():
        assert np.shape(grads[name]) == value.shape, (
            f"grads['{name}'] should have the shape of params['{name}'], {value.shape}, "
            f"but has shape {np.shape(grads[name])}"
        )


@pytest.mark.task("loss_and_grads")
def test_loss_and_grads_gradient_values(ex, rng):
    """loss_and_grads: every gradient matches d loss / d param, under jax.jit too"""
    for call in ["loss_and_grads(params, x, y)", "jax.jit(loss_and_grads)(params, x, y)"]:
        fn = ex.loss_and_grads if call.startswith("loss") else ex.loss_and_grads.jit()
        params, x, y = mlp_inputs(rng)
        loss, grads = unpack(fn(params, x, y), call)
        expected_loss, expected = mlp_reference(params, x, y)
        assert_close(loss, expected_loss, f"the loss from {call}")
        assert isinstance(grads, dict) and set(grads) == set(expected), (
            f"the grads from {call} should be a dict with the keys of params, "
            f"{sorted(expected)}, but are {type(grads).__name__}"
        )
        for name, value in expected.items():
            assert_close(grads[name], value, f"grads['{name}'] from {call}")
