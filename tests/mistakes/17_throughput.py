"""Wrong answers a learner writes for 17_throughput, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` lists other right
answers, each appended the same way, that must pass every check.

Left out on purpose: achieved_tflops counting m·k·n FLOPs (half of 2·m·k·n). It reads exactly
half the right figure, on the curriculum's own edge (within a factor of 2 either way), and
no timing can tell it from a right answer timed on a loaded machine; matmul_flops' check
catches the same count where the learner writes it (the first entry).
"""

MISTAKES = [
    {
        "name": "m·k·n FLOPs: the multiply counted, the add forgotten",
        "advice": None,
        "code": """
def matmul_flops(m, k, n):
    return m * k * n
""",
        "fails": ["test_matmul_flops_counts_a_multiply_and_an_add_per_term"],
        "says": "half of it",
    },
    {
        "name": "n³ FLOPs, as if every matmul were square",
        "advice": None,
        "code": """
def matmul_flops(m, k, n):
    return 2 * n**3
""",
        "fails": ["test_matmul_flops_counts_a_multiply_and_an_add_per_term"],
        "says": "m·n sums of k products",
    },
    {
        "name": "FLOPs counted in a JAX int32, which wraps past 2**31",
        "advice": None,
        "code": """
def matmul_flops(m, k, n):
    return 2 * jnp.prod(jnp.array([m, k, n]))
""",
        "fails": ["test_matmul_flops_counts_a_multiply_and_an_add_per_term"],
        "says": "not a Python int",
    },
    {
        "name": "bytes of the two inputs, the output left out",
        "advice": None,
        "code": """
def matmul_bytes(m, k, n, dtype):
    return (m * k + k * n) * jnp.dtype(dtype).itemsize
""",
        "fails": ["test_matmul_bytes_counts_both_inputs_and_the_output"],
        "says": "the inputs alone",
    },
    {
        "name": "bits, not bytes: finfo(dtype).bits",
        "advice": None,
        "code": """
def matmul_bytes(m, k, n, dtype):
    return (m * k + k * n + m * n) * jnp.finfo(dtype).bits
""",
        "fails": ["test_matmul_bytes_counts_both_inputs_and_the_output"],
        "says": "bits, not bytes",
    },
    {
        "name": "elements, not bytes",
        "advice": None,
        "code": """
def matmul_bytes(m, k, n, dtype):
    return m * k + k * n + m * n
""",
        "fails": ["test_matmul_bytes_counts_both_inputs_and_the_output"],
        "says": "elements, not bytes",
    },
    {
        # jnp.float32 is a scalar type with no `.itemsize` of its own (a NumPy dtype has one).
        "name": "dtype.itemsize, which JAX's scalar types lack",
        "advice": "jnp.dtype(dtype).itemsize",
        "code": """
def matmul_bytes(m, k, n, dtype):
    return (m * k + k * n + m * n) * dtype.itemsize
""",
        "fails": ["test_matmul_bytes_counts_both_inputs_and_the_output"],
        "says": "has no attribute 'itemsize'",
    },
    {
        "name": "roofline as the sum of compute and memory time",
        "advice": None,
        "code": """
def roofline_seconds(flops, nbytes, peak_flops, bandwidth):
    return flops / peak_flops + nbytes / bandwidth
""",
        "fails": ["test_roofline_seconds_is_the_longer_of_compute_and_memory"],
        "says": "the sum of the two times",
    },
    {
        "name": "roofline as the shorter of the two times",
        "advice": None,
        "code": """
def roofline_seconds(flops, nbytes, peak_flops, bandwidth):
    return min(flops / peak_flops, nbytes / bandwidth)
""",
        "fails": ["test_roofline_seconds_is_the_longer_of_compute_and_memory"],
        "says": "the shorter of the two times",
    },
    {
        # A units slip: bandwidths are quoted in GB/s, and the contract's is already bytes/s.
        "name": "roofline with the bandwidth taken for GB/s",
        "advice": None,
        "code": """
def roofline_seconds(flops, nbytes, peak_flops, bandwidth):
    return max(flops / peak_flops, nbytes / (bandwidth * 1e9))
""",
        "fails": ["test_roofline_seconds_is_the_longer_of_compute_and_memory"],
        "says": "no factor of 1e9",
    },
    {
        "name": "roofline as a JAX float32 scalar",
        "advice": None,
        "code": """
def roofline_seconds(flops, nbytes, peak_flops, bandwidth):
    return jnp.maximum(flops / peak_flops, nbytes / bandwidth)
""",
        "fails": ["test_roofline_seconds_is_the_longer_of_compute_and_memory"],
        "says": "not a Python float",
    },
    {
        "name": "bound_by with the comparison reversed",
        "advice": None,
        "code": """
def bound_by(flops, nbytes, peak_flops, bandwidth):
    return "memory" if flops / peak_flops >= nbytes / bandwidth else "compute"
""",
        "fails": ["test_bound_by_names_the_longer_time"],
        "says": "reversed",
    },
    {
        "name": "bound_by calling a tie memory-bound (> for >=)",
        "advice": None,
        "code": """
def bound_by(flops, nbytes, peak_flops, bandwidth):
    return "compute" if flops / peak_flops > nbytes / bandwidth else "memory"
""",
        "fails": ["test_bound_by_names_the_longer_time"],
        "says": "tie",
    },
    {
        # Intensity (FLOPs per byte) against the ridge upside down (bytes/s per FLOP/s).
        "name": "bound_by comparing the intensity with the ridge turned upside down",
        "advice": None,
        "code": """
def bound_by(flops, nbytes, peak_flops, bandwidth):
    return "compute" if flops / nbytes >= bandwidth / peak_flops else "memory"
""",
        "fails": ["test_bound_by_names_the_longer_time"],
        "says": "compare the times",
    },
    {
        "name": "matmul_f32 at JAX's default precision (one bfloat16 pass on a TPU)",
        "advice": None,
        "code": """
def matmul_f32(a, b):
    return jnp.matmul(a, b)
""",
        "fails": ["test_matmul_f32_asks_for_full_precision_on_any_backend"],
        "says": "DEFAULT",
    },
    {
        "name": "matmul_f32 at HIGH precision (three bfloat16 passes on a TPU)",
        "advice": None,
        "code": """
def matmul_f32(a, b):
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGH)
""",
        "fails": ["test_matmul_f32_asks_for_full_precision_on_any_backend"],
        "says": "HIGH",
    },
    {
        "name": "matmul_f32 autocast to bfloat16",
        "advice": None,
        "code": """
def matmul_f32(a, b):
    return jnp.matmul(
        a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32
    )
""",
        "fails": [
            "test_matmul_f32_matches_the_float64_product",
            "test_matmul_f32_asks_for_full_precision_on_any_backend",
        ],
    },
    {
        "name": "matmul_bf16 summed in bfloat16 and cast to float32 after (autocast's look)",
        "advice": None,
        "code": """
def matmul_bf16(a, b):
    return (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)).astype(jnp.float32)
""",
        # Judged by its program: under jax.jit XLA on a CPU may drop the bfloat16 rounding a
        # cast back to float32 follows (JAX 0.10.2 does), and then its values pass.
        "fails": [
            "test_matmul_bf16_multiplies_bfloat16_and_sums_float32",
            "test_matmul_bf16_outruns_matmul_f32_on_a_chip",
        ],
        "says": "rounded to 16 bits",
    },
    {
        "name": "matmul_bf16 returning bfloat16",
        "advice": None,
        "code": """
def matmul_bf16(a, b):
    return a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)
""",
        "fails": [
            "test_matmul_bf16_matches_the_product_of_rounded_inputs",
            "test_matmul_bf16_multiplies_bfloat16_and_sums_float32",
        ],
        "says": "not float32",
    },
    {
        # Right values, and nothing for a matrix unit to speed up: the multiply is float32.
        "name": "matmul_bf16 rounding the inputs, then multiplying them in float32",
        "advice": None,
        "code": """
def matmul_bf16(a, b):
    a = a.astype(jnp.bfloat16).astype(jnp.float32)
    b = b.astype(jnp.bfloat16).astype(jnp.float32)
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
""",
        "fails": ["test_matmul_bf16_multiplies_bfloat16_and_sums_float32"],
        "says": "must take the bfloat16 inputs",
    },
    {
        "name": "matmul_bf16 never rounding its float32 inputs",
        "advice": None,
        "code": """
def matmul_bf16(a, b):
    return jnp.matmul(a, b, preferred_element_type=jnp.float32)
""",
        "fails": [
            "test_matmul_bf16_matches_the_product_of_rounded_inputs",
            "test_matmul_bf16_multiplies_bfloat16_and_sums_float32",
        ],
    },
    {
        "name": "matmul_bf16 in float16, as torch.autocast picks on most GPUs",
        "advice": None,
        "code": """
def matmul_bf16(a, b):
    return jnp.matmul(
        a.astype(jnp.float16), b.astype(jnp.float16), preferred_element_type=jnp.float32
    )
""",
        "fails": [
            "test_matmul_bf16_matches_the_product_of_rounded_inputs",
            "test_matmul_bf16_multiplies_bfloat16_and_sums_float32",
        ],
    },
    {
        # Asynchronous dispatch: each call returns once queued; the clock sees the hand-off.
        "name": "achieved_tflops warmed up, but never waiting for a timed call",
        "advice": None,
        "code": """
def achieved_tflops(f, a, b, reps):
    f(a, b).block_until_ready()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f(a, b)
        times.append(time.perf_counter() - start)
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / statistics.median(times) / 1e12
""",
        "fails": ["test_achieved_tflops_waits_for_every_timed_call"],
        "says": "queued",
        # With 1 or 2 timed calls, not waiting reads right or 100-200x too fast by the JAX
        # version's dispatch: it passed twice on 0.10.2 and read 110-210x on 0.5.3 (the
        # floor comparison in a clean clone's .ci/run). The check of 8-12 calls decides it.
        "undecided": ["test_achieved_tflops_leaves_compiling_out"],
    },
    {
        "name": "achieved_tflops timing the first call, which compiles",
        "advice": None,
        "code": """
def achieved_tflops(f, a, b, reps):
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / statistics.median(times) / 1e12
""",
        "fails": ["test_achieved_tflops_leaves_compiling_out"],
        "says": "untimed",
    },
    {
        "name": "achieved_tflops with the stub's timing: no warm-up, no waiting, a mean",
        "advice": None,
        "code": """
def achieved_tflops(f, a, b, reps):
    start = time.perf_counter()
    for _ in range(reps):
        f(a, b)
    seconds = (time.perf_counter() - start) / reps
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / seconds / 1e12
""",
        "fails": ["test_achieved_tflops_leaves_compiling_out"],
    },
    {
        "name": "achieved_tflops counting n³ FLOPs, as if the matmul were square",
        "advice": None,
        "code": """
def achieved_tflops(f, a, b, reps):
    f(a, b).block_until_ready()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    n = b.shape[1]
    return 2 * n**3 / statistics.median(times) / 1e12
""",
        "fails": [
            "test_achieved_tflops_waits_for_every_timed_call",
            "test_achieved_tflops_leaves_compiling_out",
        ],
        "says": "far less than the function does",
    },
    {
        "name": "achieved_tflops in GFLOP/s: divided by 1e9, not 1e12",
        "advice": None,
        "code": """
def achieved_tflops(f, a, b, reps):
    f(a, b).block_until_ready()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / statistics.median(times) / 1e9
""",
        "fails": [
            "test_achieved_tflops_waits_for_every_timed_call",
            "test_achieved_tflops_leaves_compiling_out",
        ],
        "says": "GFLOP/s (flops / seconds / 1e9)",
    },
    {
        "name": "achieved_tflops in FLOP/s: never divided by 1e12",
        "advice": None,
        "code": """
def achieved_tflops(f, a, b, reps):
    f(a, b).block_until_ready()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / statistics.median(times)
""",
        "fails": [
            "test_achieved_tflops_waits_for_every_timed_call",
            "test_achieved_tflops_leaves_compiling_out",
        ],
        "says": "no timing reads that far off",
    },
    {
        "name": "achieved_tflops timing in milliseconds",
        "advice": None,
        "code": """
def achieved_tflops(f, a, b, reps):
    f(a, b).block_until_ready()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append((time.perf_counter() - start) * 1e3)
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / statistics.median(times) / 1e12
""",
        "fails": [
            "test_achieved_tflops_waits_for_every_timed_call",
            "test_achieved_tflops_leaves_compiling_out",
        ],
        "says": "seconds counted in milliseconds",
    },
    {
        "name": "achieved_tflops dividing by the total time of all reps",
        "advice": None,
        "code": """
def achieved_tflops(f, a, b, reps):
    f(a, b).block_until_ready()
    start = time.perf_counter()
    for _ in range(reps):
        f(a, b).block_until_ready()
    (m, k), n = a.shape, b.shape[1]
    return matmul_flops(m, k, n) / (time.perf_counter() - start) / 1e12
""",
        "fails": ["test_achieved_tflops_waits_for_every_timed_call"],
    },
]

CORRECT = [
    {
        "name": "jnp.dot and lax.dot_general, NumPy's itemsize, the ridge compared with intensity",
        "code": """
import numpy as np


def matmul_bytes(m, k, n, dtype):
    return (m * k + k * n + m * n) * np.dtype(dtype).itemsize


def bound_by(flops, nbytes, peak_flops, bandwidth):
    return "compute" if flops / nbytes >= peak_flops / bandwidth else "memory"


def matmul_f32(a, b):
    return jnp.dot(a, b, precision="highest")


def matmul_bf16(a, b):
    dims = (((1,), (0,)), ((), ()))
    a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    return jax.lax.dot_general(a, b, dims, preferred_element_type=jnp.float32)
""",
    },
    {
        "name": "@ under default_matmul_precision, einsum, bits // 8, an if for the roofline",
        "code": """
def matmul_bytes(m, k, n, dtype):
    return (m * k + k * n + m * n) * (jnp.finfo(dtype).bits // 8)


def roofline_seconds(flops, nbytes, peak_flops, bandwidth):
    compute, memory = flops / peak_flops, nbytes / bandwidth
    return compute if compute >= memory else memory


def matmul_f32(a, b):
    with jax.default_matmul_precision("highest"):
        return a @ b


def matmul_bf16(a, b):
    return jnp.einsum(
        "mk,kn->mn", a.astype(jnp.bfloat16), b.astype(jnp.bfloat16),
        preferred_element_type=jnp.float32,
    )
""",
    },
    {
        "name": "achieved_tflops on time.monotonic, jax.block_until_ready and np.median",
        "code": """
import numpy as np


def achieved_tflops(f, a, b, reps):
    jax.block_until_ready(f(a, b))
    times = []
    for _ in range(reps):
        start = time.monotonic()
        jax.block_until_ready(f(a, b))
        times.append(time.monotonic() - start)
    m, k = a.shape
    return 2 * m * k * b.shape[1] / np.median(times) / 1e12
""",
    },
    {
        "name": "matmul_f32 as JAX's float32 dot algorithm",
        "code": """
def matmul_f32(a, b):
    return jax.lax.dot(a, b, precision=jax.lax.DotAlgorithmPreset.F32_F32_F32)
""",
    },
]
