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

import statistics
import time

import jax
import jax.numpy as jnp

TIMED_CALLS = 5


def log_norm(x):
    """Returns `2 * x`, and prints `norm=<L2 norm of x>` on every call, jitted or not."""
    jax.debug.print("norm={}", jnp.linalg.norm(x))
    return 2 * x


def time_call(fn, *args):
    """Seconds one call `fn(*args)` takes to finish, compilation excluded."""
    jax.block_until_ready(fn(*args))  # the warm-up call compiles
    times = []
    for _ in range(TIMED_CALLS):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def safe_norm(x):
    """The L2 norm of `x`; it and its gradient are exactly 0 at the zero vector."""
    squares = jnp.sum(x**2)
    zero = squares == 0
    # The inner where keeps sqrt's input at 1 where the outer one discards it, so the
    # backward pass never meets sqrt's infinite slope at 0.
    return jnp.where(zero, 0.0, jnp.sqrt(jnp.where(zero, 1.0, squares)))
