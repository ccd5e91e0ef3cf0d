"""Wrong answers a learner writes for 10_debugging, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` entries are other
right answers, appended the same way, that must pass every check.
"""

MISTAKES = [
    {
        "name": "a Python print, which runs once while tracing",
        "advice": None,
        "code": """
def log_norm(x):
    print(f"norm={jnp.linalg.norm(x)}")
    return 2 * x
""",
        "fails": ["test_log_norm_prints_on_every_jitted_call"],
        "says": "formatted by Python while jax.jit traces the function",
    },
    {
        "name": "jax.debug.print of an f-string, formatted once while tracing",
        "advice": None,
        "code": """
def log_norm(x):
    jax.debug.print(f"norm={jnp.linalg.norm(x)}")
    return 2 * x
""",
        "fails": ["test_log_norm_prints_on_every_jitted_call"],
        "says": "an f-string handed to jax.debug.print",
    },
    {
        "name": "print(float(norm)), like loss.item()",
        "advice": "a traced value turned into a Python number",
        "code": """
def log_norm(x):
    print(f"norm={float(jnp.linalg.norm(x))}")
    return 2 * x
""",
        "fails": ["test_log_norm_prints_on_every_jitted_call"],
        "raises": "ConcretizationTypeError",
    },
    {
        "name": "jax.debug.print of the squared norm",
        "advice": None,
        "code": """
def log_norm(x):
    jax.debug.print("norm={}", jnp.sum(x**2))
    return 2 * x
""",
        "fails": ["test_log_norm_prints_eagerly", "test_log_norm_prints_on_every_jitted_call"],
    },
    {
        "name": "time.time() around one call: no warm-up, no wait",
        "advice": None,
        "code": """
def time_call(fn, *args):
    start = time.time()
    fn(*args)
    return time.time() - start
""",
        "fails": ["test_time_call_measures_one_finished_call"],
    },
    {
        "name": "warmed up, but never waits for the result",
        "advice": None,
        "code": """
def time_call(fn, *args):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
""",
        "fails": ["test_time_call_measures_one_finished_call"],
    },
    {
        "name": "waits, but the mean of 3 calls includes the compiling one",
        "advice": None,
        "code": """
def time_call(fn, *args):
    start = time.perf_counter()
    for _ in range(3):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - start) / 3
""",
        "fails": ["test_time_call_measures_one_finished_call"],
    },
    {
        "name": "the total of 10 calls, not the time of one",
        "advice": None,
        "code": """
def time_call(fn, *args):
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    for _ in range(10):
        jax.block_until_ready(fn(*args))
    return time.perf_counter() - start
""",
        "fails": ["test_time_call_measures_one_finished_call"],
    },
    {
        "name": "result.block_until_ready() on a pytree result",
        "advice": "jax.block_until_ready(result)",
        "code": """
def time_call(fn, *args):
    fn(*args).block_until_ready()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
""",
        "fails": ["test_time_call_measures_one_finished_call"],
        "raises": "AttributeError",
    },
    {
        "name": "the plain sqrt(sum(x**2)): NaN gradient at zero",
        "advice": None,
        "code": """
def safe_norm(x):
    return jnp.sqrt(jnp.sum(x**2))
""",
        "fails": ["test_safe_norm_at_zero", "test_safe_norm_under_jit_and_vmap"],
    },
    {
        "name": "jnp.linalg.norm: NaN gradient at zero",
        "advice": None,
        "code": """
def safe_norm(x):
    return jnp.linalg.norm(x)
""",
        "fails": ["test_safe_norm_at_zero", "test_safe_norm_under_jit_and_vmap"],
    },
    {
        "name": "one jnp.where after the sqrt: the backward pass still meets 0 * inf",
        "advice": None,
        "code": """
def safe_norm(x):
    squares = jnp.sum(x**2)
    return jnp.where(squares == 0, 0.0, jnp.sqrt(squares))
""",
        "fails": ["test_safe_norm_at_zero", "test_safe_norm_under_jit_and_vmap"],
    },
    {
        "name": "an epsilon inside the sqrt: the value at zero is not 0",
        "advice": None,
        "code": """
def safe_norm(x):
    return jnp.sqrt(jnp.sum(x**2) + 1e-12)
""",
        "fails": ["test_safe_norm_at_zero", "test_safe_norm_under_jit_and_vmap"],
    },
    {
        "name": "a Python if on the traced vector",
        "advice": "a Python `if`/`while`",
        "code": """
def safe_norm(x):
    if jnp.all(x == 0):
        return jnp.zeros((), x.dtype)
    return jnp.sqrt(jnp.sum(x**2))
""",
        "fails": [
            "test_safe_norm_at_zero",
            "test_safe_norm_value",
            "test_safe_norm_under_jit_and_vmap",
        ],
        "raises": "TracerBoolConversionError",
    },
    {
        "name": "safe_norm with torch's dim= keyword",
        "advice": "`axis=`",
        "code": """
def safe_norm(x):
    n = jnp.linalg.norm(x, dim=0)
    return jnp.where(n == 0, 0.0, n)
""",
        "fails": ["test_safe_norm_value"],
        "raises": "TypeError",
        "explains": "`dim=`",
    },
    {
        # Told before "did you time the first call": 1000× a call, where a compile is
        # 10-80×; now by the unit the sleeping workload's 10 ms calls read in.
        "name": "time_call in milliseconds, as a profiler shows them",
        "advice": None,
        "code": """
def time_call(fn, *args):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(TIMED_CALLS):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
""",
        "fails": ["test_time_call_measures_one_finished_call"],
        "says": "as milliseconds where seconds were asked would give",
    },
    {
        "name": "time_call returns a fixed time and never calls fn",
        "advice": None,
        "code": """
def time_call(fn, *args):
    return 0.008
""",
        "fails": ["test_time_call_measures_one_finished_call"],
        "says": "called fn 0 time(s)",
    },
    {
        # Calls fn as asked, then returns one number: above the sleeping workload's 10 ms
        # and within 1/3x to 3x of the check's 10-20 ms call, so only the call 16x as long
        # tells it from a measurement.
        "name": "time_call calls fn 3 times, waited, and returns a fixed time",
        "advice": None,
        "code": """
def time_call(fn, *args):
    for _ in range(3):
        jax.block_until_ready(fn(*args))
    return 0.015
""",
        "fails": ["test_time_call_measures_one_finished_call"],
        "says": "as long",
    },
    {
        "name": "safe_norm that tells the zero vector by its sum",
        "advice": None,
        "code": """
def safe_norm(x):
    zero = jnp.sum(x) == 0
    squares = jnp.sum(x**2)
    return jnp.where(zero, 0.0, jnp.sqrt(jnp.where(zero, 1.0, squares)))
""",
        "fails": ["test_safe_norm_value", "test_safe_norm_gradient"],
        "says": "its entries sum to 0",
    },
    {
        # CPU time: the process's threads' work, which a call waiting on a sleep or a
        # device does not show.
        "name": "time_call on time.process_time, a CPU clock",
        "advice": None,
        "code": """
def time_call(fn, *args):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(TIMED_CALLS):
        start = time.process_time()
        jax.block_until_ready(fn(*args))
        times.append(time.process_time() - start)
    return statistics.median(times)
""",
        "fails": ["test_time_call_measures_one_finished_call"],
        "says": "time.process_time",
    },
    {
        "name": "time_call times a single warm call",
        "advice": None,
        "code": """
def time_call(fn, *args):
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start
""",
        "fails": ["test_time_call_measures_one_finished_call"],
        "says": "called fn 2 time(s)",
    },
    {
        "name": "log_norm prints the norm with 3 decimals, not 4 significant digits",
        "advice": None,
        "code": """
def log_norm(x):
    jax.debug.print("norm={:.3f}", jnp.linalg.norm(x))
    return 2 * x
""",
        "fails": ["test_log_norm_prints_eagerly", "test_log_norm_prints_on_every_jitted_call"],
        "says": "significant digits",
    },
]

CORRECT = [
    {
        "name": "time_call: the minimum of 7 waited calls after a warm-up",
        "code": """
def time_call(fn, *args):
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best
""",
    },
    {
        "name": "time_call: the median of 5 waited calls, the compiling one among them",
        "code": """
def time_call(fn, *args):
    times = []
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(sorted(times)[2])
""",
    },
    {
        "name": "safe_norm with a custom JVP",
        "code": """
@jax.custom_jvp
def safe_norm(x):
    return jnp.sqrt(jnp.sum(x**2))


@safe_norm.defjvp
def _safe_norm_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    norm = safe_norm(x)
    direction = jnp.where(norm == 0, 0.0, x / jnp.where(norm == 0, 1.0, norm))
    return norm, jnp.dot(direction, dx)
""",
    },
    {
        "name": "log_norm with jax.debug.callback and a keyword format",
        "code": """
def log_norm(x):
    jax.debug.callback(lambda value: print(f"norm={float(value):.6g}"), jnp.linalg.norm(x))
    return 2 * x
""",
    },
    {
        "name": "time_call: exactly 3 waited calls on time.monotonic, no warm-up, the median",
        "code": """
def time_call(fn, *args):
    times = []
    for _ in range(3):
        start = time.monotonic()
        jax.block_until_ready(fn(*args))
        times.append(time.monotonic() - start)
    return float(statistics.median(times))
""",
    },
]
