"""Checks for 13_custom_gradients: a gradient clipped on its way back, a straight-through
round, a derivative written out, and a network recomputed instead of remembered.

Values are the learner's functions called as they are, on the judge's fresh random inputs,
against the judge's NumPy reference in float64. Every gradient is a program: the check names
one of its own functions around the learner's (`AROUND`: `jax.grad`, `jax.vmap`, `jax.jvp`,
`jax.vjp` of a loss the check writes), the learner's process builds it and hands it over
exported (`jax.export` of its `jax.jit`, StableHLO bytes) for the shapes alone, having seen
only zeros, and the judge deserializes it, refuses host callbacks and runs it itself on
values it draws afterwards. So "under jit", "under vmap" and "in forward mode" are what the
judge ran, not what the learner's process says it did, and no answer can fit the values.
A program that calls back into Python (a `jax.debug.print` left in a rule) cannot be handed
over, and fails with a message saying so.

remat_mlp's memory rests on the same footing. The learner's process exports the two halves
of `jax.vjp(remat_mlp, params, x)`: the forward half returns the output and the leaves of
the backward function it builds (the `jax.tree_util.Partial` `jax.vjp` returns: its
residuals), the backward half takes those leaves and a cotangent and returns the gradients.
The judge runs the forward half on its own params and x, weighs the residual arrays it got
back (bytes it holds, never a number the learner's process reports), and runs the backward
half on exactly those arrays: only if the gradients it gets are right (against NumPy) do the
residuals count as all that the backward pass keeps. A residual smuggled around them (a
Python global written by a host callback) cannot be exported at all.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from kata import findings
from kata.checking.expect import as_float32, assert_close, show
from kata.checking.learner_calls import ExportedProgram, LearnerError, in_learner_process
from kata.checking.measured import measure
from kata.findings import Finding
from kata.learner_side.learner_process import exported

# The contract's tolerances.
F_RTOL = 1e-5
MLP_TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
# The contract's network for remat_mlp's memory: 8 layers of width 64, a batch of 512.
LAYERS, WIDTH, BATCH = 8, 64, 512
KIB = 1024


# --- the judge's functions around the learner's, built and exported in its process ----------


def clipped_sin_gradient(ex, limit):
    """d/dx of `sum(w * clip_gradient(sin(x), limit)) + sum(v * x)`, for (x, w, v)."""

    def loss(x, w, v):
        return jnp.sum(w * ex.clip_gradient(jnp.sin(x), limit)) + jnp.sum(v * x)

    return jax.grad(loss)


def clipped_value(ex, limit):
    return lambda x: ex.clip_gradient(x, limit)


def per_example_loss(ex, limit):
    """One example's loss: `sum(w * clip_gradient(theta * x, limit))`, for (theta, x, w)."""
    return lambda theta, x, w: jnp.sum(w * ex.clip_gradient(theta * x, limit))


def per_example_clipped_gradients(ex, limit):
    """Each example's gradient with respect to the shared `theta` (vmap of grad)."""
    return jax.vmap(jax.grad(per_example_loss(ex, limit)), in_axes=(None, 0, 0))


def summed_clipped_gradient(ex, limit):
    """The gradient of the examples' summed loss (grad of vmap)."""
    loss = per_example_loss(ex, limit)

    def total(theta, xs, ws):
        return jnp.sum(jax.vmap(loss, in_axes=(None, 0, 0))(theta, xs, ws))

    return jax.grad(total)


def rounded(ex):
    return ex.round_ste


def rounded_gradient(ex):
    """d/dx of `sum(w * round_ste(3 * sin(x)))`, for (x, w)."""
    return jax.grad(lambda x, w: jnp.sum(w * ex.round_ste(3 * jnp.sin(x))))


def rounded_gradients_by_example(ex):
    """vmap of grad of one example's `sum(w * round_ste(x))`, for (xs, ws)."""
    return jax.vmap(jax.grad(lambda x, w: jnp.sum(w * ex.round_ste(x))))


def stable_values(ex):
    return ex.stable_f


def stable_gradient(ex):
    """d/dx of `sum(w * stable_f(x))`, for (x, w)."""
    return jax.grad(lambda x, w: jnp.sum(w * ex.stable_f(x)))


def stable_scalar_gradients(ex):
    """`jax.vmap(jax.grad(stable_f))`, for a 1-D xs."""
    return jax.vmap(jax.grad(ex.stable_f))


def stable_forward_mode(ex):
    """`jax.jvp(stable_f, (x,), (t,))`, for (x, t)."""
    return lambda x, t: jax.jvp(ex.stable_f, (x,), (t,))


def remat_values(ex):
    return ex.remat_mlp


def remat_gradients(ex):
    """d/d(params, x) of `sum(g * remat_mlp(params, x))`, for (params, x, g)."""
    return jax.grad(lambda params, x, g: jnp.sum(g * ex.remat_mlp(params, x)), argnums=(0, 1))


AROUND = {
    fn.__name__: fn
    for fn in (
        clipped_sin_gradient,
        clipped_value,
        per_example_clipped_gradients,
        summed_clipped_gradient,
        rounded,
        rounded_gradient,
        rounded_gradients_by_example,
        stable_values,
        stable_gradient,
        stable_scalar_gradients,
        stable_forward_mode,
        remat_values,
        remat_gradients,
    )
}


def _specs(args):
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype), args)


def _serialized(program):
    return np.frombuffer(bytes(program.serialize()), dtype=np.uint8)


@in_learner_process
def exported_around(ex, around, settings, *shapes):
    """The judge's function `around`, built around the learner's module, under `jax.jit`,
    exported for the shapes and dtypes of `shapes` (zeros: no value of the judge's is here)."""
    return exported(AROUND[around](ex, *settings), list(shapes))


@in_learner_process
def exported_vjp_halves(ex, params, x):
    """`jax.vjp(remat_mlp, params, x)` as two exported programs: the forward half, returning
    the output and the leaves of the backward function; and the backward half, rebuilding
    that function from those leaves and applying it to a cotangent."""
    built = {}

    def forward(params, x):
        y, backward = jax.vjp(ex.remat_mlp, params, x)
        leaves, built["structure"] = jax.tree_util.tree_flatten(backward)
        return y, leaves

    forward_program = export.export(jax.jit(forward))(*_specs((params, x)))
    residuals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in forward_program.out_avals[1:]]

    def backward(leaves, g):
        return jax.tree_util.tree_unflatten(built["structure"], leaves)(g)

    backward_program = export.export(jax.jit(backward))(residuals, _specs(x))
    return _serialized(forward_program), _serialized(backward_program)


def host_callback_message(name):
    return (
        f"{name} calls back into Python on the host (jax.debug.print, jax.pure_callback or "
        "io_callback): the grader runs the compiled program of your function itself, and a "
        "program that calls into Python cannot be handed over. Take the callback out once "
        "you are done debugging"
    )


def as_program(data, name):
    program = ExportedProgram.from_bytes(np.asarray(data, dtype=np.uint8).tobytes())
    if any("callback" in target for target in program.custom_calls):
        raise AssertionError(host_callback_message(name))
    return program


def host_callbacks_refused(error, name):
    """JAX refuses to export a program with a host callback: say so in the learner's terms."""
    if "host_callbacks" in error.message:
        raise AssertionError(host_callback_message(name)) from None
    raise error


def judged(ex, around, *args, settings=(), name):
    """The judge's function `around` of the learner's `name`, as a program the judge runs:
    exported for the shapes of `args`, then run here on `args`."""
    zeros = jax.tree.map(np.zeros_like, args)
    try:
        data = exported_around(ex, around, list(settings), *zeros)
    except LearnerError as error:
        host_callbacks_refused(error, name)
    return as_program(data, name).run(*args)


# --- inputs -----------------------------------------------------------------------------------


def random_shape(rng):
    """A shape of 0 to 3 axes, each 1 to 5 long: the functions take any shape."""
    return tuple(int(n) for n in rng.integers(1, 6, size=rng.integers(0, 4)))


def normal(rng, shape, scale=1.0):
    return np.asarray(rng.normal(scale=scale, size=shape), np.float32)


def f64(a):
    return np.asarray(a, np.float64)


# --- clip_gradient ------------------------------------------------------------------------------


def random_limit(rng):
    """A limit in [0.1, 1.0], to 3 decimals, never 0.5: a bwd that clips at a fixed 0.5
    passes wherever the limit is 0.5 (1e-3 of draws, both shapes' in 1e-6)."""
    while (limit := float(np.round(rng.uniform(0.1, 1.0), 3))) == 0.5:
        pass
    return limit


def cotangents_past(rng, shape, limit, *, per_row=False):
    """Weights of sd 2 (the cotangents clip_gradient sees) with two entries set past ±limit,
    in each row where `per_row` (rows of 2 or more). Drawn freely, every entry of a 4-long w
    fell inside ±limit in 0.5% of draws: clipped and unclipped were then one answer, so a
    correct file failed and "bwd passes g on unclipped" passed. Two, so no single cos(x) or
    x near zero hides it.
    """
    w = normal(rng, shape, 2.0)
    rows = w.reshape(-1, shape[-1]).copy() if per_row else w.reshape(1, -1).copy()
    for row in rows:
        past = rng.choice(row.size, size=2, replace=False)
        row[past] = rng.choice([-1.0, 1.0], size=2) * (limit + rng.uniform(0.25, 2.0, size=2))
    return rows.reshape(shape)


CLAMPED_VALUE = (
    "that is torch.clamp's gradient: the value was clipped in the forward pass, so the "
    "gradient is zero wherever it was clipped and untouched elsewhere. Return x as it is, and "
    "clip only the cotangent on its way back: a `jax.custom_vjp` whose bwd clips g"
)


@pytest.mark.task("clip_gradient")
def test_clip_gradient_returns_x_unchanged(ex, rng):
    """clip_gradient: returns x itself (values, shape and dtype), called and under jax.jit"""
    for shape in ((), (7,), random_shape(rng) + (3,)):
        x = normal(rng, shape, scale=3.0)
        limit = random_limit(rng)
        for call, got in (
            (f"clip_gradient(x, {limit})", ex.clip_gradient(as_float32(x), limit)),
            (
                f"jax.jit(lambda x: clip_gradient(x, {limit}))(x)",
                judged(ex, "clipped_value", x, settings=(limit,), name="clip_gradient"),
            ),
        ):
            got_array = np.asarray(got)
            assert got_array.shape == x.shape and got_array.dtype == np.float32, (
                f"{call} returned {got_array.dtype} of shape {got_array.shape} for float32 x of "
                f"shape {x.shape}: the forward pass must hand x on unchanged"
            )
            clipped = np.array_equal(got_array, np.clip(x, -limit, limit))
            if not np.array_equal(got_array, x):
                raise Finding(
                    findings.WRONG_VALUE,
                    f"{call} changed the values of x: expected {show(x)}, got {show(got_array)}"
                    + (
                        ". That clips the value, as torch.clamp does; the forward pass must "
                        "return x untouched, and only the gradient flowing back be clipped, as "
                        "`x.register_hook(lambda g: g.clamp(-limit, limit))` clips it"
                        if clipped
                        else ""
                    ),
                )


@pytest.mark.task("clip_gradient")
def test_clip_gradient_clips_the_gradient(ex, rng):
    """clip_gradient: under jax.jit(jax.grad(...)), the gradient reaching x is clipped to ±limit"""
    for shape in ((9,), random_shape(rng) + (4,)):
        limit = random_limit(rng)
        x, w, v = normal(rng, shape, 2.0), cotangents_past(rng, shape, limit), normal(rng, shape)
        call = (
            f"jax.jit(jax.grad(lambda x: jnp.sum(w * clip_gradient(jnp.sin(x), {limit})) "
            "+ jnp.sum(v * x)))(x)"
        )
        got = judged(ex, "clipped_sin_gradient", x, w, v, settings=(limit,), name="clip_gradient")
        cos = np.cos(f64(x))
        want = cos * np.clip(f64(w), -limit, limit) + v
        unclipped = np.allclose(f64(got), cos * w + v, rtol=1e-5, atol=1e-6)
        assert not unclipped, (
            f"{call} gave cos(x) * w + v, the gradient with w unclipped: the cotangent "
            f"arriving at clip_gradient's output must be clipped to [-{limit}, {limit}] "
            "before it flows on to x"
        )
        clamped = np.where(np.abs(np.sin(f64(x))) < limit, cos * w, 0.0) + v
        assert not np.allclose(f64(got), clamped, rtol=1e-5, atol=1e-6), (
            f"{call} gave cos(x) * w + v where |sin(x)| < {limit} and v elsewhere: " + CLAMPED_VALUE
        )
        assert_close(
            got,
            want,
            f"{call} (expected cos(x) * clip(w, -limit, limit) + v)",
            rtol=1e-5,
            atol=1e-6,
        )


@pytest.mark.task("clip_gradient")
def test_clip_gradient_clips_each_example_under_vmap(ex, rng):
    """clip_gradient: per-example gradients under jax.vmap(jax.grad(...)) are each clipped"""
    # Two values or more per example: for one, clipping by the norm is clipping the value.
    examples, size = int(rng.integers(2, 9)), int(rng.integers(2, 6))
    limit = random_limit(rng)
    theta = normal(rng, size)
    xs, ws = (
        normal(rng, (examples, size), 2.0),
        cotangents_past(rng, (examples, size), limit, per_row=True),
    )
    each = np.clip(f64(ws), -limit, limit) * f64(xs)
    loss = f"jnp.sum(w * clip_gradient(theta * x, {limit}))"
    per_example = judged(
        ex, "per_example_clipped_gradients", theta, xs, ws, settings=(limit,), name="clip_gradient"
    )
    assert_close(
        per_example,
        each,
        f"jax.jit(jax.vmap(jax.grad(lambda theta, x, w: {loss}), in_axes=(None, 0, 0)))"
        "(theta, xs, ws), each example's gradient (expected clip(w, -limit, limit) * x)",
        rtol=1e-5,
        atol=1e-6,
    )
    summed = judged(
        ex, "summed_clipped_gradient", theta, xs, ws, settings=(limit,), name="clip_gradient"
    )
    assert_close(
        summed,
        each.sum(axis=0),
        f"jax.jit(jax.grad(lambda theta: jnp.sum(jax.vmap(lambda x, w: {loss})(xs, ws))))"
        "(theta), the summed gradient (each example's cotangent clipped, then summed)",
        rtol=1e-5,
        atol=1e-5,
    )


# --- round_ste ---------------------------------------------------------------------------------


def away_from_halves(rng, shape, scale=20.0):
    """Float32 values at least 1e-3 away from any half (x.5), where rounding is unambiguous.

    Of two or more, one is set positive and rounding up, and one negative and rounding down,
    both beyond ±1 (floor, ceil and truncation each miss one). Drawn freely, every value of
    round_ste_rounds' draws rounded as floor does in 6.6e-4 of runs, and every value of the
    vmap check's lay within [-1, 1] in 8e-6 (measured): "floor for round" and "the clipped
    straight-through estimator" then passed.
    """
    values = np.asarray(rng.uniform(-scale, scale, size=shape), np.float32)
    fraction = np.abs(values - np.floor(values) - 0.5)
    values = np.where(fraction < 2e-3, values + np.float32(0.25), values).astype(np.float32)
    if values.size >= 2:
        flat = values.reshape(-1).copy()
        up, down = rng.choice(flat.size, size=2, replace=False)
        whole = rng.integers(1, int(scale), size=2) + rng.uniform(0.502, 0.998, size=2)
        flat[up], flat[down] = whole[0], -whole[1]
        values = flat.reshape(values.shape)
    return values


@pytest.mark.task("round_ste")
def test_round_ste_rounds(ex, rng):
    """round_ste: the values of jnp.round(x), of x's shape, called and under jax.jit"""
    for shape in ((), (6,), random_shape(rng) + (2,)):
        x = away_from_halves(rng, shape)
        want = np.round(f64(x))
        # Within float32's resolution: `jnp.round(x) + x - x` is one rounding of a sum away
        # (1.9e-6 at 16), so it matched exactly on one XLA and not on another. Rounding
        # wrongly (floor, truncation) is 1 away.
        close = {"rtol": 1e-6, "atol": 1e-6}
        assert_close(ex.round_ste(as_float32(x)), want, "round_ste(x)", **close)
        got = judged(ex, "rounded", x, name="round_ste")
        assert_close(got, want, "jax.jit(round_ste)(x)", **close)


ZERO_GRADIENT = (
    "the gradient of rounding itself, zero almost everywhere, so nothing before round_ste "
    "would learn. The straight-through estimator passes the cotangent through unchanged, as a "
    "torch.autograd.Function whose backward returns grad_output as it is"
)


@pytest.mark.task("round_ste")
def test_round_ste_passes_the_gradient_straight_through(ex, rng):
    """round_ste: under jax.jit(jax.grad(...)), the cotangent passes through unchanged"""
    for shape in ((8,), random_shape(rng)):
        x, w = normal(rng, shape, 3.0), normal(rng, shape)
        # sin keeps 3 sin(x) off the halves too (within float32 rounding of 1e-3).
        x = np.where(np.abs(3 * np.sin(x) % 1 - 0.5) < 2e-3, x + 0.01, x).astype(np.float32)
        call = "jax.jit(jax.grad(lambda x: jnp.sum(w * round_ste(3 * jnp.sin(x)))))(x)"
        got = judged(ex, "rounded_gradient", x, w, name="round_ste")
        want = 3 * np.cos(f64(x)) * w
        assert not np.allclose(f64(got), 0.0), f"{call} gave zeros: {ZERO_GRADIENT}"
        assert_close(got, want, f"{call} (expected w * 3 * cos(x))", rtol=1e-5, atol=1e-6)


@pytest.mark.task("round_ste")
def test_round_ste_gradient_under_vmap(ex, rng):
    """round_ste: jax.vmap(jax.grad(...)) over examples passes each one's cotangent through"""
    examples, size = int(rng.integers(2, 9)), int(rng.integers(1, 6))
    xs, ws = away_from_halves(rng, (examples, size), 60.0), normal(rng, (examples, size))
    call = "jax.jit(jax.vmap(jax.grad(lambda x, w: jnp.sum(w * round_ste(x)))))(xs, ws)"
    got = judged(ex, "rounded_gradients_by_example", xs, ws, name="round_ste")
    assert not np.allclose(f64(got), 0.0), f"{call} gave zeros: {ZERO_GRADIENT}"
    assert_close(got, ws, f"{call} (expected w for every example)", rtol=1e-6, atol=1e-7)


# --- stable_f ----------------------------------------------------------------------------------


def np_f(x):
    return x / (1 + np.sqrt(x))


def np_df(x):
    root = np.sqrt(x)
    return (root + 2) / (2 * (1 + root) ** 2)


def stable_inputs(rng, shape):
    """Float32 values that are 0 or in [1e-6, 1e6] (log-uniform), with at least one 0."""
    x = np.asarray(10.0 ** rng.uniform(-6, 6, size=shape), np.float32)
    x = np.where(rng.random(size=shape) < 0.25, np.float32(0), x).astype(np.float32)
    x.reshape(-1)[rng.integers(x.size)] = 0.0
    return x


def assert_derivative(got, x, call):
    """`got` is f'(x), within F_RTOL, and exactly 1 where x is 0."""
    got = f64(got)
    at_zero = got[x == 0]
    assert not np.isnan(at_zero).any(), (
        f"{call} is NaN at x = 0, where f'(0) = 1: autodiff differentiates f step by step, "
        "and sqrt's derivative at 0 is infinite (0 * inf = NaN). Give stable_f the derivative "
        "as its own rule: (sqrt(x) + 2) / (2 * (1 + sqrt(x))**2) is exactly 1 at 0"
    )
    assert (at_zero == 1.0).all(), (
        f"{call} is {show(at_zero)} at x = 0, where f'(0) is exactly 1: not a NaN avoided by "
        "an epsilon (sqrt(x + eps) is off by about sqrt(eps)), but the derivative's formula"
    )
    assert_close(got, np_df(f64(x)), f"{call} (expected f'(x))", rtol=F_RTOL, atol=0)


@pytest.mark.task("stable_f")
def test_stable_f_values(ex, rng):
    """stable_f: the values of f, for 0 and for x in [1e-6, 1e6], called and under jax.jit"""
    for shape in ((), (12,), random_shape(rng) + (5,)):
        x = stable_inputs(rng, shape) if shape else np.float32(rng.choice([0.0, 3.0]))
        want = np_f(f64(x))
        assert_close(ex.stable_f(as_float32(x)), want, "stable_f(x)", rtol=F_RTOL, atol=0)
        got = judged(ex, "stable_values", np.asarray(x), name="stable_f")
        assert_close(got, want, "jax.jit(stable_f)(x)", rtol=F_RTOL, atol=0)


@pytest.mark.task("stable_f")
def test_stable_f_gradient_is_finite_at_0(ex, rng):
    """stable_f: under jax.jit(jax.grad(...)), f'(x) everywhere, exactly 1 at 0, never NaN"""
    xs = stable_inputs(rng, 16)
    assert_derivative(
        judged(ex, "stable_scalar_gradients", xs, name="stable_f"),
        xs,
        "jax.jit(jax.vmap(jax.grad(stable_f)))(xs)",
    )
    x = stable_inputs(rng, random_shape(rng) + (3,))
    w = normal(rng, x.shape)
    got = judged(ex, "stable_gradient", x, w, name="stable_f")
    # f'(x) * w in float32, divided by w exactly: f'(x) within float32 rounding.
    assert_derivative(
        f64(got) / w, x, "jax.jit(jax.grad(lambda x: jnp.sum(w * stable_f(x))))(x) / w"
    )


@pytest.mark.task("stable_f")
def test_stable_f_forward_mode(ex, rng):
    """stable_f: in forward mode, jax.jvp(stable_f, (x,), (t,)) gives f(x) and f'(x) * t"""
    x = stable_inputs(rng, random_shape(rng) + (6,))
    t = normal(rng, x.shape)
    call = "jax.jit(lambda x, t: jax.jvp(stable_f, (x,), (t,)))(x, t)"
    try:
        value, tangent = judged(ex, "stable_forward_mode", x, t, name="stable_f")
    except LearnerError as error:
        if "custom_vjp" in error.message:
            raise Finding(
                "custom_vjp in forward mode",
                f"{call} raised: {error.message.splitlines()[0]}. A jax.custom_vjp rule serves "
                "reverse mode only (like a torch.autograd.Function's backward); forward mode "
                "needs the derivative as a jax.custom_jvp rule, which JAX also transposes for "
                "jax.grad",
            ) from None
        raise
    assert_close(value, np_f(f64(x)), f"{call}[0] (expected f(x))", rtol=F_RTOL, atol=0)
    untouched_by_t = np.allclose(f64(tangent), np_df(f64(x)), rtol=F_RTOL, atol=0)
    assert not untouched_by_t, (
        f"{call}[1] is f'(x) itself, whatever the tangent t (expected f'(x) * t): a JVP rule "
        "returns the derivative times the tangent it is given, `f'(x) * t`, as a torch "
        "backward multiplies by grad_output; it is linear in t"
    )
    assert_derivative(f64(tangent) / t, x, f"{call}[1] / t")
    assert_close(tangent, np_df(f64(x)) * t, f"{call}[1] (expected f'(x) * t)", rtol=F_RTOL, atol=0)


# --- remat_mlp ---------------------------------------------------------------------------------


def make_mlp(rng, widths, batch):
    """params (a list of (w, b), scaled so tanh does not saturate) and x of shape (batch, d)."""
    params = [
        (normal(rng, (n_in, n_out), 1 / np.sqrt(n_in)), normal(rng, n_out, 0.5))
        for n_in, n_out in zip(widths, widths[1:], strict=False)
    ]
    return params, normal(rng, (batch, widths[0]))


def np_activations(params, x):
    hs = [f64(x)]
    for w, b in params:
        hs.append(np.tanh(hs[-1] @ f64(w) + f64(b)))
    return hs


def np_vjp(params, x, g):
    """The gradients of `sum(g * mlp(params, x))` with respect to params and x, backprop by hand."""
    hs = np_activations(params, x)
    grads, g = [], f64(g)
    for (w, _), h_in, h_out in zip(params[::-1], hs[-2::-1], hs[:0:-1], strict=True):
        dz = g * (1 - h_out**2)
        grads.append((h_in.T @ dz, dz.sum(axis=0)))
        g = dz @ f64(w).T
    return grads[::-1], g


def assert_gradients(got, params, x, g, call):
    want_params, want_x = np_vjp(params, x, g)
    got_params, got_x = got
    assert len(got_params) == len(params), (
        f"{call}[0] holds {len(got_params)} (w, b) gradients for {len(params)} layers"
    )
    for i, ((gw, gb), (ww, wb)) in enumerate(zip(got_params, want_params, strict=True)):
        assert_gradient_close(gw, ww, f"{call}[0][{i}][0], the gradient of layer {i}'s w")
        assert_gradient_close(gb, wb, f"{call}[0][{i}][1], the gradient of layer {i}'s b")
    assert_gradient_close(got_x, want_x, f"{call}[1], the gradient of x")


def assert_gradient_close(got, want, call):
    """Within 1e-5 relative, and 1e-5 of the gradient's largest entry absolute: a w's gradient
    sums a batch of 512 products in float32, whose rounding alone reached 1.3e-5 absolute
    (1.1e-6 of the largest entry) in the plain MLP's own jax.vjp, measured on 10 draws."""
    scale = max(1.0, float(np.abs(want).max()))
    assert_close(got, want, call, rtol=MLP_TOLERANCE["rtol"], atol=MLP_TOLERANCE["atol"] * scale)


def random_widths(rng):
    return [int(n) for n in rng.integers(2, 13, size=rng.integers(2, 6))]


@pytest.mark.task("remat_mlp")
def test_remat_mlp_values(ex, rng):
    """remat_mlp: the tanh MLP's output, called and under jax.jit"""
    for widths in (random_widths(rng), [WIDTH] * 3):
        params, x = make_mlp(rng, widths, int(rng.integers(1, 17)))
        want = np_activations(params, x)[-1]
        assert_close(
            ex.remat_mlp(params, as_float32(x)), want, "remat_mlp(params, x)", **MLP_TOLERANCE
        )
        got = judged(ex, "remat_values", params, x, name="remat_mlp")
        assert_close(got, want, "jax.jit(remat_mlp)(params, x)", **MLP_TOLERANCE)


@pytest.mark.task("remat_mlp")
def test_remat_mlp_gradients(ex, rng):
    """remat_mlp: under jax.jit(jax.grad(...)), the MLP's gradients for params and x"""
    for widths in (random_widths(rng), random_widths(rng)):
        params, x = make_mlp(rng, widths, int(rng.integers(1, 17)))
        g = normal(rng, (x.shape[0], widths[-1]))
        got = judged(ex, "remat_gradients", params, x, g, name="remat_mlp")
        call = "jax.jit(jax.grad(lambda params, x: jnp.sum(g * remat_mlp(params, x)), (0, 1)))"
        assert_gradients(got, params, x, g, call)


def kib(n):
    return f"{n / KIB:,.0f} KiB"


def plain_mlp_residual_bytes(params, x):
    """What the judge's own plain MLP keeps for its backward pass, for comparison."""

    def mlp(params, x):
        h = x
        for w, b in params:
            h = jnp.tanh(h @ w + b)
        return h

    _, backward = jax.vjp(mlp, params, x)
    return sum(np.asarray(leaf).nbytes for leaf in jax.tree.leaves(backward))


def why_kept(kept, plain, per_layer):
    """Why a backward pass keeps too much, by what it keeps: as much as the plain network
    (nothing recomputed), one layer's activations per layer (each layer checkpointed on its
    own), or less than either."""
    if kept >= 0.9 * plain:
        return (
            f"as much as the plain MLP's backward pass ({kib(plain)}): nothing is recomputed. "
            "Either no jax.checkpoint is in effect, or its policy saves everything it may "
            "(jax.checkpoint_policies.everything_saveable; dots_saveable on an MLP of matmuls "
            "keeps every layer's product): jax.checkpoint around the whole network, with no "
            "policy (the default saves nothing)"
        )
    if per_layer >= LAYERS - 1:
        return (
            "checkpointing each layer on its own, like checkpoint_sequential with one segment "
            "per layer, still keeps every layer's input. Checkpoint the whole network at once, "
            "as torch.utils.checkpoint.checkpoint(mlp, params, x) would, so that only params "
            "and x are kept and every activation is recomputed on the way back"
        )
    return (
        "recompute activations instead of keeping them: jax.checkpoint around the whole "
        "network (and no policy that saves anything)"
    )


@pytest.mark.task("remat_mlp")
def test_remat_mlp_keeps_less_than_one_layer(ex, rng, tell):
    """remat_mlp: jax.vjp keeps less than params, x and one layer's activations (8 × 64 × 512)"""
    params, x = make_mlp(rng, [WIDTH] * (LAYERS + 1), BATCH)
    g = normal(rng, (BATCH, WIDTH))
    zeros = jax.tree.map(np.zeros_like, (params, x))
    try:
        forward_data, backward_data = exported_vjp_halves(ex, *zeros)
    except LearnerError as error:
        host_callbacks_refused(error, "remat_mlp")
    forward = as_program(forward_data, "remat_mlp")
    backward = as_program(backward_data, "remat_mlp")
    y, residuals = forward.run(params, x)
    assert_close(
        y, np_activations(params, x)[-1], "jax.vjp(remat_mlp, params, x)[0]", **MLP_TOLERANCE
    )
    assert_gradients(
        backward.run(residuals, g), params, x, g, "jax.vjp(remat_mlp, params, x)[1](g)"
    )
    kept = sum(np.asarray(r).nbytes for r in residuals)
    inputs = sum(a.nbytes for a in jax.tree.leaves((params, x)))
    activation = BATCH * WIDTH * 4
    plain = plain_mlp_residual_bytes(params, x)
    measure("kept_kib", round(kept / KIB))
    tell(
        f"remat_mlp's backward pass keeps {kib(kept)} ({len(residuals)} arrays); "
        f"the plain MLP's keeps {kib(plain)}"
    )
    largest = sorted((np.asarray(r).shape for r in residuals), key=np.prod, reverse=True)[:4]
    per_layer = sum(np.asarray(r).shape == (BATCH, WIDTH) for r in residuals)
    if kept >= inputs + activation:
        raise Finding(
            "keeps too much",
            f"jax.vjp(remat_mlp, params, x) keeps {kib(kept)} for the backward pass "
            f"({len(residuals)} arrays, the largest of shapes {largest}), but params and x take "
            f"{kib(inputs)} and one layer's activations {kib(activation)}: it must keep less than "
            f"{kib(inputs + activation)}. It keeps {per_layer} arrays of one layer's activations "
            f"({BATCH} × {WIDTH}): " + why_kept(kept, plain, per_layer),
        )
