"""12 · Optimizers as pure functions.

In PyTorch an optimizer is an object that holds references to the parameters and keeps
its state (Adam's moments, the step count) inside itself: `opt.zero_grad()`,
`loss.backward()`, `opt.step()`, and to freeze a layer you set `requires_grad=False` or
leave its parameters out of the optimizer. In JAX, Optax's optimizer is a pair of pure
functions: `state = opt.init(params)` and `updates, state = opt.update(grads, state,
params)`, then `params = optax.apply_updates(params, updates)`. Its state is a pytree you
carry through the step next to the params, so the whole step, optimizer included, is one
jitted function. Freezing means the frozen leaves' updates are exactly zero; clipping is
one more transformation chained in front (`optax.chain`).

Rule to remember: `params, opt_state = step(params, opt_state, ...)`: the optimizer's
state goes in and comes out like the params; keep the state each step returns.

Deeper: https://optax.readthedocs.io/en/latest/getting_started.html and
https://optax.readthedocs.io/en/latest/api/combining_optimizers.html
"""

import jax
import jax.numpy as jnp
import optax

FROZEN = {"w1": "frozen", "b1": "frozen", "w2": "trained", "b2": "trained"}

adam = optax.adam(1e-2)
finetune_optimizer = optax.multi_transform(
    {"trained": optax.adam(1e-2), "frozen": optax.set_to_zero()}, FROZEN
)
clipped_sgd = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1))


def mlp(params, x):
    """The 07 MLP: `tanh(x @ w1 + b1) @ w2 + b2`."""
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def loss(params, x, y):
    """Mean squared error of `mlp(params, x)` against `y`."""
    return jnp.mean((mlp(params, x) - y) ** 2)


def optimizer_step(optimizer, params, opt_state, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value


@jax.jit
def adam_step(params, opt_state, x, y):
    """One Adam step (lr 1e-2); returns `(params, opt_state, loss before the step)`."""
    return optimizer_step(adam, params, opt_state, x, y)


def train_adam(params, x, y, steps):
    """`steps` Adam steps from fresh optimizer state; returns `(params, losses)`."""
    opt_state = adam.init(params)
    losses = []
    for _ in range(steps):
        params, opt_state, value = adam_step(params, opt_state, x, y)
        losses.append(value)
    return params, jnp.stack(losses)


def finetune_init(params):
    """The optimizer state `finetune_step` expects."""
    return finetune_optimizer.init(params)


@jax.jit
def finetune_step(params, opt_state, x, y):
    """An Adam step on `w2` and `b2` only; `w1` and `b1` come back unchanged."""
    return optimizer_step(finetune_optimizer, params, opt_state, x, y)


@jax.jit
def clipped_sgd_step(params, x, y):
    """One SGD step (lr 0.1) on gradients clipped to a global norm of at most 1."""
    new_params, _, _ = optimizer_step(clipped_sgd, params, clipped_sgd.init(params), x, y)
    return new_params
