"""The course's MLP in NumPy, float64, gradient by hand: the reference 07, 08, 12 and 16
judge by, with Adam (12 and 16).

`tanh(x @ w1 + b1) @ w2 + b2` on a params dict `w1, b1, w2, b2`, with mean squared error.
Checks compare the learner's JAX values against these, never against the learner's own code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from kata.checking.expect import (
    as_float32,
    assert_calls_agree,
    assert_close,
    random_array,
    show,
)
from kata.checking.learner_calls import type_name

NAMES = ("w1", "b1", "w2", "b2")
# `optax.adam(1e-2)` with its default betas and eps, as 12 and 16 ask for.
ADAM_LEARNING_RATE = 1e-2
BETA1, BETA2, EPSILON = 0.9, 0.999, 1e-8


def make_params(
    rng: np.random.Generator, n_in: int = 4, n_hidden: int = 3, n_out: int = 1, scale: float = 0.5
) -> dict[str, jax.Array]:
    """Fresh float32 params for the MLP, normal * `scale`."""
    shapes = {"w1": (n_in, n_hidden), "b1": (n_hidden,), "w2": (n_hidden, n_out), "b2": (n_out,)}
    return {k: random_array(rng, *s, scale=scale) for k, s in shapes.items()}


def regression_data(
    rng: np.random.Generator, batch: int = 16, n_in: int = 4, n_out: int = 1
) -> tuple[jax.Array, jax.Array]:
    """(x, y): a smooth target with an offset, which the MLP fits well."""
    x = rng.normal(size=(batch, n_in))
    y = np.sin(x @ (rng.normal(size=(n_in, n_out)) / 2)) + 1.0
    return as_float32(x), as_float32(y)


# Adam's first step moves each entry by lr * g / (|g| + 1e-8): where an entry of the gradient
# cancels to within ~1e-6 of 0, float32's rounding of g (up to ~6e-8) moves that step by more
# than a step's tolerance, or flips it. Drawn freely, a correct first step failed in 7e-6 to
# 1.5e-5 of draws (12's adam_step, 16's train_step; measured); with no entry below this, the
# rounding moves it by 6e-8 at most.
SMALLEST_FIRST_GRADIENT = 1e-5


def adam_start(
    rng: np.random.Generator, n_hidden: int = 3, batch: int = 16
) -> tuple[dict[str, jax.Array], tuple[jax.Array, jax.Array]]:
    """(params, (x, y)) for Adam's first step from a fresh state, drawn again (under 1% of
    draws) while an entry of the gradient lies within SMALLEST_FIRST_GRADIENT of 0. Params
    and batch are drawn together: a w2 entry near 0 holds its row of w1's gradient there."""
    while True:
        params, data = make_params(rng, n_hidden=n_hidden), regression_data(rng, batch)
        grads = np_grads(to_numpy(params), *data)
        if min(np.abs(g).min() for g in grads.values()) >= SMALLEST_FIRST_GRADIENT:
            return params, data


# A leaf whose every gradient so far was exactly 0 gets Adam's update lr * m / (sqrt(v) + eps)
# with m exactly 0: it comes back bit for bit. AdamW's weight decay (1e-4 * lr) moves it by
# 1e-6 of itself a step, 8 float32 ulps or more: far below a step's tolerance, far above this.
UNMOVED = 3e-7
# `small_gradients`' targets: about this size, all positive, so that the output's gradient
# lies between 2.5e-8 and 7.5e-8, where Adam's default eps (1e-8) sets the first step's size
# (lr * g / (|g| + eps): 0.7 lr to 0.9 lr; eps=1e-6 gives under 0.07 lr).
SMALL_TARGET = 2.5e-8


def small_gradients(
    rng: np.random.Generator, zeroed: tuple[str, ...], batch: int = 16
) -> tuple[dict[str, jax.Array], tuple[jax.Array, jax.Array]]:
    """(params, (x, y)) where the leaves `zeroed`, set to 0, make some leaves' gradients
    exactly 0 and the output's gradients tiny: what tells Adam from AdamW and its eps.

    The shapes are `adam_start`'s (one output), so the step the learner's process compiled
    for the ordinary steps beside it is reused. The output is exactly 0
    (b2 = 0, and w2 = 0 or every hidden unit tanh(0) = 0), so the residual is -y exactly,
    and y is positive and about SMALL_TARGET: b2's gradient, -2 * mean(y), is about 5e-8,
    where eps decides Adam's first step. With w2 = 0, w1 and b1 get a gradient of exactly 0
    (d_hidden = d_out @ w2.T); with w1 = b1 = 0, w2 does (its gradient is hidden.T @ d_out).
    No gradient cancels against large values, so float32 moves a first step by 1e-8 at most
    (lr * error / eps)."""
    params = make_params(rng)
    for k in (*zeroed, "b2"):
        params[k] = as_float32(np.zeros(np.shape(params[k])))
    x = random_array(rng, batch, np.shape(params["w1"])[0])
    y = as_float32(rng.uniform(0.5, 1.5, size=(batch, np.shape(params["b2"])[0])) * SMALL_TARGET)
    return params, (x, y)


def assert_unmoved(
    got: Mapping[str, Any], p: Mapping[str, Any], names: Mapping[str, str], call: str, why: str
) -> None:
    """The leaves `names` (key: how the message names it), whose every gradient was exactly
    0 (`why`), came back from an Adam step as they were."""
    for k, name in names.items():
        now, was = np.asarray(got[k], np.float64), np.asarray(p[k], np.float64)
        if np.shape(now) != np.shape(was):
            return  # the step's own comparison says so
        if np.allclose(now, was, rtol=UNMOVED, atol=0):
            continue
        moved = np.abs(now - was)
        with np.errstate(divide="ignore", invalid="ignore"):
            change = float(np.nanmax(moved / np.abs(was)))
        raise AssertionError(
            f"{call} moved {name} by up to {change:.3g} of its value, but its gradient was "
            f"exactly 0 ({why}): Adam's step lr * m / (sqrt(v) + eps) is then exactly 0, so "
            "it must come back as it was" + _why_moved(now, was, moved, change)
        )


def _why_moved(now: np.ndarray, was: np.ndarray, moved: np.ndarray, change: float) -> str:
    """The likely cause of a move of leaves whose gradient was 0, or nothing."""
    if change < 1e-5 and np.all(np.abs(now) <= np.abs(was)):
        return (
            ". It shrank toward 0 by about lr * 1e-4 = 1e-6 a step: that is AdamW's weight "
            "decay (optax.adamw, or a decay added to the updates). The contract asks for "
            "optax.adam(1e-2), which has none"
        )
    if np.median(moved) > ADAM_LEARNING_RATE / 2:
        return (
            f". Most entries moved by about lr = {ADAM_LEARNING_RATE}, Adam's full first step, "
            "as if their gradient were not 0: something was added to the gradient, such as "
            "a weight decay (PyTorch's Adam(weight_decay=...) adds weight_decay * param to "
            "it). The contract asks for optax.adam(1e-2) on the loss's gradient alone"
        )
    return ""


def assert_loss_before(value: Any, p: Mapping[str, np.ndarray], x: Any, y: Any, call: str,
                       spelled: str) -> None:  # fmt: skip
    """A step's loss (its result's third part) is the mean squared error of `p` on (x, y)
    before the step; one summed over the outputs is named as such, next to `spelled`, how
    the exercise writes the mean."""
    want, outputs = np_loss(p, x, y), np.shape(y)[-1]
    summed = _summed_over_outputs(value, want, outputs)
    assert summed is None, (
        f"{call}[2], the loss before the step, is {summed:.6g}: {outputs} "
        f"times the mean squared error {want:.6g}, so the squared errors were summed over the "
        f"{outputs} outputs and averaged over the batch alone. The mean squared error averages "
        f"over the batch and the outputs alike: `{spelled}`"
    )
    assert_close(value, want, f"{call}[2], the loss before the step,", rtol=1e-5)


def _summed_over_outputs(value: Any, want: float, outputs: int) -> float | None:
    """The loss `value` where it is `outputs` times the mean squared error `want` (squared
    errors summed over the outputs, averaged over the batch), else None."""
    try:
        got = np.asarray(value, np.float64).reshape(-1)
    except (TypeError, ValueError):
        return None  # not a number: assert_close says so
    if outputs > 1 and got.size == 1 and np.isclose(got[0], outputs * want, rtol=1e-5, atol=0):
        return float(got[0])
    return None


def to_numpy(params: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.asarray(params[k], dtype=np.float64) for k in NAMES}


def np_forward(p: Mapping[str, np.ndarray], x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(hidden activations, output)."""
    hidden = np.tanh(x @ p["w1"] + p["b1"])
    return hidden, hidden @ p["w2"] + p["b2"]


def np_loss(p: Mapping[str, np.ndarray], x: Any, y: Any) -> float:
    return np.mean((np_forward(p, np.asarray(x, np.float64))[1] - np.asarray(y, np.float64)) ** 2)


def np_grads(p: Mapping[str, np.ndarray], x: Any, y: Any) -> dict[str, np.ndarray]:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    hidden, out = np_forward(p, x)
    d_out = 2.0 * (out - y) / out.size
    d_hidden = (d_out @ p["w2"].T) * (1.0 - hidden**2)
    return {
        "w1": x.T @ d_hidden,
        "b1": d_hidden.sum(axis=0),
        "w2": hidden.T @ d_out,
        "b2": d_out.sum(axis=0),
    }


@dataclass(frozen=True)
class NumpyAdam:
    """Adam's state for the leaves it trains: step count and both moment estimates."""

    count: int
    mu: dict[str, np.ndarray]
    nu: dict[str, np.ndarray]

    @classmethod
    def fresh(cls, p: Mapping[str, np.ndarray], names: tuple[str, ...] = NAMES) -> NumpyAdam:
        return cls(
            0, {k: np.zeros_like(p[k]) for k in names}, {k: np.zeros_like(p[k]) for k in names}
        )

    def step(
        self, p: Mapping[str, np.ndarray], x: Any, y: Any
    ) -> tuple[dict[str, np.ndarray], NumpyAdam, float]:
        """(new params, new state, loss before the step); untrained leaves stay as they are."""
        grads = np_grads(p, x, y)
        count = self.count + 1
        mu = {k: BETA1 * m + (1 - BETA1) * grads[k] for k, m in self.mu.items()}
        nu = {k: BETA2 * v + (1 - BETA2) * grads[k] ** 2 for k, v in self.nu.items()}
        new = dict(p)
        for k in mu:
            mu_hat, nu_hat = mu[k] / (1 - BETA1**count), nu[k] / (1 - BETA2**count)
            new[k] = p[k] - ADAM_LEARNING_RATE * mu_hat / (np.sqrt(nu_hat) + EPSILON)
        return new, NumpyAdam(count, mu, nu), np_loss(p, x, y)


def np_sgd_step(p: Mapping[str, Any], x: Any, y: Any, lr: float = 0.1) -> dict[str, np.ndarray]:
    """One SGD step of the MLP in float64: the checks' reference for a training step."""
    p = to_numpy(p)
    grads = np_grads(p, x, y)
    return {k: p[k] - lr * grads[k] for k in NAMES}


def np_trajectory(
    p: Mapping[str, Any], x: Any, y: Any, steps: int, lr: float = 0.1
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(params after `steps` SGD steps, the steps + 1 losses before, between and after
    them), in float64."""
    p = to_numpy(p)
    losses = [np_loss(p, x, y)]
    for _ in range(steps):
        p = np_sgd_step(p, x, y, lr)
        losses.append(np_loss(p, x, y))
    return p, np.array(losses)


def jax_sgd_step(p: Mapping[str, Any], x: Any, y: Any, lr: float = 0.1) -> dict[str, Any]:
    """One SGD step of the same MLP in JAX: the judge's own step, which a speed check runs
    eagerly (`jax.disable_jit()`) as its baseline. Its values are never judged by."""
    import jax.numpy as jnp

    def loss(q: Mapping[str, Any]) -> Any:
        hidden = jnp.tanh(x @ q["w1"] + q["b1"])
        return jnp.mean((hidden @ q["w2"] + q["b2"] - y) ** 2)

    grads = jax.grad(loss)(dict(p))
    return {k: p[k] - lr * grads[k] for k in NAMES}


def assert_trains_alike_twice(
    train: Any, name: str, params: Any, x: Any, y: Any, steps: int
) -> None:
    """`train(params, x, y, steps)` twice: two (params, losses) pairs whose losses agree, so
    no state (an optimizer's, a counter) carries over from the first call to the second."""
    call = f"{name}(params, x, y, {steps})"
    runs = [train(params, x, y, steps) for _ in range(2)]
    for run in runs:
        assert isinstance(run, tuple) and len(run) == 2, (
            f"{call} should return a pair (params, losses), but returned "
            f"{type_name(run)}: {show(run)}"
        )
    assert_calls_agree(runs[0][1], runs[1][1], f"{call}[1]")
