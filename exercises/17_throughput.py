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

import time

import jax.numpy as jnp
import numpy as np


def matmul_flops(m, k, n):
    """Floating-point operations of an `(m, k) @ (k, n)` matmul, as a Python int."""
    # TODO: each of the m·n results sums k products, and every term costs two operations,
    # not one. Count them all.
    return m * k * n


def matmul_bytes(m, k, n, dtype):
    """Bytes an `(m, k) @ (k, n)` matmul in `dtype` moves at least, as a Python int."""
    # TODO: the product does not stay on the chip's compute units: it is written to memory
    # too. Count every array the matmul touches.
    return (m * k + k * n) * np.dtype(dtype).itemsize


def roofline_seconds(flops, nbytes, peak_flops, bandwidth):
    """The least time a program of `flops` FLOPs moving `nbytes` bytes takes on a chip of
    `peak_flops` FLOP/s and `bandwidth` bytes/s, as a Python float."""
    # TODO: a chip computes while it moves data: the two times overlap, they do not add up.
    return flops / peak_flops + nbytes / bandwidth


def bound_by(flops, nbytes, peak_flops, bandwidth):
    """ "compute" where the chip's compute time is at least its memory time, else "memory"."""
    # TODO: FLOPs and bytes are counts of different things; only this chip's speeds say
    # which of the two takes longer.
    return "compute" if flops >= nbytes else "memory"


def matmul_f32(a, b):
    """`a @ b` for float32 `a` (m, k) and `b` (k, n), multiplied and summed at full float32
    precision on any backend; float32."""
    # TODO: on a CPU this is full float32, but on a TPU the default precision multiplies
    # float32 in one bfloat16 pass (a GPU's, in TF32): a few significant digits. Ask for
    # the full precision on every backend.
    return a @ b


def matmul_bf16(a, b):
    """`a @ b` for float32 `a` (m, k) and `b` (k, n), both rounded to bfloat16, the products
    summed in float32; float32."""
    # TODO: like torch.autocast, this multiplies in bfloat16, but here the sums are
    # bfloat16 too: 8 significant bits each, which the cast afterwards cannot bring back.
    # Keep the bfloat16 inputs and have the matmul itself sum in float32.
    return (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)).astype(jnp.float32)


def achieved_tflops(f, a, b, reps):
    """TFLOP/s of `f(a, b)`, a jitted matmul: one untimed call, then `reps` timed calls,
    each finished, their median time."""
    # TODO: two habits from timing PyTorch on a CPU. The first call of a jitted function
    # also compiles it, and every call returns before the work is done. Leave compiling out,
    # time finished calls, and take the median of the timed ones.
    start = time.perf_counter()
    for _ in range(reps):
        f(a, b)
    seconds = (time.perf_counter() - start) / reps
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / seconds / 1e12
