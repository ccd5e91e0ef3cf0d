"""03 · Differentiate functions, not tensors.

In PyTorch you mark tensors with `requires_grad=True`, run the forward pass, call
`loss.backward()` and read `.grad` off each tensor. JAX arrays carry no gradient tape:
`jax.grad(fn)` takes a function and returns a new function that computes its gradient
with respect to the first argument (`argnums=` picks others). It composes:
`jax.grad(jax.grad(f))` is the second derivative, and `jax.value_and_grad` returns the
loss and the gradients from one forward/backward pass, shaped like the parameters,
however nested they are.

Rule to remember: gradients are functions of functions: `jax.grad(loss)(params, ...)`,
never `.backward()` and `.grad`.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/automatic-differentiation.html
"""

import jax
import jax.numpy as jnp


def f(x):
    """sin(x) ** 2, for a scalar x."""
    return jnp.sin(x) ** 2


df = jax.grad(f)

d2f = jax.grad(df)


def weighted_loss(w, b, x):
    """Mean squared output of the linear model `x @ w + b`: w (d,), b a scalar, x (n, d)."""
    return jnp.mean((x @ w + b) ** 2)


dloss_db = jax.grad(weighted_loss, argnums=1)


def mlp_loss(params, x, y):
    """Mean squared error of a 2-layer tanh MLP.

    params: {"w1": (d, h), "b1": (h,), "w2": (h, k), "b2": (k,)}; x: (n, d); y: (n, k).
    """
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    prediction = hidden @ params["w2"] + params["b2"]
    return jnp.mean((prediction - y) ** 2)


def loss_and_grads(params, x, y):
    """`(loss, grads)` of `mlp_loss` in one pass; `grads` is shaped like `params`."""
    return jax.value_and_grad(mlp_loss)(params, x, y)
