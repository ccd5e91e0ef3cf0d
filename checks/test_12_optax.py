"""Checks for 12_optax: Adam, a frozen fine-tune and clipped SGD as pure, compiled steps.

Every expected value comes from the check's own NumPy model, gradient and Adam, in
float64; Optax is used here only to make the optimizer state the contract says the
learner's step accepts (`optax.adam(1e-2).init(params)`, or that state later in training).

The learner's steps are called plainly. An Optax state crosses between the processes as
named tuples of data (kata.handoffs.wire's `Tree`: each kept in the learner's process and
passed back as itself), so a step's params, state and loss come back as values; the
states the checks start from are made there by a builder from the judge's moments, or by
the learner's `finetune_init`. What the inputs hold after a step is read there, each in a
check of its own.
"""

from collections.abc import Mapping

import jax
import numpy as np
import optax
import pytest

from kata.checking import mlp_reference
from kata.checking.expect import (
    as_float32,
    assert_close,
    assert_untouched,
    observed,
    random_array,
    show,
)
from kata.checking.learner_calls import (
    builds_in_learner_process,
    count_compilations,
    in_learner_process,
    type_name,
)
from kata.checking.mlp_reference import (
    ADAM_LEARNING_RATE,
    NAMES,
    NumpyAdam,
    adam_start,
    assert_trains_alike_twice,
    assert_unmoved,
    make_params,
    np_forward,
    np_grads,
    np_loss,
    regression_data,
    small_gradients,
    to_numpy,
)
from kata.findings import Finding

TRAINED = ("w2", "b2")
FROZEN = ("w1", "b1")
SGD_LEARNING_RATE = 0.1
MAX_NORM = 1.0
# One program for a jitted step, plus room for an eager conversion or two around it; a
# step run op by op compiles 20 or more for new shapes.
ONE_PROGRAM = 3
# Float32 steps against float64 Adam: Adam divides each gradient by its own size, so it
# carries the gradient's float32 rounding (1e-7 relative) straight into the update.
STEP_TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}
RUN_TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}


def np_adam_run(p, x, y, steps):
    """(params after `steps` Adam steps, the steps + 1 losses before, between and after)."""
    state, losses = NumpyAdam.fresh(p), []
    for _ in range(steps):
        p, state, value = state.step(p, x, y)
        losses.append(value)
    return p, np.array([*losses, np_loss(p, x, y)])


# --- in the learner's process: optimizer states, and what the inputs hold after a step ------


class Held:
    """The caller's inputs, kept in the learner's process between steps taken on them."""

    def __init__(self, value):
        self.value = value


@builds_in_learner_process
def adam_state_holding(_ex, params, count, mu, nu):
    """`optax.adam(1e-2)`'s state holding the judge's count and float32 moments.

    Only its structure comes from Optax (`eval_shape` runs nothing); the values are the
    judge's, so that making a state compiles nothing.
    """
    fresh = jax.eval_shape(optax.adam(ADAM_LEARNING_RATE).init, params)
    moments = {"count": jax.device_put(np.int32(count)), "mu": mu, "nu": nu}
    return tuple(
        part._replace(**moments) if isinstance(part, optax.ScaleByAdamState) else part
        for part in fresh
    )


@in_learner_process
def held_inputs(ex, params, opt_state):
    """The caller's params and opt_state, kept for steps to take, and what they hold now."""
    return Held((params, opt_state)), observed(params), observed(opt_state)


@in_learner_process
def step_on_held_inputs(ex, step, inputs, x, y, eager):
    """The learner's `step` on the same caller's inputs again, and what they hold after."""
    params, opt_state = inputs.value
    with jax.disable_jit(eager):
        result = getattr(ex, step)(params, opt_state, x, y)
    return result, observed(params), observed(opt_state)


@in_learner_process
def train_adam_observed(ex, params, x, y, steps):
    """What train_adam returned, and what the caller's params held before and after."""
    before = observed(params)
    return ex.train_adam(params, x, y, steps), before, observed(params)


# --- the learner's steps, called plainly ------------------------------------------------------


def take_step(ex, step, params, opt_state, x, y):
    """The learner's `step` (its name) from `opt_state`: an Optax state crosses as named
    tuples of data (kata.handoffs.wire's `Tree`), each kept in the learner's process."""
    return getattr(ex, step)(params, opt_state, x, y)


def finetune_state(ex, params):
    return ex.finetune_init(params)


# --- the optimizer states the checks start from -----------------------------------------------


def optax_adam_state(ex, params, adam):
    """`optax.adam(1e-2)`'s state holding `adam`'s count and moments (the contract's input)."""

    def float32(moments):
        return {k: np.asarray(v, np.float32) for k, v in moments.items()}

    return adam_state_holding(ex, params, adam.count, float32(adam.mu), float32(adam.nu))


def fresh_adam_state(ex, params):
    return optax_adam_state(ex, params, NumpyAdam.fresh(to_numpy(params)))


# --- reading what the learner returned ------------------------------------------------------


def params_in(result, call):
    assert isinstance(result, Mapping), (
        f"{call} should give the new params dict (w1, b1, w2, b2), "
        f"but gave {type_name(result)}: {show(result)}"
    )
    missing = [k for k in NAMES if k not in result]
    assert not missing, f"{call} gave a params dict without {', '.join(missing)}"
    return result


def unpack_step(result, call):
    """(params, opt_state, loss) from what a step returned."""
    assert isinstance(result, tuple) and len(result) == 3, (
        f"{call} should return a triple (params, opt_state, loss), but returned "
        f"{type_name(result)}: {show(result)}"
    )
    params, opt_state, value = result
    return params_in(params, f"{call}[0]"), opt_state, value


def assert_params_close(got, want, call, names=NAMES, after="", moved_from=None, **tolerance):
    """`got`'s params are `want`'s; a step from `moved_from` off by one factor is told so."""
    for k in names:
        start = None if moved_from is None else moved_from[k]
        closeness = tolerance or STEP_TOLERANCE
        assert_close(got[k], want[k], f"{call}['{k}']{after}", moved_from=start, **closeness)


def assert_loss_before(value, p, x, y, call):
    mlp_reference.assert_loss_before(value, p, x, y, call, "jnp.mean((mlp(params, x) - y) ** 2)")


def check_leaves_inputs_alone(
    ex,
    step,
    make_state,
    rng,
    call,
    attempts=("", " a second time"),
    sizes=(4, 3, 1, 16),
    eager=False,
):
    n_in, n_hidden, n_out, batch = sizes
    params = make_params(rng, n_in, n_hidden, n_out)
    x, y = random_array(rng, batch, n_in), random_array(rng, batch, n_out)
    inputs, *before = held_inputs(ex, params, make_state(ex, params))
    for attempt in attempts:
        result, *after = step_on_held_inputs(ex, step, inputs, x, y, eager)
        unpack_step(result, call + attempt)
        assert_untouched(after[0], before[0], "params", call + attempt)
        assert_untouched(after[1], before[1], "opt_state", call + attempt)


def check_compiles_once(ex, step, make_state, rng, call, batch):
    """One program on the first call for new shapes, none for 8 more steps."""
    params = make_params(rng, n_hidden=5)
    opt_state = make_state(ex, params)
    batches = [regression_data(rng, batch) for _ in range(9)]
    with count_compilations() as first:
        result = take_step(ex, step, params, opt_state, *batches[0])
        params, opt_state, _ = unpack_step(result, call)
    listed = ", ".join(first.names[:6]) + (", …" if first.count > 6 else "")
    assert first.count <= ONE_PROGRAM, (
        f"the first {call} for new shapes compiled {first.count} separate programs ({listed}): "
        "every operation outside `jax.jit` runs on its own, as in PyTorch eager mode. Put the "
        "gradient, the optimizer update and apply_updates all under one `jax.jit`"
    )
    with count_compilations() as later:
        for x, y in batches[1:]:
            params, opt_state, _ = unpack_step(take_step(ex, step, params, opt_state, x, y), call)
    assert later.count == 0, (
        f"{call} compiled {later.count} more times in 8 steps with data of the same shape "
        f"({', '.join(sorted(set(later.names)))}): the program compiled on the first call "
        "should be reused. Make the optimizer and the jitted step once, at module level"
    )


UPHILL = (
    "optax's updates already carry the minus sign (SGD's are -lr * grad), so they are "
    "added to params, never subtracted: params = optax.apply_updates(params, updates)"
)


def assert_adam_step(got, p, adam, x, y, call):
    """`got` is the params Adam in state `adam` reaches from `p`; returns Adam's next state."""
    want, adam, _ = adam.step(p, x, y)
    first_step, _, _ = NumpyAdam.fresh(p).step(p, x, y)
    close = {
        name: all(
            np.allclose(np.asarray(got[k], np.float64), target[k], **STEP_TOLERANCE) for k in NAMES
        )
        for name, target in (("want", want), ("first", first_step))
    }
    assert close["want"] or not close["first"], (
        f"{call} took Adam's very first step again: the opt_state passed in (its moments and "
        "step count) was ignored, as if a new optimizer were made for this step. Use the "
        "state you are given"
    )
    uphill = all(
        np.allclose(np.asarray(got[k], np.float64), 2 * p[k] - want[k], **STEP_TOLERANCE)
        for k in NAMES
    )
    assert not uphill, f"{call} moved params the opposite way to Adam's step: {UPHILL}"
    assert_params_close(got, want, call, moved_from=p)
    return want, adam


# What a first step on `small_gradients`' data is, said after the leaf it judges.
SMALL_GRADIENT_STEP = (
    ", a step on gradients of about 5e-8 (where Adam's eps decides the step's size: "
    "optax.adam(1e-2) keeps its default eps=1e-8),"
)


def assert_small_gradient_step(got, p, x, y, call):
    """`got` is Adam's first step from `p` on `small_gradients(zeroed=("w2",))`' data: w1
    and b1 (gradient exactly 0) unmoved, w2 and b2 as Adam moves them."""
    want, _, _ = NumpyAdam.fresh(p).step(p, x, y)
    assert_unmoved(
        got,
        p,
        {k: f"params['{k}']" for k in FROZEN},
        f"{call}, from params with w2 = b2 = 0,",
        "w2 = 0: none reaches them",
    )
    assert_params_close(got, want, call, after=SMALL_GRADIENT_STEP, moved_from=p)


# --- adam_step ------------------------------------------------------------------------------


# The checks call adam_step and finetune_step as you wrote them (jitted, as the contract
# asks), so that they share one compiled program per shape and see any donation.


@pytest.mark.task("adam_step")
def test_adam_step_matches_adam(ex, rng):
    """adam_step: 5 steps from optax.adam(1e-2).init(params) move params as Adam does"""
    params, first_batch = adam_start(rng)
    opt_state = fresh_adam_state(ex, params)
    p, adam = to_numpy(params), NumpyAdam.fresh(to_numpy(params))
    for number in range(1, 6):
        # A fresh batch each step: on one batch repeated, Adam's second step is within
        # the step tolerance of its first, so a step that drops the state could pass.
        x, y = first_batch if number == 1 else regression_data(rng)
        call = f"step {number} of adam_step(params, opt_state, x, y)" + (
            " (fed the opt_state the step before returned)" if number > 1 else ""
        )
        result = take_step(ex, "adam_step", params, opt_state, x, y)
        params, opt_state, value = unpack_step(result, call)
        assert_loss_before(value, p, x, y, call)
        p, adam = assert_adam_step(params, p, adam, x, y, call)
    # Where AdamW's weight decay and a wrong eps show (both hide under STEP_TOLERANCE
    # above): w1 and b1 with a gradient of exactly 0, the output's about 5e-8.
    params, (x, y) = small_gradients(rng, zeroed=("w2",))
    call = "adam_step(params, optax.adam(1e-2).init(params), x, y)"
    result = take_step(ex, "adam_step", params, fresh_adam_state(ex, params), x, y)
    got, _, _ = unpack_step(result, call)
    assert_small_gradient_step(got, to_numpy(params), x, y, call)


@pytest.mark.task("adam_step")
def test_adam_step_continues_any_adam_state(ex, rng):
    """adam_step: continues from any state Adam reached, using its moments and step count"""
    # Two outputs: 07's loss is the mean over the batch and the outputs alike.
    p = to_numpy(make_params(rng, n_out=2))
    steps = int(rng.integers(3, 8))
    adam = NumpyAdam.fresh(p)
    for _ in range(steps):  # a fresh batch each step, so the moments are far from fresh ones
        p, adam, _ = adam.step(p, *regression_data(rng, n_out=2))
    x, y = regression_data(rng, n_out=2)
    params = {k: as_float32(v) for k, v in p.items()}
    p = to_numpy(params)
    call = f"adam_step(params, opt_state, x, y) with Adam's state after {steps} steps"
    opt_state = optax_adam_state(ex, params, adam)
    got, _, value = unpack_step(take_step(ex, "adam_step", params, opt_state, x, y), call)
    assert_loss_before(value, p, x, y, call)
    assert_adam_step(got, p, adam, x, y, call)


@pytest.mark.task("adam_step")
def test_adam_step_leaves_inputs_alone(ex, rng):
    """adam_step: neither changes nor gives away your params and opt_state"""
    check_leaves_inputs_alone(
        ex, "adam_step", fresh_adam_state, rng, "adam_step(params, opt_state, x, y)"
    )


@pytest.mark.task("adam_step")
def test_adam_step_leaves_inputs_alone_eagerly(ex, rng):
    """adam_step: run eagerly (jax.disable_jit), it still leaves your inputs untouched"""
    check_leaves_inputs_alone(
        ex,
        "adam_step",
        fresh_adam_state,
        rng,
        "adam_step(params, opt_state, x, y) under jax.disable_jit()",
        # Op by op, one step compiles a small program per operation and shape: 78 for the
        # 4-3-1 MLP (4 s here), 24 for a 1-1-1 MLP on a batch of 4 (1.3 s). Run it once, small.
        attempts=("",),
        sizes=(1, 1, 1, 4),
        eager=True,
    )


@pytest.mark.task("adam_step")
def test_adam_step_compiles_once(ex, rng):
    """adam_step: one compiled program on its first call, reused for every later step"""
    check_compiles_once(
        ex, "adam_step", fresh_adam_state, rng, "adam_step(params, opt_state, x, y)", 24
    )


# --- train_adam -----------------------------------------------------------------------------


def trained_by(ex, params, x, y, steps, call):
    """(params, the losses as float64) from `train_adam(params, x, y, steps)`."""
    result = ex.train_adam(params, x, y, steps)  # params cross as data: value evidence
    assert isinstance(result, tuple) and len(result) == 2, (
        f"{call} should return a pair (params, losses), but returned "
        f"{type_name(result)}: {show(result)}"
    )
    trained, losses = result
    try:
        losses = np.asarray(losses, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as error:
        raise AssertionError(
            f"{call}[1] should hold {steps} loss values, not {show(losses)} ({error})"
        ) from None
    assert losses.size == steps, (
        f"{call}[1] should hold {steps} loss values, but holds {losses.size}"
    )
    return params_in(trained, f"{call}[0]"), losses


@pytest.mark.task("train_adam")
def test_train_adam_matches_adam(ex, rng):
    """train_adam: the losses and final params of `steps` Adam steps from a fresh state"""
    params, (x, y) = adam_start(rng)
    steps = 25
    call = f"train_adam(params, x, y, {steps})"
    trained, losses = trained_by(ex, params, x, y, steps, call)
    want_params, want_losses = np_adam_run(to_numpy(params), x, y, steps)
    before_each = np.allclose(losses, want_losses[:-1], rtol=1e-3, atol=1e-5)
    after_each = np.allclose(losses, want_losses[1:], rtol=1e-3, atol=1e-5)
    assert before_each or after_each or losses[-1] < losses[0], (
        f"{call} gave losses {show(losses)}, but Adam's are {show(want_losses[:-1])}: the "
        f"loss goes up, {UPHILL}"
    )
    assert before_each or after_each, (
        f"{call} gave losses {show(losses)}, but Adam's are {show(want_losses[:-1])}: "
        "after the first step they differ, so the steps do not share one optimizer state. "
        "Each step must get the opt_state the step before returned"
    )
    assert_params_close(trained, want_params, f"{call}[0]", **RUN_TOLERANCE)
    # One step where AdamW's weight decay and a wrong eps show (both hide under
    # RUN_TOLERANCE above): w1 and b1 with a gradient of exactly 0, the output's about 5e-8.
    params, (x, y) = small_gradients(rng, zeroed=("w2",))
    call = "train_adam(params, x, y, 1)"
    trained, _ = trained_by(ex, params, x, y, 1, call)
    assert_small_gradient_step(trained, to_numpy(params), x, y, f"{call}[0]")


@pytest.mark.task("train_adam")
def test_train_adam_leaves_params_alone(ex, rng):
    """train_adam: the caller's params stay as they were"""
    params = make_params(rng)
    x, y = regression_data(rng)
    # As the learner's process tells: an in-place write shows only there.
    _, before, after = train_adam_observed(ex, params, x, y, 3)
    assert_untouched(after, before, "params", "train_adam(params, x, y, 3)")


# --- finetune_step and finetune_init ---------------------------------------------------------


def check_finetune_run(ex, params, x, y, steps, call, unmoved=(), why="", first_step=""):
    """`steps` finetune steps: w1, b1 bit-for-bit unchanged, w2, b2 as Adam on them alone,
    and the trained leaves `unmoved` (their gradient exactly 0: `why`) as they were;
    `first_step` says what the first step is, after the leaf it judges."""
    frozen = {k: np.array(params[k]) for k in FROZEN}
    opt_state = finetune_state(ex, params)
    p, adam = to_numpy(params), NumpyAdam.fresh(to_numpy(params), TRAINED)
    for number in range(1, steps + 1):
        this = f"step {number} of {call}"
        result = take_step(ex, "finetune_step", params, opt_state, x, y)
        params, opt_state, value = unpack_step(result, this)
        for k in FROZEN:
            now = np.asarray(params[k])
            moved = float(np.abs(now.astype(np.float64) - frozen[k]).max())
            assert np.array_equal(now, frozen[k]), (
                f"{this} changed the frozen params['{k}'] (by up to {moved:.3g}); frozen "
                "leaves must come back exactly as they were, like parameters with "
                "requires_grad=False. (optax.masked does not freeze: it passes the leaves "
                "it masks out their raw gradients as updates, so they still move)"
            )
        assert_loss_before(value, p, x, y, this)
        assert_unmoved(params, p, {k: f"params['{k}']" for k in unmoved}, this, why)
        p, adam, _ = adam.step(p, x, y)
        after = first_step if number == 1 else ""
        # float32 steps drift from the judge's float64 run: at step 6 of 10, a run differing
        # from Adam only by AdamW's decay (1e-8 here, far below any tolerance) went past
        # STEP_TOLERANCE on an entry of 0.009 (JAX 0.5.3, once in a class's grading), so
        # past a few steps a run is held to train_adam's RUN_TOLERANCE.
        tolerance = STEP_TOLERANCE if number <= 3 else RUN_TOLERANCE
        assert_params_close(params, p, this, names=TRAINED, after=after, **tolerance)


@pytest.mark.task("finetune_step")
def test_finetune_step_freezes_w1_b1_and_trains_w2_b2(ex, rng):
    """finetune_step: w1, b1 unchanged bit for bit; w2, b2 move as Adam on them alone"""
    params, (x, y) = adam_start(rng)
    check_finetune_run(ex, params, x, y, 3, "finetune_step(params, opt_state, x, y)")
    # Where AdamW's weight decay and a wrong eps show (both hide under STEP_TOLERANCE
    # above): every hidden unit is tanh(0) = 0, so w2's gradient is exactly 0 at every
    # step, and b2's first one is about 5e-8.
    params, (x, y) = small_gradients(rng, zeroed=FROZEN)
    check_finetune_run(
        ex,
        params,
        x,
        y,
        3,
        "finetune_step(params, opt_state, x, y) from params with w1 = b1 = b2 = 0",
        unmoved=("w2",),
        why="w1 = b1 = 0 makes every hidden unit 0, and w2's gradient is hidden.T @ d_out",
        first_step=SMALL_GRADIENT_STEP,
    )


@pytest.mark.task("finetune_step")
def test_finetune_step_leaves_inputs_alone(ex, rng):
    """finetune_step: neither changes nor gives away your params and opt_state"""
    check_leaves_inputs_alone(
        ex, "finetune_step", finetune_state, rng, "finetune_step(params, opt_state, x, y)"
    )


@pytest.mark.task("finetune_step")
def test_finetune_step_compiles_once(ex, rng):
    """finetune_step: one compiled program on its first call, reused for every later step"""
    check_compiles_once(
        ex,
        "finetune_step",
        finetune_state,
        rng,
        "finetune_step(params, opt_state, x, y)",
        40,
    )


@pytest.mark.task("finetune_init")
def test_finetune_init_state_lasts_a_run(ex, rng):
    """finetune_init: a fresh state that carries Adam's moments through 10 finetune steps"""
    params, (x, y) = adam_start(rng)
    check_finetune_run(ex, params, x, y, 10, "finetune_step(params, finetune_init(params), x, y)")


# --- clipped_sgd_step -----------------------------------------------------------------------


def data_with_gradient_norm(rng, params, norm):
    """x, y for which the loss's gradient has global L2 norm `norm` at `params`."""
    x = random_array(rng, 16, 4)
    p = to_numpy(params)
    _, out = np_forward(p, np.asarray(x, np.float64))
    residual = rng.normal(size=out.shape)
    unit = np.sqrt(sum(np.sum(g**2) for g in np_grads(p, x, out - residual).values()))
    # The gradient is linear in the residual (prediction - y), so scaling one scales the other.
    return x, as_float32(out - residual * (norm / unit))


def exactly_fitted(rng):
    """params, x, y whose every gradient is exactly 0 in float32 too: w2 = 0 makes the
    output b2 exactly, and y is b2 (a batch the model already fits, as a converged one)."""
    params = make_params(rng)
    params["w2"] = as_float32(np.zeros(np.shape(params["w2"])))
    x = random_array(rng, 16, 4)
    return params, x, as_float32(np.broadcast_to(np.asarray(params["b2"]), (16, 1)))


def check_clipped_step(ex, rng, norm, what):
    if norm:
        params = make_params(rng)
        x, y = data_with_gradient_norm(rng, params, norm)
    else:
        params, x, y = exactly_fitted(rng)
    p = to_numpy(params)
    grads = np_grads(p, x, y)
    total = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
    factor = min(1.0, MAX_NORM / total) if total else 1.0
    want = {k: p[k] - SGD_LEARNING_RATE * factor * grads[k] for k in NAMES}
    call = "jax.jit(clipped_sgd_step)(params, x, y)"
    got = params_in(ex.clipped_sgd_step.jit()(params, x, y), call)
    # The other order, `chain(sgd, clip)`, clips the step (gradients × lr), not the gradients.
    step_factor = min(1.0, MAX_NORM / (SGD_LEARNING_RATE * total)) if total else 1.0
    clipped_step = {k: p[k] - SGD_LEARNING_RATE * step_factor * grads[k] for k in NAMES}
    if not np.allclose(factor, step_factor) and all(
        np.allclose(np.asarray(got[k], np.float64), clipped_step[k], **STEP_TOLERANCE)
        for k in NAMES
    ):
        raise Finding(
            "clipped the step",
            f"{call}, for gradients of global norm {total:.3g}, clipped the step (the gradients "
            f"times the learning rate, norm {SGD_LEARNING_RATE * total:.3g}) instead of the "
            "gradients: `optax.chain` applies its parts in order, so the clip must come before "
            "`optax.sgd`: `optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1))`",
        )
    for k in NAMES:
        assert_close(
            got[k],
            want[k],
            f"{call}['{k}'], for gradients of global norm {total:.3g} ({what}: all leaves "
            f"together scaled by {factor:.3g}, as torch.nn.utils.clip_grad_norm_ does),",
            **STEP_TOLERANCE,
        )


@pytest.mark.task("clipped_sgd_step")
def test_clipped_sgd_step_clips_large_gradients(ex, rng):
    """clipped_sgd_step: gradients of global norm above 1 are scaled down to norm 1 together"""
    for norm in (3.0, 40.0):
        check_clipped_step(ex, rng, norm, "the gradients scaled down to global norm 1")


@pytest.mark.task("clipped_sgd_step")
def test_clipped_sgd_step_keeps_small_gradients(ex, rng):
    """clipped_sgd_step: gradients of global norm below 1 are used as they are, 0 too"""
    # A norm of 0 (a batch fitted exactly) is below 1: a factor min(norm, 1) / norm, or a
    # clip written as g / norm * min(norm, 1), is 0 / 0 there and makes every param NaN.
    for norm in (0.1, 0.8, 0.0):
        check_clipped_step(ex, rng, norm, "an ordinary SGD step")


@pytest.mark.task("train_adam")
def test_train_adam_twice_from_the_same_params_agrees(ex, rng):
    """train_adam: two calls from the same params give the same losses (fresh state each)"""
    params = make_params(rng)
    x, y = regression_data(rng)
    assert_trains_alike_twice(ex.train_adam, "train_adam", params, x, y, 5)
