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
    # TODO: a Python loop over examples traces one copy of euclid per row, so the
    # program grows with the batch. Batch euclid itself instead.
    return jnp.stack([euclid(a, b) for a, b in zip(pa, pb, strict=True)])


def pairwise_distances(A, B):
    """The (N, M) distances between every row of `A` (N, d) and every row of `B` (M, d)."""
    # TODO: two Python loops, N × M copies of euclid. Map over the rows of B for one row
    # of A, then over the rows of A, with nothing but euclid.
    return jnp.stack([jnp.stack([euclid(a, b) for b in B]) for a in A])


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
    # TODO: the PyTorch way to get per-example gradients is a loop with one backward()
    # per example. Batch the one-example gradient over xs and ys; params are shared.
    grads = [jax.grad(example_loss)(params, x, y) for x, y in zip(xs, ys, strict=True)]
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *grads)
