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

from kata.checking.expect import as_float32, assert_calls_agree, random_array, show
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
