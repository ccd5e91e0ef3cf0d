"""10 · Seeing inside compiled code.

In PyTorch you debug with `print(t)`, time with `time.time()` around a call, and trust
that a function that returns a number has a gradient that is a number. Under `jax.jit`
all three mislead. `print` is Python, and Python runs once, while tracing: it prints a
tracer, once, and never again; `jax.debug.print("norm={}", value)` is compiled into the
program and prints the real value on every call. A JAX call returns as soon as the work
is queued, so a clock read right after it measures only the hand-off; and the first call
also traces and compiles. Warm up first, wait with `jax.block_until_ready(result)`, and
take the median of a few runs. Finally, `jax.grad` multiplies through every operation:
`sqrt` has an infinite slope at 0, and `jnp.where` choosing another branch afterwards
does not remove the `0 * inf = NaN` from the backward pass. Keep the unsafe input away
from the branch you throw away too.

Rule to remember: inside jit, print with `jax.debug.print`, time with a warm-up and
`block_until_ready`, and make both branches of a `jnp.where` finite.

Deeper: https://docs.jax.dev/en/latest/debugging.html and
https://docs.jax.dev/en/latest/faq.html (benchmarking; NaN gradients with `where`)
"""

import time

import jax.numpy as jnp


def log_norm(x):
    """Returns `2 * x`, and prints `norm=<L2 norm of x>` on every call, jitted or not."""
    # TODO: a Python print runs while jax.jit traces the function, once, and shows a
    # tracer instead of a number. Print from inside the compiled program instead.
    print(f"norm={jnp.linalg.norm(x)}")
    return 2 * x


def time_call(fn, *args):
    """Seconds one call `fn(*args)` takes to finish, compilation excluded."""
    # TODO: three PyTorch-on-CPU habits: the call returns before JAX has finished the work,
    # the first call of a jitted function also compiles it, and one timing is all noise.
    # Measure finished calls, leave compilation out, and time several of them.
    start = time.time()
    fn(*args)
    return time.time() - start


def safe_norm(x):
    """The L2 norm of `x`; it and its gradient are exactly 0 at the zero vector."""
    # TODO: at x = 0 the value is 0 but jax.grad gives NaN: sqrt's slope at 0 is infinite,
    # and the chain rule multiplies it by 0. Keep sqrt away from 0 without changing the
    # value anywhere.
    return jnp.sqrt(jnp.sum(x**2))
