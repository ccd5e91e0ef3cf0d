"""07 · A pure, compiled training step.

In PyTorch the model object owns its parameters: `loss.backward()` fills `.grad`,
`optimizer.step()` changes the weights in place, and you log `loss.item()` as you go.
In JAX a training step is a pure function: parameters go in as a pytree, new parameters
come out, nothing is written in place and no state hides on the side. That purity is
what lets `jax.jit` trace the step once and compile the whole forward, backward and
update into one XLA program, which is what makes a small step tens of times faster.
Read numbers out (`float(loss)`) only outside the compiled step.

Rule to remember: `params = step(params, x, y)`: take the state in, return the new state,
and jit the whole step.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/stateful-computations.html
  https://docs.jax.dev/en/latest/jit-compilation.html
"""

import jax
import jax.numpy as jnp


class MLP:
    """A PyTorch-style module: built once, it owns its weights from then on."""

    def __init__(self, params):
        self.params = params

    def __call__(self, x):
        p = self.params
        return jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


model = None  # the one model of the script, built on first use
loss_log = []  # every loss seen, logged on the side


def get_model(params):
    global model
    if model is None:
        model = MLP(params)
    return model


def mlp(params, x):
    """The 2-layer tanh MLP: `tanh(x @ w1 + b1) @ w2 + b2`."""
    # TODO: the module keeps the weights it was built with, so after the first call the
    # `params` you pass are ignored. The output must depend on the params passed in.
    return get_model(params)(x)


def loss(params, x, y):
    """Mean squared error of `mlp(params, x)` against `y`."""
    # TODO: this reads the module's weights, not `params`, so jax.grad(loss) sees no
    # dependence on params. Compute the loss from the params passed in.
    prediction = get_model(params)(x)
    return jnp.mean((prediction - y) ** 2)


def step(params, x, y, lr=0.1):
    """One SGD step: new params `p - lr * grad`, the input pytree left untouched."""
    # TODO: three PyTorch habits to undo: the update writes into the caller's dict (like
    # `optimizer.step()`), the loss is read out as a Python number inside the step (like
    # `loss.item()`), and nothing is compiled. Make it a pure function under `jax.jit`.
    grads = jax.grad(loss)(params, x, y)
    loss_log.append(float(loss(params, x, y)))
    for name in params:
        params[name] = params[name] - lr * grads[name]
    return params


def train(params, x, y, steps):
    """`steps` SGD steps from `params`; returns `(params, losses)`, one loss per step."""
    # TODO: this loop counts on `step` changing `params` in place, as `optimizer.step()`
    # does. Use what `step` returns, and leave the caller's params as they were.
    losses = []
    for _ in range(steps):
        step(params, x, y)
        losses.append(float(loss(params, x, y)))
    return params, losses
