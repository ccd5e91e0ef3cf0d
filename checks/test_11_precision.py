"""Checks for 11_precision: float32 sums of bfloat16 products, dtypes kept, no overflow.

Every reference is computed here in float64 NumPy from the exact values of the inputs,
never from the learner's functions; the inputs are built on the host in their dtype.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kata.checking.expect import show
from kata.checking.learner_calls import in_learner_process
from kata.findings import Finding

# Each matmul entry's error allowed, per the curriculum: 1e-6 · |row of a| · |column of b|.
# Sums in float32 stay near 1e-7 of that bound even at k = 4096 (measured: 1.2e-7 at most);
# a result rounded to bfloat16 is off by up to 2**-9 of each entry, 1e-4 to 1e-2 of it.
MATMUL_RELATIVE = 1e-6
ULPS = 2
LOGSUMEXP_RTOL = {"float32": 1e-5, "bfloat16": 2e-2}
LOGSUMEXP_RANGE = {"float32": 1e4, "bfloat16": 1e3}
SCALE_DTYPES = ("bfloat16", "float16", "float32")


def host_array(values, dtype):
    """`values` rounded to `dtype` on the host (NumPy knows bfloat16 through ml_dtypes)."""
    return np.asarray(values, dtype=jnp.dtype(dtype))


def exact(array):
    return np.asarray(array, dtype=np.float64)


def dtype_name(value):
    return str(getattr(value, "dtype", type(value).__name__))


def returned(value, call):
    """The learner's result as an array, or a message saying what came back instead."""
    assert hasattr(value, "dtype") and hasattr(value, "shape"), (
        f"{call} should return a JAX array, but returned {type(value).__name__}: {show(value)}"
    )
    return value


# --- matmul_f32 ------------------------------------------------------------------------------

MATMUL_SHAPES = [(3, 5, 4), (16, 64, 8), (4, 4096, 3)]


def np_matmul(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


def matmul_inputs(rng, n, k, m):
    return host_array(rng.normal(size=(n, k)), "bfloat16"), host_array(
        rng.normal(size=(k, m)), "bfloat16"
    )


@pytest.mark.task("matmul_f32")
def test_matmul_f32_returns_float32(ex, rng):
    """matmul_f32: returns a float32 (n, m) matrix, under jax.jit"""
    a, b = matmul_inputs(rng, 3, 5, 4)
    got = returned(ex.matmul_f32.jit()(a, b), "jax.jit(matmul_f32)(a, b)")
    assert got.shape == (3, 4), (
        f"jax.jit(matmul_f32)(a, b) for a (3, 5) and b (5, 4) returned shape {got.shape}, "
        "not (3, 4)"
    )
    assert got.dtype == jnp.float32, (
        f"jax.jit(matmul_f32)(a, b) on two bfloat16 matrices returned {got.dtype}, not "
        "float32: like torch.matmul, a bfloat16 matmul gives bfloat16 unless asked otherwise"
    )


def check_matmul(ex, rng, how):
    matmul = ex.matmul_f32 if how == "eagerly" else ex.matmul_f32.jit()
    call_of = "matmul_f32" if how == "eagerly" else "jax.jit(matmul_f32)"
    for n, k, m in MATMUL_SHAPES:
        a, b = matmul_inputs(rng, n, k, m)
        a64, b64 = exact(a), exact(b)
        want = a64 @ b64
        call = f"{call_of}(a, b) for a ({n}, {k}) and b ({k}, {m})"
        got = exact(returned(matmul(a, b), call))
        assert got.shape == want.shape, f"{call} returned shape {got.shape}, not {want.shape}"
        allowed = MATMUL_RELATIVE * np.outer(
            np.linalg.norm(a64, axis=1), np.linalg.norm(b64, axis=0)
        )
        error = np.abs(got - want)
        worst = np.unravel_index(np.argmax(error / allowed), error.shape)
        assert np.all(error <= allowed), (
            f"{call} is off by {error[worst]:.3g} at {tuple(int(i) for i in worst)} "
            f"(allowed {allowed[worst]:.3g}): expected {want[worst]:.7g}, got {got[worst]:.7g}. "
            "Errors this large come from rounding to bfloat16 (8 significant bits) somewhere: "
            "the products must be summed, and returned, in float32"
        )


@pytest.mark.task("matmul_f32")
def test_matmul_f32_sums_in_float32(ex, rng):
    """matmul_f32: matches the exact product within float32 rounding, k from 5 to 4096"""
    check_matmul(ex, rng, "eagerly")


# Under jax.jit, XLA may drop a bfloat16 rounding that is converted straight back to float32
# (on CPU, JAX 0.10.2 did and 0.12 does not), so the values alone would judge the stub by
# the JAX version: the program the function exports says what it asks to sum in.
@pytest.mark.task("matmul_f32")
def test_matmul_f32_under_jit(ex, rng):
    """matmul_f32: as accurate under jax.jit, its matmul asking for a float32 result"""
    a, b = matmul_inputs(rng, 3, 64, 4)
    program = ex.matmul_f32.exported(a, b, reference=np_matmul, rtol=0.05)
    # Any operation, not only the matmul: products taken in bfloat16 and summed in float32
    # (`jnp.sum(a[:, :, None] * b, axis=1, dtype=jnp.float32)`), or inputs cast to float16,
    # round as surely.
    narrow = program.computed_in(("bf16", "f16"))
    assert not narrow, (
        "jax.jit(matmul_f32)'s program computes in 16 bits: "
        + ", ".join(sorted({f"{op} whose result is {kind}" for op, kind in narrow}))
        + ": "
        "products or sums rounded to bfloat16 or float16 lose bits a cast afterwards cannot "
        "bring back (a compiler may skip that rounding on one version and not another). Ask "
        "the matmul itself for float32: jnp.matmul(a, b, preferred_element_type=jnp.float32)"
    )
    check_matmul(ex, rng, "under jax.jit")


# --- scale -----------------------------------------------------------------------------------


def scale_factors(rng):
    """One factor s of each kind the contract allows, 0.01 <= |s| <= 100: its kind, the
    value it is built from (by `scaled`) and its exact value."""
    magnitude = math.exp(rng.uniform(math.log(0.01), math.log(100)))
    value = float(magnitude * rng.choice([-1.0, 1.0]))
    return [
        ("a Python float", value, value),
        ("a NumPy float64", value, value),
        ("a 0-d float32 array", value, float(np.float32(value))),
    ]


@in_learner_process
def scaled(ex, x, kind, value, how):
    """scale(x, s), eagerly or under jax.jit, with s of `kind` built here: a NumPy scalar
    sent to this process would arrive as a JAX array."""
    if kind == "a NumPy float64":
        s = np.float64(value)
    elif kind == "a 0-d float32 array":
        s = jax.device_put(np.float32(value))
    else:
        s = value
    fn = ex.scale if how == "eagerly" else jax.jit(ex.scale)
    return fn(x, s)


def ulp(values, dtype):
    """The spacing of `dtype`'s numbers at each of `values` (subnormals included)."""
    info = jnp.finfo(dtype)
    exponent = np.floor(np.log2(np.maximum(np.abs(values), float(info.smallest_normal))))
    return np.exp2(exponent - info.nmant)


def check_scale(ex, rng, how):
    call_of = "scale" if how == "eagerly" else "jax.jit(scale)"
    for dtype in SCALE_DTYPES:
        x = host_array(rng.uniform(-100, 100, size=40), dtype)
        for kind, value, s_value in scale_factors(rng):
            call = f"{call_of}(x, s) with x {dtype} and s {kind} ({s_value:.4g})"
            got = returned(scaled(ex, x, kind, value, how), call)
            assert got.dtype == jnp.dtype(dtype), f"{call} returned {got.dtype}, not {dtype}: " + (
                "a strongly typed float32 factor (a NumPy scalar such as np.float64(s), "
                f"or a float32 array) promotes a {dtype} x to float32; only a Python "
                "float is weakly typed and leaves x's dtype alone. The result must keep "
                "x's dtype"
                if got.dtype == jnp.float32
                else "the result must keep x's dtype"
            )
            want = exact(x) * s_value
            error = np.abs(exact(got) - want)
            allowed = ULPS * ulp(want, dtype)
            assert got.shape == x.shape and np.all(error <= allowed), (
                f"{call} is off by more than {ULPS} ulp of {dtype}: expected {show(want)}, "
                f"got {show(got)}"
            )


@pytest.mark.task("scale")
def test_scale_keeps_dtype(ex, rng):
    """scale: x * s in x's dtype (bfloat16, float16, float32) for every kind of s"""
    check_scale(ex, rng, "eagerly")


@pytest.mark.task("scale")
def test_scale_under_jit(ex, rng):
    """scale: jax.jit(scale)(x, s) works with s traced, for every kind of s"""
    check_scale(ex, rng, "under jax.jit")


# --- logsumexp -------------------------------------------------------------------------------


def exact_logsumexp(x):
    x = exact(x)
    largest = x.max(axis=-1, keepdims=True)
    return largest[..., 0] + np.log(np.exp(x - largest).sum(axis=-1))


def rows_far_apart(rng, shape, dtype):
    """Rows centred anywhere in the contract's range, with spread within each row, and two
    rows of zeros with one outlier each (`with_outliers`)."""
    limit = LOGSUMEXP_RANGE[dtype]
    centres = rng.uniform(-0.9 * limit, 0.9 * limit, size=(*shape[:-1], 1))
    spread = rng.normal(size=shape) * rng.choice([0.1, 3.0, 30.0])
    return host_array(with_outliers(rng, np.clip(centres + spread, -limit, limit), limit), dtype)


def with_outliers(rng, x, limit):
    """`x` with two of its rows made zeros and one entry 0.5 to 0.9 of `limit` away: +limit
    past the row's first entry, -limit anywhere.

    A shift by anything but the row's max leaves exp overflowing on one of them: by the
    row's mean (the outlier / row length), exp(outlier - mean) on the + row; by its first
    entry, the same on the + row, or exp(-outlier) on the - row when it comes first. Drawn
    without them, only the spread 30 above was wide enough, and those shifts passed 85% of
    draws."""
    rows = x.reshape(-1, x.shape[-1]).copy()
    size = rows.shape[-1]
    chosen = rng.choice(len(rows), size=2, replace=False)
    rows[chosen] = 0.0
    away = rng.uniform(0.5, 0.9, size=2) * limit
    rows[chosen[0], rng.integers(1, size)] = away[0]
    rows[chosen[1], rng.integers(0, size)] = -away[1]
    return rows.reshape(x.shape)


def one_shift_finite_rows(x):
    """Which rows stay finite when the whole batch is shifted by its one largest value
    (float32 arithmetic, as the learner's code would run it): the rows near that max.

    Two answers: with exp's subnormal results kept (NumPy), and flushed to 0 (XLA on CPU
    flushes them). A row whose max lies 87 to 104 below the batch's is finite in the one
    and -inf in the other; held to NumPy's alone, "one max over the whole array" lost its
    hint in 0.4% of draws (measured)."""
    x = np.asarray(exact(x), np.float32)
    with np.errstate(divide="ignore", under="ignore"):
        terms = np.exp(x - x.max())
        flushed = np.where(terms < np.finfo(np.float32).tiny, np.float32(0), terms)
        return [np.isfinite(np.log(t.sum(axis=-1))) for t in (terms, flushed)]


def check_logsumexp(ex, x, what):
    dtype = str(x.dtype)
    call = f"jax.jit(logsumexp)(x) for {what} {dtype} x of shape {x.shape}"
    got = returned(ex.logsumexp.jit()(x), call)
    want = exact_logsumexp(x)
    assert got.shape == want.shape, (
        f"{call} returned shape {got.shape}, not {want.shape}: reduce over the last axis only"
    )
    values = exact(got)
    finite = np.isfinite(values)
    shifted_once = finite.any() and any(
        np.array_equal(finite, rows) for rows in one_shift_finite_rows(x)
    )
    assert finite.all(), (
        f"{call} returned {show(values)}, expected {show(want)}: exp of a large input "
        "overflows to inf (exp(89) in float32), of a very negative one underflows to 0, "
        "and log(0) is -inf"
        + (
            ". Some rows came out right: shift each row by its own max "
            "(jnp.max(x, axis=-1, keepdims=True)), not by one max of the whole batch"
            if shifted_once
            else ""
        )
        + (
            ". A row came out inf: exp of an entry far above what was subtracted from it. "
            "Only each row's max (jnp.max(x, axis=-1, keepdims=True)) keeps every exp(x - "
            "shift) <= 1: shifted by the row's mean or its first entry, a row of zeros with "
            "one large entry still overflows"
            if np.isposinf(values).any()
            else ""
        )
    )
    allowed = LOGSUMEXP_RTOL[dtype] * np.maximum(1.0, np.abs(want))
    assert np.all(np.abs(values - want) <= allowed), (
        f"{call} is off by more than {LOGSUMEXP_RTOL[dtype]:g} relative: expected "
        f"{show(want)}, got {show(values)}"
    )
    return got


@pytest.mark.task("logsumexp")
def test_logsumexp_of_moderate_inputs(ex, rng):
    """logsumexp: log(sum(exp(x))) over the last axis, for inputs of moderate size"""
    for dtype in ("float32", "bfloat16"):
        for shape in [(7,), (2, 3, 1024)]:
            check_logsumexp(ex, host_array(rng.normal(size=shape) * 3, dtype), "moderate")


@pytest.mark.task("logsumexp")
def test_logsumexp_of_large_inputs(ex, rng):
    """logsumexp: finite and accurate for inputs up to 1e4 (float32) and 1e3 (bfloat16)"""
    for dtype in ("float32", "bfloat16"):
        for shape in [(4, 1024), (2, 3, 64)]:
            check_logsumexp(ex, rows_far_apart(rng, shape, dtype), "large")


@pytest.mark.task("logsumexp")
def test_logsumexp_keeps_dtype(ex, rng):
    """logsumexp: returns the dtype of x, float32 or bfloat16"""
    for dtype in ("float32", "bfloat16"):
        got = check_logsumexp(ex, rows_far_apart(rng, (4, 1024), dtype), "large")
        assert got.dtype == jnp.dtype(dtype), (
            f"jax.jit(logsumexp)(x) for {dtype} x returned {got.dtype}: compute in a wider "
            "dtype if you like, but return x's dtype"
        )


# --- float64 that JAX silently gives as float32 ------------------------------------------------


@in_learner_process
def float64_requests(ex, name, args):
    """The dtype JAX refused while `name(*args)` ran, eagerly and under jax.jit: its own
    warning ("Explicitly requested dtype float64 … truncated to dtype float32"), one per
    place, or [] when the function asked for no dtype JAX lacks."""
    import warnings

    function = getattr(ex, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.block_until_ready(function(*args))
        jax.block_until_ready(jax.jit(function)(*args))
    truncated = [str(w.message) for w in caught if "jax_enable_x64" in str(w.message)]
    return sorted({message.split(" is not available")[0] for message in truncated})


def assert_no_float64_request(ex, name, args, call):
    requested = float64_requests(ex, name, args)
    if requested:
        raise Finding(
            "asks for float64",
            f"{call} asks JAX for a 64-bit dtype ({'; '.join(requested)}), and JAX silently "
            "computes in float32 instead: 64-bit types are off unless `jax_enable_x64` is set "
            "when JAX starts, because GPUs and TPUs run them slowly or not at all. So the "
            "float64 you wrote is float32, and any precision you hoped for from it is not there: "
            "keep the widening in float32 (e.g. `preferred_element_type=jnp.float32`, or "
            "subtracting the max before `exp`)",
        )


@pytest.mark.task("matmul_f32")
def test_matmul_f32_asks_for_no_float64(ex, rng):
    """matmul_f32: asks for no float64, which JAX would silently give as float32"""
    a, b = matmul_inputs(rng, 3, 5, 4)
    assert_no_float64_request(ex, "matmul_f32", (a, b), "matmul_f32(a, b)")


@pytest.mark.task("scale")
def test_scale_asks_for_no_float64(ex, rng):
    """scale: asks for no float64, which JAX would silently give as float32"""
    x = host_array(rng.uniform(-100, 100, size=40), "bfloat16")
    assert_no_float64_request(ex, "scale", (x, 3.5), "scale(x, 3.5)")


@pytest.mark.task("logsumexp")
def test_logsumexp_asks_for_no_float64(ex, rng):
    """logsumexp: asks for no float64, which JAX would silently give as float32"""
    x = rows_far_apart(rng, (4, 64), "float32")
    assert_no_float64_request(ex, "logsumexp", (x,), "logsumexp(x)")
