"""08 · Things that go wrong.

PyTorch runs your Python as written: `if t > 0:` reads the number, the global RNG hands out
fresh noise on every call, every op runs at once, and a tensor of a new length is just
another tensor. Under `jax.jit` none of that holds: values are abstract tracers while the
function is traced (a Python `if` on one raises TracerBoolConversionError, a kind of
ConcretizationTypeError; choose with `jnp.where`), randomness comes only from the key you
pass (one key used n times gives n identical draws; split it), nothing is fast until it is
compiled (jit the loop's step), and every new input shape is a new program to compile (pad
to a few fixed sizes).

Rule to remember: under jit, shapes make the program and values are unknown: branch with
`jnp.where`, give every draw its own key, compile the step, and keep the shapes few.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html
  https://docs.jax.dev/en/latest/errors.html
"""

import jax
import jax.numpy as jnp
import numpy as np


def gate(x, threshold):
    """`x` where `x > threshold`, else 0; works under `jax.jit`."""
    return jnp.where(x > threshold, x, 0)


def noisy_copies(key, x, n):
    """`n` copies of `x`, stacked, each plus its own standard-normal noise."""
    keys = jax.random.split(key, n)
    noise = jax.vmap(lambda k: jax.random.normal(k, x.shape, x.dtype))(keys)
    return x + noise


def _mlp(params, x):
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


def _loss(params, x, y):
    return jnp.mean((_mlp(params, x) - y) ** 2)


@jax.jit
def _step(params, x, y, lr=0.1):
    value, grads = jax.value_and_grad(_loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads), value


def fit(params, x, y, steps):
    """The 07 training loop, compiled: `(params, losses)`, the loss before each step."""
    losses = []
    for _ in range(steps):
        params, value = _step(params, x, y)
        losses.append(value)
    return params, jnp.stack(losses)


@jax.jit
def _padded_sums(padded):
    return padded.sum(axis=1)


def _bucket(length):
    """The next power of two: 20 lengths from 1 to 100 fall into at most 8 sizes."""
    return 1 << max(length - 1, 0).bit_length()


def row_sums(rows):
    """The sum of each 1-D array in `rows`, from one jitted function on padded rows."""
    rows = [np.asarray(row) for row in rows]
    width = _bucket(max(row.shape[0] for row in rows))
    # Padding with NumPy, on the host: eager jnp ops would compile once per length too.
    padded = np.zeros((len(rows), width), dtype=np.result_type(*rows))
    for i, row in enumerate(rows):
        padded[i, : row.shape[0]] = row
    return _padded_sums(padded)
