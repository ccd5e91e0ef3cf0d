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

import jax
import jax.numpy as jnp

# The example's parameter names, as a PyTorch state_dict would spell them.
NAMES = ("w1", "b1", "w2", "b2")


def param_shapes(params):
    """The same structure as `params`, each array replaced by its shape."""
    # TODO: these are the example's keys only; another model has other names and nesting.
    return {name: params[name].shape for name in NAMES}


def count_params(params):
    """The total number of scalars in all the arrays of `params`."""
    # TODO: the example's keys again: any nesting of dicts, lists and tuples must work.
    return sum(params[name].size for name in NAMES)


def sgd_update(params, grads, lr):
    """New params, `p - lr * g` leaf by leaf; `params` and `grads` stay as they were."""
    # TODO: the PyTorch optimizer habit: this writes into the caller's dict (and knows only
    # the example's keys). Return new params and leave the caller's tree as it was.
    for name in NAMES:
        params[name] = params[name] - lr * grads[name]
    return params


def global_norm(tree):
    """The square root of the sum of the squares of all the numbers in `tree`."""
    # TODO: `.values()` sees one flat dict, like looping over model.parameters(); nested
    # dicts, lists and tuples hold arrays too.
    return jnp.sqrt(sum(jnp.sum(value**2) for value in tree.values()))


# TODO: JAX does not know what is inside this class: to jax.tree.map, jax.jit and jax.grad a
# Linear is one opaque object, not a container of two arrays. Register it as a pytree.
@dataclasses.dataclass
class Linear:
    """The parameters of a dense layer, `x @ w + b`: a pytree with two leaves."""

    w: jax.Array
    b: jax.Array
