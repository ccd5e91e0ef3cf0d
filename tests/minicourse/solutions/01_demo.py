"""Demo: the reference."""

import jax


def double(x):
    return x * 2


def draw(key):
    first, second = jax.random.split(key)
    return jax.random.normal(first), jax.random.normal(second)
