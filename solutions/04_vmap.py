"""04 · Write it for one example, batch it for free.

In PyTorch you write every function for a batch from the start (`dim=1`, broadcasting,
`torch.cdist`), or loop over examples in Python when the batched form is hard, as for
per-example gradients. In JAX you write the function for ONE example and `jax.vmap` adds
the batch axis: `in_axes` says which arguments are batched (0) and which are shared
(None), and nesting two vmaps maps over two axes. The traced program stays the same size
for any batch; a Python loop traces one copy of the function per example.

Rule to remember: write it for one example, then `jax.vmap` it; `in_axes=None` for what
every example shares.

A broadcasting answer (`jnp.sqrt(((pa - pb) ** 2).sum(-1))`) passes these checks too,
but it is the PyTorch habit, written for the batch; the point here is `jax.vmap`, which
batches a function you wrote for one example, as for per-example gradients.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/automatic-vectorization.html
"""

import jax
import jax.numpy as jnp


def euclid(a, b):
    """The Euclidean distance between two points `a` and `b` of shape (d,)."""
    return jnp.sqrt(jnp.sum((a - b) ** 2))


def batched_euclid(pa, pb):
    """Distances between the rows of `pa` and `pb`, both (N, d), row by row: shape (N,)."""
    return jax.vmap(euclid)(pa, pb)


def pairwise_distances(A, B):
    """The (N, M) distances between every row of `A` (N, d) and every row of `B` (M, d)."""
    one_row_of_a = jax.vmap(euclid, in_axes=(None, 0))
    return jax.vmap(one_row_of_a, in_axes=(0, None))(A, B)


def example_loss(params, x, y):
    """Squared error of one tanh unit on ONE example.

    params: {"w": (d,), "b": a scalar}; x: (d,); y: a scalar.
    """
    prediction = jnp.tanh(x @ params["w"] + params["b"])
    return (prediction - y) ** 2


def per_example_grads(params, xs, ys):
    """The gradient of `example_loss` for each of the N examples `xs` (N, d), `ys` (N,).

    A pytree like `params` whose every leaf has a leading batch axis of size N.
    """
    return jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
