"""06 · Parameters are nested containers.

In PyTorch, parameters live inside `nn.Module` objects: you reach them by name
(`model.fc1.weight`), walk `model.parameters()`, and the optimizer updates them in place
(`p -= lr * p.grad`). In JAX, parameters are plain data: any nesting of dicts, lists and
tuples with arrays at the leaves, called a pytree. `jax.tree.leaves(tree)` lists the arrays;
`jax.tree.map(f, tree)` applies `f` to every leaf and returns a new tree of the same
structure; `jax.tree.map(f, a, b)` walks two trees of that structure side by side. A class
of your own joins in once registered as a pytree (`jax.tree_util.register_dataclass`), and
then `jax.jit` and `jax.grad` see through it too. Example: the 4-3-1 MLP's
`params = {"w1": (4, 3) array, "b1": (3,), "w2": (3, 1), "b2": (1,)}`.

Rule to remember: never name the leaves: map over the tree and return a new one.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/working-with-pytrees.html
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp


def param_shapes(params):
    """The same structure as `params`, each array replaced by its shape."""
    return jax.tree.map(lambda leaf: leaf.shape, params)


def count_params(params):
    """The total number of scalars in all the arrays of `params`."""
    return sum(leaf.size for leaf in jax.tree.leaves(params))


def sgd_update(params, grads, lr):
    """New params, `p - lr * g` leaf by leaf; `params` and `grads` stay as they were."""
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def global_norm(tree):
    """The square root of the sum of the squares of all the numbers in `tree`."""
    return jnp.sqrt(sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(tree)))


@functools.partial(jax.tree_util.register_dataclass, data_fields=["w", "b"], meta_fields=[])
@dataclasses.dataclass
class Linear:
    """The parameters of a dense layer, `x @ w + b`: a pytree with two leaves."""

    w: jax.Array
    b: jax.Array
