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


def two_normals(key, shape):
    """Two independent standard-normal samples of `shape`, drawn from `key`."""
    key_a, key_b = jax.random.split(key)
    return jax.random.normal(key_a, shape), jax.random.normal(key_b, shape)


def init_layers(key, sizes):
    """Weight matrices `(sizes[i], sizes[i+1])`, normal / sqrt(fan_in), one key per layer."""
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        jax.random.normal(layer_key, (fan_in, fan_out)) / jnp.sqrt(fan_in)
        for layer_key, fan_in, fan_out in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def dropout(key, x, rate):
    """Inverted dropout: zero each element with probability `rate`, scale the rest by 1/(1-rate)."""
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def random_walk(key, n):
    """`n` cumulative positions of a walk with independent standard-normal steps."""
    steps = jax.random.normal(key, (n,))
    return jnp.cumsum(steps)
