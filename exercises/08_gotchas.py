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


def gate(x, threshold):
    """`x` where `x > threshold`, else 0; works under `jax.jit`."""
    # TODO: under jax.jit, `value > threshold` is a tracer with no True or False in it yet,
    # so Python's `if` cannot branch on it. Choose between x and 0 without a Python `if`.
    return jnp.stack([value if value > threshold else jnp.zeros_like(value) for value in x])


def noisy_copies(key, x, n):
    """`n` copies of `x`, stacked, each plus its own standard-normal noise."""
    # TODO: every copy draws its noise from the same key, and the same key always gives
    # the same numbers, so all n copies come out identical. Each copy needs its own key.
    return jnp.stack([x + jax.random.normal(key, x.shape) for _ in range(n)])


def _mlp(params, x):
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


def _loss(params, x, y):
    return jnp.mean((_mlp(params, x) - y) ** 2)


def _step(params, x, y, lr=0.1):
    value, grads = jax.value_and_grad(_loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads), value


def fit(params, x, y, steps):
    """The 07 training loop, compiled: `(params, losses)`, the loss before each step."""
    # TODO: nothing in this loop is compiled, so every step runs op by op, as slowly as
    # PyTorch eager mode. Compile the step.
    losses = []
    for _ in range(steps):
        params, value = _step(params, x, y)
        losses.append(value)
    return params, jnp.stack(losses)


@jax.jit
def _total(row):
    return jnp.sum(row)


def row_sums(rows):
    """The sum of each 1-D array in `rows`, from one jitted function on padded rows."""
    # TODO: each row of a new length is a new input shape, and jax.jit compiles a new
    # program for every new shape. Make the jitted function see only a few shapes.
    return jnp.array([_total(row) for row in rows])
