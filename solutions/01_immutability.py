"""01 · Arrays never change in place.

In PyTorch you write `x[0] = 1.0` or `x.index_add_(0, idx, v)` and the tensor changes
under your feet. JAX arrays are immutable: there is no in-place write, and `x[0] = 1.0`
raises a TypeError. Instead, `x.at[idx]` names the positions you want and `.set(v)`,
`.add(v)` or `.multiply(v)` returns a *new* array, leaving `x` as it was. Under `jax.jit`
XLA turns that copy back into an in-place update, so immutability costs nothing.

Rule to remember: never write into an array; return the updated copy from `x.at[...]`.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html#in-place-updates
  https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html
"""

import jax.numpy as jnp


def set_first(x, value):
    """A new 1-D array equal to `x` with element 0 set to `value`."""
    return x.at[0].set(value)


def scatter_add(x, idx, values):
    """A new array with `values[k]` added at position `idx[k]`; repeated indices add up."""
    return x.at[idx].add(values)


def scale_row(m, i, factor):
    """A new matrix with row `i` of `m` multiplied by `factor`."""
    return m.at[i].multiply(factor)


def zero_diagonal(m):
    """A new square matrix equal to `m` with its diagonal set to 0."""
    diagonal = jnp.arange(m.shape[0])
    return m.at[diagonal, diagonal].set(0.0)
