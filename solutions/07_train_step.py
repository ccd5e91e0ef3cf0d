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


def mlp(params, x):
    """The 2-layer tanh MLP: `tanh(x @ w1 + b1) @ w2 + b2`."""
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


def loss(params, x, y):
    """Mean squared error of `mlp(params, x)` against `y`."""
    return jnp.mean((mlp(params, x) - y) ** 2)


@jax.jit
def step(params, x, y, lr=0.1):
    """One SGD step: new params `p - lr * grad`, the input pytree left untouched."""
    grads = jax.grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


_loss_value = jax.jit(loss)


def train(params, x, y, steps):
    """`steps` SGD steps from `params`; returns `(params, losses)`, one loss per step."""
    losses = []
    for _ in range(steps):
        losses.append(_loss_value(params, x, y))
        params = step(params, x, y)
    return params, jnp.stack(losses)
