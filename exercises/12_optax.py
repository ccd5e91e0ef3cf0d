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

TRAINED = {"w1": False, "b1": False, "w2": True, "b2": True}


def mlp(params, x):
    """The 07 MLP: `tanh(x @ w1 + b1) @ w2 + b2`."""
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def loss(params, x, y):
    """Mean squared error of `mlp(params, x)` against `y`."""
    return jnp.mean((mlp(params, x) - y) ** 2)


def adam_step(params, opt_state, x, y):
    """One Adam step (lr 1e-2); returns `(params, opt_state, loss before the step)`."""
    # TODO: a PyTorch optimizer object keeps its own state, so this makes one per step and
    # starts it afresh: the state passed in is ignored and the new one is thrown away,
    # and nothing is compiled. The state must flow in and out, in one jitted step.
    optimizer = optax.adam(1e-2)
    value, grads = jax.value_and_grad(loss)(params, x, y)
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    return optax.apply_updates(params, updates), opt_state, value


def train_adam(params, x, y, steps):
    """`steps` Adam steps from fresh optimizer state; returns `(params, losses)`."""
    # TODO: like `opt.step()`, this expects the optimizer to remember its state, but the
    # state `adam_step` returns is dropped, so every step starts Adam over.
    opt_state = optax.adam(1e-2).init(params)
    losses = []
    for _ in range(steps):
        params, _, value = adam_step(params, opt_state, x, y)
        losses.append(value)
    return params, losses


# TODO: optax.masked does not freeze anything: leaves masked out get their raw gradients
# passed through as updates, so w1 and b1 still move. Their updates must be exactly zero.
finetune_optimizer = optax.masked(optax.adam(1e-2), TRAINED)


def finetune_init(params):
    """The optimizer state `finetune_step` expects."""
    return finetune_optimizer.init(params)


@jax.jit
def finetune_step(params, opt_state, x, y):
    """An Adam step on `w2` and `b2` only; `w1` and `b1` come back unchanged."""
    value, grads = jax.value_and_grad(loss)(params, x, y)
    updates, opt_state = finetune_optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value


@jax.jit
def clipped_sgd_step(params, x, y):
    """One SGD step (lr 0.1) on gradients clipped to a global norm of at most 1."""
    # TODO: optax.clip clips each gradient value on its own, like
    # torch.nn.utils.clip_grad_value_; the step needs clip_grad_norm_'s kind of clipping,
    # over all leaves together.
    optimizer = optax.chain(optax.clip(1.0), optax.sgd(0.1))
    grads = jax.grad(loss)(params, x, y)
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    return optax.apply_updates(params, updates)
