"""05 · Randomness is an explicit key.

In PyTorch, `torch.randn` and `nn.Dropout` draw from a hidden global generator: each call
silently advances it, and `torch.manual_seed` resets it. JAX has no hidden state. Every
random function takes a key (`key = jax.random.key(0)`), and the same key always gives the
same numbers. For new numbers, split: `key, sub = jax.random.split(key)`, draw once from
`sub` and carry `key` forward (or `jax.random.split(key, n)` for n keys at once). That is
what makes random code reproducible, and correct under `jax.jit` and `jax.vmap`.

Rule to remember: a key is used once: split it for every new draw, never reuse it.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/random-numbers.html
"""

import jax
import jax.numpy as jnp
import numpy as np


def two_normals(key, shape):
    """Two independent standard-normal samples of `shape`, drawn from `key`."""
    # TODO: like torch.randn, this draws from a hidden global generator (NumPy's) and
    # ignores `key`. Draw from the key, and give each sample a key of its own.
    return np.random.normal(size=shape), np.random.normal(size=shape)


def init_layers(key, sizes):
    """Weight matrices `(sizes[i], sizes[i+1])`, normal / sqrt(fan_in), one key per layer."""
    # TODO: every layer draws from the same key, so layers of equal shape come out equal.
    return [
        jax.random.normal(key, (fan_in, fan_out)) / jnp.sqrt(fan_in)
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True)
    ]


def dropout(key, x, rate):
    """Inverted dropout: zero each element with probability `rate`, scale the rest by 1/(1-rate)."""
    # TODO: the mask comes from NumPy's global generator, as nn.Dropout's comes from torch's:
    # it ignores `key`, and under jax.jit it is drawn once, while tracing, then frozen.
    keep = np.random.uniform(size=x.shape) >= rate
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def random_walk(key, n):
    """`n` cumulative positions of a walk with independent standard-normal steps."""
    # TODO: the same key for every step, so every step draws the same number.
    position = 0.0
    positions = []
    for _ in range(n):
        position = position + jax.random.normal(key)
        positions.append(position)
    return jnp.stack(positions)
