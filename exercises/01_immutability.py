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
    # TODO: JAX arrays cannot be assigned to. Return a new array instead.
    x[0] = value
    return x


def scatter_add(x, idx, values):
    """A new array with `values[k]` added at position `idx[k]`; repeated indices add up."""
    # TODO: this NumPy round trip is not allowed under jax.jit, and NumPy's `+=` on
    # fancy indices keeps only one of the repeated writes.
    import numpy as np

    out = np.array(x)
    out[np.array(idx)] += np.array(values)
    return jnp.asarray(out)


def scale_row(m, i, factor):
    """A new matrix with row `i` of `m` multiplied by `factor`."""
    # TODO: an in-place multiply, the PyTorch way.
    m[i] *= factor
    return m


def zero_diagonal(m):
    """A new square matrix equal to `m` with its diagonal set to 0."""
    # TODO: `fill_diagonal_` changes a tensor in place; JAX has no in-place ops.
    n = m.shape[0]
    for k in range(n):
        m[k, k] = 0.0
    return m
