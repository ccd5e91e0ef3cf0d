"""02 · Trace once, compile once.

In PyTorch every operation runs the moment Python reaches it: a loop of 300 small ops
pays Python and dispatch overhead 300 times. In JAX, `jax.jit(fn)` traces `fn` once per
input shape and dtype into a program and compiles it with XLA; later calls with the same
shapes skip Python entirely and run the fused program. While tracing, arguments are
tracers (shapes, no values): a Python `if` or `range` cannot look at their values, so use
`jnp.where`/`lax.cond` for data-dependent choices, and mark arguments that must stay
Python values (a loop count) static, at the price of one compilation per distinct value.

Rule to remember: jit the whole function; branch on values with `jnp.where`, and make
static only what decides the program's shape.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/jit-compilation.html
  https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html#control-flow
"""

from functools import partial

import jax
import jax.numpy as jnp


def slow_fn(x):
    """100 rounds of `x = sin(x) + cos(x)`, one small operation at a time."""
    for _ in range(100):
        x = jnp.sin(x) + jnp.cos(x)
    return x


fast_fn = jax.jit(slow_fn)


def clip_by_norm(g, max_norm):
    """`g` scaled down so that its L2 norm is at most `max_norm`; works under jax.jit."""
    norm = jnp.sqrt(jnp.sum(g**2))
    return jnp.where(norm > max_norm, g * (max_norm / norm), g)


@partial(jax.jit, static_argnums=1)
def repeat_apply(x, n):
    """One round of `sin + cos`, applied `n` times; compiled once per distinct `n`."""
    for _ in range(n):
        x = jnp.sin(x) + jnp.cos(x)
    return x
