"""17 · Counting work, and measuring it right.

In PyTorch you time GPU work between two `torch.cuda.Event(enable_timing=True)` records,
or call `torch.cuda.synchronize()` before reading the clock, and you reach for
`torch.autocast("cuda", dtype=torch.bfloat16)` to run matmuls in bf16. In JAX dispatch is
asynchronous on every backend, the CPU too: a call returns as soon as the work is queued,
so a timing waits for each result with `.block_until_ready()`, and the first call of a
jitted function also traces and compiles it, so it is called once, untimed, first. There is
no autocast: a bfloat16 matmul is one you write, inputs cast to `jnp.bfloat16` and
`preferred_element_type=jnp.float32` so the products are summed in float32; and a float32
matmul at full precision is asked for (`precision=jax.lax.Precision.HIGHEST`), since on a
TPU the default multiplies float32 in one bfloat16 pass (on a recent GPU, in TF32).

A matmul `(m, k) @ (k, n)` is `2·m·k·n` floating-point operations (a multiply and an add
per term) and moves at least its two inputs and its output. FLOPs per byte moved is its
arithmetic intensity: on a chip of peak `P` FLOP/s and memory bandwidth `B` bytes/s a
program takes at least `max(flops / P, bytes / B)` seconds, compute-bound when the first
is larger, memory-bound otherwise (the roofline).

Rule to remember: a matmul is 2·m·k·n FLOPs; warm up, then wait for every result before
you read the clock; and say both the dtype you multiply in and the dtype you sum in.

Deeper: https://docs.jax.dev/en/latest/async_dispatch.html,
https://docs.jax.dev/en/latest/faq.html#benchmarking-jax-code and
https://jax-ml.github.io/scaling-book/roofline/
"""

import statistics
import time

import jax
import jax.numpy as jnp


def matmul_flops(m, k, n):
    """Floating-point operations of an `(m, k) @ (k, n)` matmul, as a Python int."""
    return 2 * m * k * n


def matmul_bytes(m, k, n, dtype):
    """Bytes an `(m, k) @ (k, n)` matmul in `dtype` moves at least, as a Python int."""
    return (m * k + k * n + m * n) * jnp.dtype(dtype).itemsize


def roofline_seconds(flops, nbytes, peak_flops, bandwidth):
    """The least time a program of `flops` FLOPs moving `nbytes` bytes takes on a chip of
    `peak_flops` FLOP/s and `bandwidth` bytes/s, as a Python float."""
    return max(flops / peak_flops, nbytes / bandwidth)


def bound_by(flops, nbytes, peak_flops, bandwidth):
    """ "compute" where the chip's compute time is at least its memory time, else "memory"."""
    return "compute" if flops / peak_flops >= nbytes / bandwidth else "memory"


def matmul_f32(a, b):
    """`a @ b` for float32 `a` (m, k) and `b` (k, n), multiplied and summed at full float32
    precision on any backend; float32."""
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def matmul_bf16(a, b):
    """`a @ b` for float32 `a` (m, k) and `b` (k, n), both rounded to bfloat16, the products
    summed in float32; float32."""
    return jnp.matmul(
        a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32
    )


def achieved_tflops(f, a, b, reps):
    """TFLOP/s of `f(a, b)`, a jitted matmul: one untimed call, then `reps` timed calls,
    each finished, their median time."""
    f(a, b).block_until_ready()  # compiles
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / statistics.median(times) / 1e12
