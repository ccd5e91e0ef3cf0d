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

import jax
import jax.numpy as jnp


def slow_fn(x):
    """100 rounds of `x = sin(x) + cos(x)`, one small operation at a time."""
    for _ in range(100):
        x = jnp.sin(x) + jnp.cos(x)
    return x


# TODO: this is still the eager slow_fn under another name: every call runs 300 separate
# operations from Python. Make fast_fn the compiled version of slow_fn.
fast_fn = slow_fn


def clip_by_norm(g, max_norm):
    """`g` scaled down so that its L2 norm is at most `max_norm`; works under jax.jit."""
    norm = jnp.sqrt(jnp.sum(g**2))
    # TODO: under jax.jit, `norm` is a tracer with no value yet, so a Python `if` cannot
    # decide on it. Choose between the two results with an array operation instead.
    if norm > max_norm:
        g = g * (max_norm / norm)
    return g


@jax.jit
def repeat_apply(x, n):
    """One round of `sin + cos`, applied `n` times; compiled once per distinct `n`."""
    # TODO: jit turns every argument into a tracer, and `range` needs a real Python int.
    # Tell jit that `n` is a constant of the program, not data.
    for _ in range(n):
        x = jnp.sin(x) + jnp.cos(x)
    return x
