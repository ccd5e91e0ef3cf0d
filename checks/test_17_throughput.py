"""Checks for 17_throughput: FLOPs, bytes and the roofline; float32 and bfloat16 matmuls the
grader runs and times itself; and the learner's own throughput measurement held to the
grader's.

Evidence per check: values for `matmul_flops`, `matmul_bytes`, `roofline_seconds` and
`bound_by`, on sizes drawn at check time (random.SystemRandom) and every dtype the
curriculum allows, each built as a dtype object in the learner's process (a dtype cannot
cross as data); for the two matmuls, their exported programs, run by the judge on inputs it
drew after the export and held to NumPy's float64 products, and read (MLIR's parser,
kata.checking.program_walk: each matrix product's operand and result types and the
precision it asks for); for their throughput, the judge's own clock, running those programs
itself (on the chip, through the holder, where the run was handed one); for
`achieved_tflops`, the judge's clock again: the learner's number is held to the judge's
own measurement of the same jitted function.
"""

import math
import random
import re
import statistics
import time
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from kata.checking.expect import show
from kata.checking.exported_program import finished
from kata.checking.learner_calls import LearnerError, builds_in_learner_process, held_still
from kata.checking.speed import (
    FirstCallSlow,
    TimingWindow,
    format_ratio,
    format_seconds,
    timed_device,
)
from kata.handoffs.chip_connection import ChipError, judges_chip, program_request
from kata.results import NOTE_PROPERTY

PICK = random.SystemRandom()


def picked_dims(low, high, count=3):
    """`count` different ints in [low, high], drawn by the operating system's generator:
    no seed the learner's process could know, and no two dimensions alike, so that a count
    that mixes them up (n³, m·n·n) is wrong."""
    return PICK.sample(range(low, high + 1), count)


def matmul_shapes():
    """(m, k, n) triples over the contract's domain: a 1 in each place, small, medium, and
    large enough that 2·m·k·n passes 2³¹ (a count in int32 wraps around)."""
    small, medium, large = picked_dims(2, 64), picked_dims(100, 5000), picked_dims(2**11, 2**16)
    a, b, c, d, e, f = picked_dims(2, 300, 6)
    return [tuple(small), tuple(medium), tuple(large), (1, a, b), (c, 1, d), (e, f, 1)]


def assert_python_int(got, call):
    assert type(got) is int, (
        f"{call} returned {type(got).__name__} {show(got)}, not a Python int: count with "
        "Python's own integers (a JAX or NumPy integer is 32 or 64 bits, and 2·m·k·n of a "
        "large matmul outgrows int32)"
    )


# --- matmul_flops ---------------------------------------------------------------------------


@pytest.mark.task("matmul_flops")
def test_matmul_flops_counts_a_multiply_and_an_add_per_term(ex):
    """matmul_flops: 2·m·k·n as a Python int, for shapes drawn now (1s and large ones too)"""
    for m, k, n in matmul_shapes():
        call = f"matmul_flops({m}, {k}, {n})"
        got = ex.matmul_flops(m, k, n)
        assert_python_int(got, call)
        want = 2 * m * k * n
        why = (
            "half of it: every term of each sum is a multiply and an add, two operations"
            if got * 2 == want
            else "a matmul (m, k) @ (k, n) computes m·n sums of k products each"
        )
        assert got == want, f"{call} returned {got}, expected {want}: {why}"


# --- matmul_bytes ---------------------------------------------------------------------------

# Every spelling of a dtype the curriculum allows, and its size in bytes: JAX's scalar types
# (jnp.float32 has no `.itemsize` of its own), NumPy's, and NumPy dtype objects, bfloat16's
# from ml_dtypes as JAX's own is.
DTYPE_SPELLINGS = {
    "jnp.float32": 4,
    "jnp.bfloat16": 2,
    "jnp.float16": 2,
    "np.float32": 4,
    "np.float16": 2,
    "np.dtype('float32')": 4,
    "np.dtype('float16')": 2,
    "np.dtype(bfloat16)": 2,
}


def dtype_spelled(spelling):
    return {
        "jnp.float32": jnp.float32,
        "jnp.bfloat16": jnp.bfloat16,
        "jnp.float16": jnp.float16,
        "np.float32": np.float32,
        "np.float16": np.float16,
        "np.dtype('float32')": np.dtype("float32"),
        "np.dtype('float16')": np.dtype("float16"),
        "np.dtype(bfloat16)": np.dtype(ml_dtypes.bfloat16),
    }[spelling]


@builds_in_learner_process
def dtype_there(_ex, spelling):
    """The dtype `spelling` names, made in the learner's process (a dtype is an object, not
    data): a handle here, passed back to the learner's function."""
    return dtype_spelled(spelling)


def bytes_message(got, m, k, n, itemsize):
    elements = m * k + k * n + m * n
    if got == (m * k + k * n) * itemsize:
        return "the inputs alone: the product is written to memory too, m·n more elements"
    if got == elements:
        return "elements, not bytes: multiply by the dtype's size in bytes (`itemsize`)"
    if got == elements * itemsize * 8:
        return "bits, not bytes: a dtype's `itemsize` is in bytes (`finfo(dtype).bits` is 8×)"
    return f"(m·k + k·n + m·n) = {elements} elements of {itemsize} bytes"


@pytest.mark.task("matmul_bytes")
def test_matmul_bytes_counts_both_inputs_and_the_output(ex):
    """matmul_bytes: (m·k + k·n + m·n) · itemsize, for JAX's and NumPy's 32- and 16-bit floats"""
    shapes = matmul_shapes()
    for spelling, itemsize in DTYPE_SPELLINGS.items():
        dtype = dtype_there(ex, spelling)
        for m, k, n in PICK.sample(shapes, 2):
            call = f"matmul_bytes({m}, {k}, {n}, {spelling})"
            got = ex.matmul_bytes(m, k, n, dtype)
            assert_python_int(got, call)
            want = (m * k + k * n + m * n) * itemsize
            assert got == want, (
                f"{call} returned {got}, expected {want}: {bytes_message(got, m, k, n, itemsize)}"
            )


# --- roofline_seconds and bound_by ----------------------------------------------------------


class Workload(NamedTuple):
    """A program and a chip: its FLOPs and bytes, the chip's peak FLOP/s and bytes/s."""

    flops: int
    nbytes: int
    peak_flops: float
    bandwidth: float
    kind: str  # "compute", "memory" or "tie": which time is larger

    @property
    def args(self):
        return (self.flops, self.nbytes, self.peak_flops, self.bandwidth)

    @property
    def call(self):
        return f"({self.flops}, {self.nbytes}, {self.peak_flops:.6g}, {self.bandwidth:.6g})"


def log_uniform(low, high):
    return math.exp(PICK.uniform(math.log(low), math.log(high)))


def drawn_chips():
    """Programs on chips whose ridge (peak FLOP/s over bytes/s) is 4 to 1000 FLOPs a byte, as
    every CPU, GPU and TPU's is: compute-bound ones and memory-bound ones, each by a factor
    of 1.01 to 10 (adding the two times, or taking the shorter, is wrong on all of them; a
    ridge turned upside down, bytes/s over FLOP/s, is wrong on every memory-bound one, since
    1/ridge <= 1/4 < ridge/10), and a tie: the two times equal to the last bit (powers of
    two), which the contract calls "compute". The last memory-bound one has a ridge of 20 or
    more, so its FLOPs outnumber its bytes (by ridge / factor >= 2): comparing the counts
    themselves (the stub) is wrong there on every draw (on the draws alone it passed one
    grading in 850, and a CI run once)."""
    chips = []
    for kind, lowest_ridge in (("compute", 4), ("memory", 4), ("compute", 4), ("memory", 20)):
        peak = log_uniform(1e11, 2e15)
        bandwidth = peak / log_uniform(lowest_ridge, 1000)
        nbytes = int(log_uniform(1e3, 1e12))
        factor = log_uniform(1.01, 10)
        compute_seconds = nbytes / bandwidth * (factor if kind == "compute" else 1 / factor)
        flops = max(1, int(compute_seconds * peak))
        real = "compute" if flops / peak >= nbytes / bandwidth else "memory"
        chips.append(Workload(flops, nbytes, peak, bandwidth, real))
    scale, bandwidth_exp = PICK.randrange(1, 10**6), PICK.randrange(30, 43)
    peak, bandwidth = 2 ** (bandwidth_exp + PICK.randrange(2, 10)), 2**bandwidth_exp
    tie = Workload(scale * peak, scale * bandwidth, float(peak), float(bandwidth), "tie")
    assert tie.flops / tie.peak_flops == tie.nbytes / tie.bandwidth
    return [*chips, tie]


def roofline_message(got, chip):
    compute, memory = chip.flops / chip.peak_flops, chip.nbytes / chip.bandwidth
    if math.isclose(got, compute + memory, rel_tol=1e-9):
        return (
            "the sum of the two times: a chip computes while it moves data, so the longer "
            "one is the bound"
        )
    in_gigabytes = chip.nbytes / (chip.bandwidth * 1e9)
    if any(math.isclose(got, t, rel_tol=1e-9) for t in (in_gigabytes, max(compute, in_gigabytes))):
        return "the bandwidth is already in bytes/s, not GB/s: no factor of 1e9"
    if math.isclose(got, min(compute, memory), rel_tol=1e-9):
        return "the shorter of the two times: the program waits for the longer one"
    return f"compute takes {compute:.6g} s, memory {memory:.6g} s, and the bound is the longer"


@pytest.mark.task("roofline_seconds")
def test_roofline_seconds_is_the_longer_of_compute_and_memory(ex):
    """roofline_seconds: max(flops / peak_flops, nbytes / bandwidth), a Python float, both ways"""
    for chip in drawn_chips():
        call = f"roofline_seconds{chip.call}"
        got = ex.roofline_seconds(*chip.args)
        assert type(got) is float, (
            f"{call} returned {type(got).__name__} {show(got)}, not a Python float: compute "
            "it with Python's own numbers (a float32 array keeps 7 digits)"
        )
        want = max(chip.flops / chip.peak_flops, chip.nbytes / chip.bandwidth)
        assert math.isclose(got, want, rel_tol=1e-9), (
            f"{call} returned {got:.6g} s, expected {want:.6g} s: {roofline_message(got, chip)}"
        )


@pytest.mark.task("bound_by")
def test_bound_by_names_the_longer_time(ex):
    """bound_by: "compute" where flops / peak_flops >= nbytes / bandwidth (ties too), else memory"""
    chips = drawn_chips()
    answers = {chip: ex.bound_by(*chip.args) for chip in chips}
    for chip, got in answers.items():
        call = f"bound_by{chip.call}"
        assert got in ("compute", "memory"), (
            f'{call} returned {show(got)}, not "compute" or "memory"'
        )
    reversed_everywhere = all(
        got != chip.kind for chip, got in answers.items() if chip.kind != "tie"
    )
    for chip, got in answers.items():
        want = "compute" if chip.kind == "tie" else chip.kind
        compute, memory = chip.flops / chip.peak_flops, chip.nbytes / chip.bandwidth
        why = (
            "the comparison is reversed: the bound is the resource whose time is longer"
            if reversed_everywhere
            else "the two times are equal, and the contract calls a tie compute-bound (>=)"
            if chip.kind == "tie"
            else "compare the times each takes on this chip (flops / peak_flops against "
            "nbytes / bandwidth), not the counts themselves"
        )
        assert got == want, (
            f"bound_by{chip.call} returned {got!r}, expected {want!r}: compute takes "
            f"{compute:.6g} s and memory {memory:.6g} s; {why}"
        )


# --- matmul_f32 and matmul_bf16: values ------------------------------------------------------

# The curriculum's tolerance for both: 1e-5 of the float64 product's largest entry. Sums in
# float32 land inside it (measured at k up to 4096: 1.3e-6 of the largest entry at worst);
# a result rounded to bfloat16 is off by up to 2⁻⁹ of each entry, sums kept in bfloat16 more.
RELATIVE_TO_LARGEST = 1e-5


def value_shapes():
    """(m, k, n): a 1 somewhere, a middling product, and a long sum (k up to 4096). The long
    one keeps 16 entries or more, so its largest entry, which the tolerance scales with, is
    never near 0 (measured over 600 draws with k from 2048 to 4096: float32 sums reached
    0.13 of the tolerance at most, bfloat16 products summed in float32 0.08)."""
    d, e = picked_dims(2, 48, 2)
    one = PICK.choice([(1, d, e), (d, 1, e), (d, e, 1)])
    middle = tuple(picked_dims(16, 96))
    long = (PICK.randrange(4, 10), PICK.randrange(2048, 4097), PICK.randrange(4, 10))
    return [one, middle, long]


def inputs(rng, m, k, n):
    return (
        rng.normal(size=(m, k)).astype(np.float32),
        rng.normal(size=(k, n)).astype(np.float32),
    )


def bf16_rounded(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def f32_product(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


def bf16_product(a, b):
    return bf16_rounded(a) @ bf16_rounded(b)


def assert_product(got, want, call, name):
    got = np.asarray(got)
    assert got.shape == want.shape, f"{call} returned shape {got.shape}, not {want.shape}"
    assert got.dtype == np.float32, f"{call} returned {got.dtype}, not float32: " + (
        "a matmul of bfloat16 inputs returns bfloat16 unless asked for float32 "
        "(preferred_element_type=jnp.float32)"
        if got.dtype == ml_dtypes.bfloat16
        else "the product must be float32"
    )
    error = np.abs(got.astype(np.float64) - want)
    allowed = RELATIVE_TO_LARGEST * max(float(np.abs(want).max()), np.finfo(np.float32).tiny)
    worst = np.unravel_index(np.argmax(error), error.shape)
    rounded = (
        "products or sums rounded to bfloat16 (8 significant bits) somewhere: multiply the "
        "bfloat16 inputs and sum in float32 (preferred_element_type=jnp.float32)"
        if name == "matmul_bf16"
        else "a multiply rounded to fewer bits than float32's 24: keep a and b float32, and "
        "ask for full precision"
    )
    assert error[worst] <= allowed, (
        f"{call} is off by {error[worst]:.3g} at {tuple(int(i) for i in worst)} (allowed "
        f"{allowed:.3g}, 1e-5 of the largest entry): expected {want[worst]:.7g}, got "
        f"{got[worst]:.7g}. Errors this large come from {rounded}"
    )


REFERENCES = {"matmul_f32": f32_product, "matmul_bf16": bf16_product}


def exported_product(ex, name, rng, m, k, n):
    """The learner's `name` exported for float32 (m, k) and (k, n), held to itself in its
    process, then run here on inputs drawn after the export and held to NumPy's float64
    product: the program, whatever the function returns when called."""
    a, b = inputs(rng, m, k, n)
    program = getattr(ex, name).exported(a, b)
    a, b = inputs(rng, m, k, n)
    call = f"jax.jit({name})(a, b) for a ({m}, {k}) and b ({k}, {n}), run by the grader,"
    # Past a billion products (a chip's size), rows drawn now stand for the rest: NumPy's
    # float64 product of 4096² matrices takes seconds here.
    rows = sorted(PICK.sample(range(m), 8)) if m * k * n > 2**30 else slice(None)
    assert_product(program.run(a, b)[rows], REFERENCES[name](a[rows], b), call, name)
    return program


@pytest.mark.task("matmul_f32")
def test_matmul_f32_matches_the_float64_product(ex, rng):
    """matmul_f32: float32, within 1e-5 of NumPy's float64 a @ b (of its largest entry), jitted"""
    for m, k, n in value_shapes():
        exported_product(ex, "matmul_f32", rng, m, k, n)


@pytest.mark.task("matmul_bf16")
def test_matmul_bf16_matches_the_product_of_rounded_inputs(ex, rng):
    """matmul_bf16: float32, within 1e-5 of the float64 product of a and b rounded to bfloat16"""
    for m, k, n in value_shapes():
        exported_product(ex, "matmul_bf16", rng, m, k, n)


# --- matmul_f32 and matmul_bf16: what their programs ask the chip for -----------------------


def described(contraction):
    operands = " and ".join(contraction.operands)
    asked = (
        f"algorithm {'/'.join(contraction.algorithm)}"
        if contraction.algorithm
        else f"precision {'/'.join(contraction.precision)}"
    )
    return f"{contraction.op} of {operands} giving {contraction.result} ({asked})"


def multiplies_in(contraction):
    """The element types a product multiplies its operands in: its algorithm's, where it
    names one, else its operands' own."""
    return contraction.algorithm or contraction.operands


def full_f32(contraction):
    if contraction.algorithm:
        return set(contraction.algorithm) == {"f32"}
    return set(contraction.operands) == {"f32"} and set(contraction.precision) == {"HIGHEST"}


def small_program(ex, name, rng):
    return exported_product(ex, name, rng, *picked_dims(8, 40))


@pytest.mark.task("matmul_f32")
def test_matmul_f32_asks_for_full_precision_on_any_backend(ex, rng):
    """matmul_f32: its program asks each float32 matrix product for HIGHEST precision (TPU, GPU)"""
    program = small_program(ex, "matmul_f32", rng)
    short = [c for c in program.reading.contractions if not full_f32(c)]
    assert not short, (
        "jax.jit(matmul_f32)'s program, read by the grader, holds "
        + "; ".join(described(c) for c in short)
        + ". A CPU multiplies float32 in full whatever the program asks, but with DEFAULT "
        "(or HIGH) precision a TPU multiplies float32 in one (or three) bfloat16 passes and a "
        "recent GPU in TF32: 8 to 10 significant bits, where float32 has 24. Ask for "
        "precision=jax.lax.Precision.HIGHEST"
    )


def assert_bf16_products(program, name):
    """Every matrix product of `program` multiplies bfloat16 and gives float32, and it has
    one: what a chip's bfloat16 matrix unit runs."""
    products = program.reading.contractions
    assert products, (
        f"{name}'s program, read by the grader, holds no matrix product (a dot_general): "
        "products written out as elementwise multiplies and a sum never reach a chip's "
        "matrix unit. Use jnp.matmul (or @, jnp.dot, jax.lax.dot_general)"
    )
    wrong = [c for c in products if set(multiplies_in(c)) != {"bf16"} or c.result != "f32"]
    summed_narrow = [c for c in wrong if c.result in ("bf16", "f16")]
    assert not wrong, (
        f"{name}'s program, read by the grader, holds "
        + "; ".join(described(c) for c in wrong)
        + ": "
        + (
            "its sums are rounded to 16 bits, which no cast afterwards brings back. Ask the "
            "matmul itself for a float32 result: preferred_element_type=jnp.float32"
            if summed_narrow
            else "the matrix product must take the bfloat16 inputs (cast a and b to "
            "jnp.bfloat16, not back to float32) and give float32 (preferred_element_type="
            "jnp.float32): that is what a chip's bfloat16 matrix unit runs"
        )
    )


@pytest.mark.task("matmul_bf16")
def test_matmul_bf16_multiplies_bfloat16_and_sums_float32(ex, rng):
    """matmul_bf16: its program's matrix product multiplies bfloat16 and sums in float32"""
    assert_bf16_products(small_program(ex, "matmul_bf16", rng), "jax.jit(matmul_bf16)")


# --- throughput: the grader times both matmuls ----------------------------------------------

# Published dense peaks per chip, in TFLOP/s (no structured sparsity): float32 is a chip's
# plain FP32 rate, what precision=HIGHEST runs at on a GPU (DEFAULT runs TF32 there); a TPU
# publishes no float32 figure (it multiplies float32 as several bfloat16 passes), and a T4
# has no bfloat16 matrix unit. (name, pattern of JAX's device_kind, float32, bfloat16), the
# first that matches. Sources, read December 2026:
#   TPU v5e: cloud.google.com/tpu/docs/v5e ("197 TFLOPs" bf16 per chip)
#   TPU v6e: cloud.google.com/tpu/docs/v6e ("918 TFLOPs" bf16 per chip)
#   T4: NVIDIA T4 Tensor Core GPU datasheet (FP32 8.1 TFLOPS; FP16 tensor 65; no BF16)
#   L4: NVIDIA L4 datasheet (FP32 30.3; BF16 tensor 242 with sparsity, 121 dense)
#   A100: NVIDIA A100 datasheet (FP32 19.5; BF16 tensor 312 dense)
#   H100: NVIDIA H100 datasheet, SXM / PCIe / NVL (FP32 67 / 51 / 60; BF16 989 / 756 / 835 dense)
#   H200: NVIDIA H200 datasheet, SXM / NVL (FP32 67 / 60; BF16 989 / 835 dense)
PUBLISHED_PEAKS = (
    ("TPU v5e", r"\bTPU v5 ?(lite|e)\b", None, 197.0),
    ("TPU v6e", r"\bTPU v6 ?(lite|e)\b", None, 918.0),
    ("T4", r"\bT4\b", 8.1, None),
    ("L4", r"\bL4\b", 30.3, 121.0),
    ("A100", r"\bA100\b", 19.5, 312.0),
    ("H100 PCIe", r"\bH100\b.*\bPCIe\b", 51.0, 756.0),
    ("H100 NVL", r"\bH100\b.*\bNVL\b", 60.0, 835.0),
    ("H100 SXM", r"\bH100\b", 67.0, 989.0),
    ("H200 NVL", r"\bH200\b.*\bNVL\b", 60.0, 835.0),
    ("H200 SXM", r"\bH200\b", 67.0, 989.0),
)
# GPUs with no bfloat16 matrix unit (before NVIDIA's Ampere): XLA widens bfloat16 to float32
# there, and a bfloat16 matmul runs at about half float32's speed
# (github.com/jax-ml/jax/issues/21212, measured on a Colab T4). No ratio is asked of them.
NO_BF16_UNIT = r"\b(T4|V100|P100|P40|P4|K80|K40)\b"
# The tutorial's own bf16 and fp32 matmul throughput on a TPU v6e and a Colab T4, TFLOP/s
# (name: (float32, bfloat16)), shown beside a chip's figures. Not in this repository yet:
# fill them in from the tutorial, and every note on a chip shows them.
TUTORIAL_FIGURES: dict[str, tuple[float, float]] = {}
# The curriculum: on a TPU or GPU, matmul_bf16 at least 1.5× matmul_f32's throughput.
CHIP_RATIO = 1.5
# A square size per device: a CPU takes milliseconds at 512 (this 2-core Xeon with AMX:
# float32 at HIGHEST 2-4 ms, bfloat16 0.9-1.4 ms); a chip needs 4096 to come near its peak.
CPU_SIZE = 512
CHIP_SIZE = 4096
CPU_ROUNDS = 7
CHIP_ROUNDS = 3
# A chip's timed request runs this long (its calls chained), well past one call's launch.
CHIP_REQUEST_SECONDS = 0.05
MAX_CHIP_CALLS = 400


def judges_f32(a, b):
    """The grader's own float32 matmul, timed beside matmul_bf16 where matmul_f32 is not
    right yet."""
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def learners_f32_or_none(ex, rng, size):
    """matmul_f32's program at `size`, or None where it is not right yet (its own checks
    say why): the bfloat16 task is not judged by the float32 one."""
    try:
        program = exported_product(ex, "matmul_f32", rng, size, size, size)
    except (AssertionError, LearnerError):
        return None
    return program if all(full_f32(c) for c in program.reading.contractions) else None


def seconds_here(ex, runs, size, rng):
    """Seconds per call of each of `runs` (name: jitted function of a, b) on the judge's
    device, at `size`: compiled and called once first (a program that never ends fails
    here), then interleaved round by round, each call waited for, while every process of
    the learner's code is stopped; the median of CPU_ROUNDS."""
    a, b = (jax.device_put(x) for x in inputs(rng, size, size, size))
    for run in runs.values():
        finished(lambda run=run: run(a, b))
    times = {name: [] for name in runs}
    with held_still(ex):
        for _ in range(CPU_ROUNDS):
            for name, run in runs.items():
                start = time.perf_counter()
                jax.block_until_ready(run(a, b))
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def signed_permutation(size):
    """A matrix that moves each column of `a` elsewhere and maybe flips its sign: chained
    calls a ← a @ b keep their values (exactly, in float32 and bfloat16 alike), and the
    grader knows each result without a matmul of its own."""
    order = np.array(PICK.sample(range(size), size))
    signs = np.array([PICK.choice((-1.0, 1.0)) for _ in range(size)], np.float32)
    b = np.zeros((size, size), np.float32)
    b[np.arange(size), order] = signs
    return b, order, signs


def seconds_on_chip(chip, programs, rng):
    """Seconds per call of each of `programs` (name: (serialized program for the chip, its
    inputs rounded to bfloat16)) on the chip, at CHIP_SIZE: a first call (it compiles) whose
    result is held to the exact answer, then CHIP_ROUNDS interleaved chains of calls, each
    fed the one before's result, sent ahead and the last waited for (a throughput: a wait
    after each call would add the host's round trip, 0.5 ms on a TPU v5e, to every 3 ms
    bfloat16 call), by the holder's clock."""
    a = rng.normal(size=(CHIP_SIZE, CHIP_SIZE)).astype(np.float32)
    b, order, signs = signed_permutation(CHIP_SIZE)
    calls = {}
    for name, (data, rounded) in programs.items():
        _, kept = chip.time_program(program_request(data, [a, b], (0, 1), (), 1, {0}))
        start = bf16_rounded(a).astype(np.float32) if rounded else a
        want = np.empty_like(start)
        want[:, order] = start * signs
        assert np.array_equal(np.asarray(kept[0]), want), (
            f"{name}'s program exported for {chip.device}, run there on a matrix that only "
            "moves columns, gave another product than the CPU's program does: does it "
            "compute something else on that platform (jax.lax.platform_dependent)?"
        )
        once, _ = chip.time_program(program_request(data, [a, b], (0, 1), (), 3, set()))
        calls[name] = max(3, min(MAX_CHIP_CALLS, math.ceil(CHIP_REQUEST_SECONDS / once)))
    times = {name: [] for name in programs}
    for _ in range(CHIP_ROUNDS):
        for name, (data, _) in programs.items():
            request = program_request(data, [a, b], (0, 1), (), calls[name], set(), False)
            times[name].append(chip.time_program(request)[0])
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def chip_programs(ex, chip, f32_program, size):
    """Both matmuls exported for the chip's platform: matmul_bf16's, read as its CPU
    program was, and matmul_f32's where it is right (else the grader's own float32 one)."""
    spec = np.zeros((size, size), np.float32)
    bf16 = ex.matmul_bf16.exported_for_chip(chip, spec, spec)
    assert_bf16_products(bf16, f"matmul_bf16 exported for {chip.platform}")
    if f32_program is not None:
        f32 = ex.matmul_f32.exported_for_chip(chip, spec, spec).program.serialize()
    else:
        specs = [jax.ShapeDtypeStruct(spec.shape, jnp.float32)] * 2
        f32 = jax.export.export(jax.jit(judges_f32), platforms=[chip.platform])(*specs)
        f32 = f32.serialize()
    return {"matmul_f32": (f32, False), "matmul_bf16": (bf16.program.serialize(), True)}


def published(device):
    """The published peaks of a known chip: (name, float32, bfloat16), else None."""
    for name, pattern, f32, bf16 in PUBLISHED_PEAKS:
        if re.search(pattern, device, re.IGNORECASE):
            return name, f32, bf16
    return None


class Throughput(NamedTuple):
    """Both matmuls' figures on one device."""

    device: str
    size: int
    f32_seconds: float
    bf16_seconds: float
    f32_label: str  # "matmul_f32", or the grader's own where matmul_f32 is not right yet

    def tflops(self, seconds):
        return 2 * self.size**3 / seconds / 1e12

    @property
    def ratio(self):
        return self.f32_seconds / self.bf16_seconds

    @property
    def on_a_chip(self):
        return self.device != "the CPU"

    @property
    def ratio_asked(self):
        return self.on_a_chip and not re.search(NO_BF16_UNIT, self.device, re.IGNORECASE)

    def figure(self, label, seconds, peak, name):
        tflops = self.tflops(seconds)
        text = f"{label} {tflops:.3g} TFLOP/s ({format_seconds(seconds)} a call)"
        if peak:
            text += f", {100 * tflops / peak:.2g}% of the {name}'s published {peak:g}"
        return text

    def summary(self, named=True):
        """TFLOP/s of each, the fraction of a known chip's published peaks, the ratio; with
        the device's name where `named`."""
        known = published(self.device) if self.on_a_chip else None
        name, f32_peak, bf16_peak = known or ("", None, None)
        line = (
            f"{self.size}×{self.size} matrices{f' on {self.device}' if named else ''}: "
            f"{self.figure(self.f32_label, self.f32_seconds, f32_peak, name)}; "
            f"{self.figure('matmul_bf16', self.bf16_seconds, bf16_peak, name)}; "
            f"bf16 {format_ratio(self.ratio)}× float32's throughput"
        )
        if known and not f32_peak:
            line += f" (the {name} publishes no float32 peak" + (
                ": it multiplies float32 as bfloat16 passes)" if "TPU" in name else ")"
            )
        if self.ratio_asked:
            line += f" (needs {CHIP_RATIO:g}×)"
        elif self.on_a_chip:
            line += " (no ratio asked: this GPU has no bfloat16 matrix unit)"
        for chip, (f32, bf16) in TUTORIAL_FIGURES.items():
            line += f"; the tutorial on a {chip}: fp32 {f32:g}, bf16 {bf16:g} TFLOP/s"
        return line

    def cpu_note(self):
        faster = (
            "faster: this CPU has bfloat16 instructions (AVX-512 BF16 or AMX, on recent Xeons)"
            if self.ratio > 1
            else "no faster: this CPU has no bfloat16 arithmetic, so XLA widens bfloat16 to "
            "float32 before multiplying"
        )
        return (
            f"on a CPU no ratio is asked. bfloat16 ran {faster}; a TPU's or a recent GPU's "
            "matrix units multiply bfloat16 at many times their float32 rate, which is where "
            "its throughput shows"
        )


@pytest.mark.speed
@pytest.mark.task("matmul_bf16")
def test_matmul_bf16_outruns_matmul_f32_on_a_chip(ex, rng, record_property):
    """matmul_bf16: timed beside matmul_f32 by the grader; on a TPU or GPU 1.5× its TFLOP/s"""
    # The judge's own device is the CPU, unless a user's JAX_PLATFORMS named a chip.
    size = CPU_SIZE if jax.devices()[0].platform == "cpu" else CHIP_SIZE
    bf16 = exported_product(ex, "matmul_bf16", rng, size, size, size)
    assert_bf16_products(bf16, "jax.jit(matmul_bf16)")  # else its timing means nothing
    f32 = learners_f32_or_none(ex, rng, size)
    f32_label = "matmul_f32" if f32 is not None else "the grader's float32 matmul"
    runs = {
        "matmul_f32": jax.jit(f32.program.call) if f32 is not None else jax.jit(judges_f32),
        "matmul_bf16": jax.jit(bf16.program.call),
    }
    seconds = seconds_here(ex, runs, size, rng)
    here = Throughput(
        timed_device(), size, seconds["matmul_f32"], seconds["matmul_bf16"], f32_label
    )
    result, note = here, here.summary()
    chip = judges_chip()
    if chip is not None and not here.on_a_chip:
        try:
            chip.greeted()
            programs = chip_programs(ex, chip, f32, CHIP_SIZE)
            seconds = seconds_on_chip(chip, programs, rng)
            result = Throughput(
                chip.device, CHIP_SIZE, seconds["matmul_f32"], seconds["matmul_bf16"], f32_label
            )
            note = f"{result.summary()} (on the CPU, {here.summary(named=False)})"
        except ChipError as error:
            note += f" (not timed on the chip: {error})"
    if not result.on_a_chip:
        note += f"; {result.cpu_note()}"
    record_property(NOTE_PROPERTY, note)
    assert not result.ratio_asked or result.ratio >= CHIP_RATIO, (
        f"matmul_bf16 ran at {format_ratio(result.ratio)}× the throughput of {f32_label} on "
        f"{result.device} (needs {CHIP_RATIO:g}×): on this chip a bfloat16 matmul runs on "
        "the matrix unit at several times float32's rate. Are both inputs cast to "
        "jnp.bfloat16 inside the function, and nothing computed beside the matmul?"
    )


# --- achieved_tflops: the learner's measurement, held to the grader's -----------------------

# The function achieved_tflops is given: the grader's own jitted float32 matmul, new to JAX
# each time (a `salt` constant in it, so that no compilation cache holds it). For the 1-or-2
# call check its first call also waits FIRST_CALL_SECONDS, as a slow compile would: a timing
# that includes the first call cannot be mistaken for one that leaves it out. For the 8-12
# call check it comes compiled, so that only the waiting is judged there.
#
# Shapes: m and n in [384, 512], k at least 12·max(m, n), so that one dimension cubed (n³,
# k³) is 18× to 200× off 2·m·k·n, far past the curriculum's factor of 2; m·k·n (half) lies
# on it, and matmul_flops' own check is the one that catches it.
# A call takes 25-60 ms here (1.8-3.6 GFLOPs): long beside the 10-40 ms a call on a loaded
# machine waits for the CPU at times, which a call of a few ms cannot average out (measured
# on this 2-core Xeon at load 9, JAX 0.10.2: a right answer timing one 3 ms call read 0.2× to
# 1.3× the careful median, 14 of 40 outside 2×). A call not waited for returns in 7-200 µs
# (its dispatch), for up to 30 calls in a row (at 100 the queue fills and later calls wait:
# the check never asks for more than REPS_WAITED). A program holding a host callback is
# dispatched synchronously on the CPU (measured: 22 ms to return, 22 ms to finish), so the
# function has none.
DIM_RANGE = (384, 512)
FIRST_CALL_SECONDS = 1.0
# reps for the check that every call is waited for (a dispatch-only timing reads 100× too
# fast or more; a total over reps instead of one call's median 8× too slow: with 3 to 6
# calls timed, the total read inside the window at load 14), and for the one that compiling
# is left out (a median of 1 or 2 calls holds the first call's wait whenever it is timed).
REPS_WAITED = (8, 12)
REPS_FIRST = (1, 2)
# The curriculum: the learner's TFLOP/s within a factor of 2 of the grader's, either way.
# In seconds: from the grader's fastest careful call / 2 to its second slowest × 2, all
# timed around the learner's call, under the load it met (load only slows a call; an answer
# returning a minimum or a median passes). The second slowest, not the slowest: one stall of
# the judge's own (a careful call 9× its fastest, at a load that jumped) once opened the
# window to a total over 8 calls. Measured on this 2-core Xeon, JAX 0.10.2, with three busy
# loops beside the suites of others (load 5-6), calls of 25-60 ms: right answers read
# 0.43-1.58× the second slowest careful call with 1 or 2 calls timed, 0.73-1.44× with 8 to
# 12 (none of 70 outside; the fastest careful call read 0.57× at worst, inside its 0.5×);
# a count of n³ (18× slow) and a total over 8 or more calls never came inside; a call not
# waited for reads under 1/100×. Held to 2× the careful median instead, 10 of 70 right
# answers fell outside at load 8-10 (calls of 15-40 ms).
WINDOW = 2.0
CAREFUL_CALLS = 4
# A reading this far past the fast end is no noise (load never speeds a call up): it ends
# the check. One this far past the slow end, twice, ends it too: right answers read at most
# 0.8 of the way to it (1.58× the second slowest careful call, in the 70 readings above),
# and an answer that times the first call, its second's wait included, reads past it by
# far, so it fails in two attempts rather than six (each after a longer pause).
SHORT_PROOF = 3.0
LONG_PROOF = 3.0
LONG_PROOF_READINGS = 2
ATTEMPTS = 6
PAUSE_BETWEEN = 0.25


def judges_matmul(salt):
    """The grader's jitted float32 matmul, times `salt`."""
    return jax.jit(lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST) * salt)


@builds_in_learner_process
def judges_function_there(_ex, salt, shapes, compiled_first):
    """The grader's function, built in the learner's process (a function cannot cross as
    data): a handle here, for achieved_tflops to take. `compiled_first`: compiled there
    already, so that a timing of its calls shows only whether each was waited for (a stub's
    mean over 8-12 unwaited calls, its first one compiling and sleeping, read 0.5-2× the
    right figure under load: passed once in a warm run of a loaded CI); else its first call
    compiles and also waits FIRST_CALL_SECONDS, as a slow compile would."""
    jitted = judges_matmul(salt)
    if not compiled_first:
        return FirstCallSlow(jitted, FIRST_CALL_SECONDS)
    m, k, n = shapes
    specs = (jax.ShapeDtypeStruct((m, k), jnp.float32), jax.ShapeDtypeStruct((k, n), jnp.float32))
    return jitted.lower(*specs).compile()


def achieved_shapes():
    m, n = (PICK.randrange(DIM_RANGE[0], DIM_RANGE[1] + 1, 16) for _ in range(2))
    return m, 12 * max(m, n) + PICK.randrange(0, 513, 16), n


def careful_times(ex, twin, a, b):
    """Seconds of CAREFUL_CALLS finished calls of the grader's own compiled twin, timed here
    while every process of the learner's code is stopped."""
    times = []
    with held_still(ex):
        for _ in range(CAREFUL_CALLS):
            start = time.perf_counter()
            jax.block_until_ready(twin(a, b))
            times.append(time.perf_counter() - start)
    return times


@dataclass(frozen=True)
class Reading(TimingWindow):
    """One attempt: the seconds a call took by achieved_tflops' answer (2·m·k·n over its
    TFLOP/s), against the grader's careful timings around it."""

    tflops: float = 0.0

    def summary(self, flops):
        judged = flops / self.typical / 1e12
        return (
            f"achieved_tflops: {self.tflops:.3g} TFLOP/s, the grader's measurement of the same "
            f"function: {judged:.3g} TFLOP/s (ratio {self.tflops / judged:.3g}; allowed "
            f"{flops / self.high / 1e12:.3g} to {flops / self.low / 1e12:.3g}; attempt "
            f"{self.attempt})"
        )


def learners_tflops(got, call):
    """achieved_tflops' answer as a float: a Python float, or a NumPy or JAX scalar."""
    value = np.asarray(got)
    assert value.shape == () and value.dtype.kind == "f", (
        f"{call} returned {type(got).__name__} {show(got)}: return the TFLOP/s as one number"
    )
    tflops = float(value)
    assert math.isfinite(tflops) and tflops > 0, (
        f"{call} returned {tflops!r}: a matmul that takes a finite time runs at a positive, "
        "finite TFLOP/s"
    )
    return tflops


def read_once(ex, rng, shapes, reps, attempt, compiled_first):
    m, k, n = shapes
    a, b = inputs(rng, m, k, n)
    salt = PICK.uniform(1.0, 2.0)
    twin = judges_matmul(salt)
    for _ in range(2):  # compiles, then warms what a first run leaves cold
        jax.block_until_ready(twin(a, b))
    before = careful_times(ex, twin, a, b)
    call = f"achieved_tflops(f, a, b, {reps}) for a ({m}, {k}) and b ({k}, {n})"
    f = judges_function_there(ex, salt, shapes, compiled_first)
    tflops = learners_tflops(ex.achieved_tflops(f, a, b, reps), call)
    careful = before + careful_times(ex, twin, a, b)
    typical = statistics.median(careful)
    seconds = 2 * m * k * n / (tflops * 1e12)
    slowest = sorted(careful)[-2]  # one stall of the judge's own is not the load it met
    low, high = min(careful) / WINDOW, slowest * WINDOW
    return Reading(seconds, typical, low, high, attempt, tflops=tflops)


def judged_in_attempts(ex, rng, reps_range, compiled_first):
    """The first reading inside the window, the first too fast to be noise, or, after
    ATTEMPTS or LONG_PROOF_READINGS readings far too slow, the one closest to the window;
    and the shapes it was read at."""
    shapes = achieved_shapes()
    best, far_too_slow = None, 0
    for attempt in range(1, ATTEMPTS + 1):
        time.sleep(PAUSE_BETWEEN * (attempt - 1) * PICK.uniform(0.5, 1.5))
        reps = PICK.randint(*reps_range)
        reading = read_once(ex, rng, shapes, reps, attempt, compiled_first)
        if reading.inside or reading.seconds < reading.low / SHORT_PROOF:
            return reading, shapes, reps
        if best is None or reading.miss < best[0].miss:
            best = reading, shapes, reps
        far_too_slow += reading.seconds > reading.high * LONG_PROOF
        if far_too_slow == LONG_PROOF_READINGS:
            break
    return best


def assert_inside(reading, shapes, reps, record_property, slow_why):
    m, k, n = shapes
    flops = 2 * m * k * n
    record_property(NOTE_PROPERTY, reading.summary(flops))
    judged = flops / reading.typical / 1e12
    call = f"achieved_tflops(f, a, b, {reps}) for a ({m}, {k}) and b ({k}, {n})"
    ratio = reading.tflops / judged
    if ratio > HAND_OFF_AT_MOST:
        why = f"no timing reads that far off: {unit_slip(ratio).removeprefix('. Or a unit: ')}"
    elif reading.too_short:
        why = (
            "far more than the function can do: JAX returns from a call as soon as the work "
            "is queued, so a clock read right after it measures only the hand-off. Finish "
            "each timed call with .block_until_ready() before reading the clock"
            if reading.seconds < reading.low / SHORT_PROOF
            else "more than the function does: count 2·m·k·n FLOPs (a multiply and an add "
            "per term; m, k from a.shape, n from b.shape[1]) and time finished calls"
        )
    else:
        why = slow_why
    assert reading.inside, (
        f"{call} returned {reading.tflops:.3g} TFLOP/s, and the grader measured {judged:.3g} "
        f"for the same function ({reading.tflops / judged:.2g}×; within 2× either way "
        f"passes): {why}{'' if ratio > HAND_OFF_AT_MOST else unit_slip(ratio)}"
    )


# Off by a power of 1000 is what a unit slip gives; a timing of the hand-off alone can read
# 100-8000× too fast as well (a call of 25-60 ms against a dispatch of 7-200 µs), so where
# both fit, both are said.
# Past HAND_OFF_AT_MOST no unwaited timing explains it, and the unit is said alone.
HAND_OFF_AT_MOST = 1e5
UNIT_SLIPS = (
    (1e12, "FLOP/s (flops / seconds, not divided by 1e12) where TFLOP/s was asked"),
    (1e9, "kFLOP/s (/ 1e3) where TFLOP/s (/ 1e12) was asked"),
    (1e3, "GFLOP/s (flops / seconds / 1e9) where TFLOP/s (/ 1e12) was asked"),
    (1e6, "MFLOP/s (/ 1e6) where TFLOP/s (/ 1e12) was asked"),
    (1e-3, "PFLOP/s (/ 1e15), or seconds counted in milliseconds, where TFLOP/s was asked"),
)


def unit_slip(ratio):
    """A second cause for a reading `ratio` times the grader's, where a unit explains it."""
    for factor, said in UNIT_SLIPS:
        if factor / 2.5 <= ratio <= factor * 2.5:
            return f". Or a unit: {ratio:.3g}× is what {said} gives"
    return ""


@pytest.mark.task("achieved_tflops")
def test_achieved_tflops_waits_for_every_timed_call(ex, rng, record_property):
    """achieved_tflops: within 2× of the grader's measurement of the same function, 8-12 calls"""
    reading, shapes, reps = judged_in_attempts(ex, rng, REPS_WAITED, compiled_first=True)
    assert_inside(
        reading,
        shapes,
        reps,
        record_property,
        "far less than the function does: is the first call, which compiles, timed too (call f "
        "once, untimed, first), or a total returned instead of one call's median? Count "
        "2·m·k·n FLOPs with m, k = a.shape and n = b.shape[1]",
    )


@pytest.mark.task("achieved_tflops")
def test_achieved_tflops_leaves_compiling_out(ex, rng, record_property):
    """achieved_tflops: within 2× of the grader's with 1 or 2 timed calls: compiling left out"""
    reading, shapes, reps = judged_in_attempts(ex, rng, REPS_FIRST, compiled_first=False)
    assert_inside(
        reading,
        shapes,
        reps,
        record_property,
        "far less than the function does: with one or two calls timed, a median that holds "
        "the first call holds its compiling too (here the function's first call also waits "
        f"{FIRST_CALL_SECONDS:g} s, as a slow compile would). Call f once, untimed, before "
        "the timed calls",
    )
