"""Checks for 16_modules: an Equinox MLP with dropout, its batched forward, inference mode and
an Adam step.

An Equinox model crosses between the processes as data (kata.handoffs.wire's `Tree`): the
judge reads the fields of the model the learner's `MLP` made, has it rebuilt there with its
own weights and biases in `linear1` and `linear2` (`Tree.replaced`, as `eqx.tree_at`
would), and passes that one model back to `predict`, `evaluation_mode`, `train_step` and
the model's own `__call__`, plainly: every point but "inputs left alone" rests on values the
learner's code returned. Only Optax's state is made there, by a builder
(`adam_state`). Every expected value is the judge's: its NumPy MLP and Adam in float64
(kata.checking.mlp_reference), with Equinox's `(out, in)` weights as the transposes of the
reference's `x @ w` ones.

Dropout is judged from outside too: with a square, orthogonal `linear2` the judge solves
each output back to the hidden layer the model saw, and every unit must be 0 (dropped) or
`tanh(linear1(x)) / (1 - rate)` (kept). That gives each row's mask, which the checks
compare across keys and rows. Equinox itself is imported only in the learner's process,
where the learner's module has already imported it.
"""

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
    rebuilt,
    type_name,
)
from kata.checking.mlp_reference import (
    ADAM_LEARNING_RATE,
    NAMES,
    NumpyAdam,
    adam_start,
    assert_unmoved,
    make_params,
    np_forward,
    np_loss,
    regression_data,
    small_gradients,
    to_numpy,
)
from kata.findings import Finding
from kata.handoffs.wire import Opaque, Tree

RATE = 0.5
# The MLP's own checks use another rate: at 0.5 a rate taken as the keep probability hides.
MLP_RATE = 0.25
# One program for a step under eqx.filter_jit, plus room for a conversion or two around it;
# a step run op by op compiles 30 or more for new shapes.
ONE_PROGRAM = 3
# The contract's tolerance for a float32 Adam step against the judge's float64 one.
STEP_TOLERANCE = {"rtol": 1e-4, "atol": 2e-5}
# A hidden unit recovered from float32 outputs through an orthogonal linear2 is within
# ~1e-6 of 0 or of its kept value; a unit whose kept value is this small says nothing.
UNIT_TOLERANCE = 1e-3
DECIDES = 0.05
# Judged rows per dropout check: ~8 units each, so hundreds of units decide the rate.
ROWS = 24
NOT_EVAL = (
    "An eqx.Module has no model.eval(): `eqx.nn.inference_mode(model)` returns a copy with "
    "dropout off and leaves `model` as it was"
)
ONLY_ARRAYS = (
    "Train only the arrays, as model.parameters() holds only weights and biases: "
    "`eqx.filter_value_and_grad` differentiates the arrays alone, and the optimizer "
    "updates `eqx.filter(model, eqx.is_array)`"
)


# --- the learner's models, as the judge sees them ----------------------------------------------


def layers(model):
    """The arrays the checks set and read, in the order of `NAMES`."""
    return (model.linear1.weight, model.linear1.bias, model.linear2.weight, model.linear2.bias)


def arrays_of(model):
    """The model's layers' arrays as the judge's params (`x @ w` weights), or None."""
    try:
        w1, b1, w2, b2 = layers(model)
        return {"w1": w1.T, "b1": b1, "w2": w2.T, "b2": b2}
    except AttributeError:
        return None


def dropout_of(model):
    """The model's dropout rate (a number, or an array once trained) and mode."""
    dropout = getattr(model, "dropout", None)
    rate = getattr(dropout, "p", None)
    trained = hasattr(rate, "shape")
    return {
        "rate": np.asarray(rate) if trained else rate,
        "trained": trained,
        "inference": getattr(dropout, "inference", None),
    }


def inference_on(flag):
    """Whether a dropout's `inference` field, as it crossed, is on: True (or a 0-d bool
    array holding True, as `eqx.tree_at` with `jnp.array(True)` would put there)."""
    if isinstance(flag, bool | np.bool_):
        return bool(flag)
    return isinstance(flag, np.ndarray) and flag.shape == () and flag.dtype == bool and bool(flag)


def plain(value):
    """A field's value as Python writes it: `False`, `0.0`, not `[False]`."""
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.shape == ()):
        return repr(value.item())
    return show(value) if isinstance(value, np.ndarray) else repr(value)


def leaves_of(tree):
    """A model's leaves, as `jax.tree.leaves` lists them in the learner's process."""
    if isinstance(tree, Tree | list | tuple):
        return [leaf for child in tree for leaf in leaves_of(child)]
    if isinstance(tree, dict):
        return [leaf for child in tree.values() for leaf in leaves_of(child)]
    return [] if tree is None else [tree]


def made(ex, sizes, rate, seed):
    """`MLP(*sizes, dropout_rate=rate, key=key(seed))`, the learner's own: its fields cross
    as data (a `Tree`), the model stays in the learner's process."""
    return ex.MLP(*sizes, dropout_rate=rate, key=jax.random.key(seed))


def layout(ex, sizes, rate, seed):
    """What `MLP(*sizes, dropout_rate=rate, key=key(seed))` holds, read here."""
    model = made(ex, sizes, rate, seed)

    def linear(name):
        layer = getattr(model, name, None)
        if not (isinstance(layer, Tree) and layer.type_name == "Linear"):
            return {"type": type_name(layer)}
        return {"type": "Linear", "weight": layer.weight, "bias": layer.bias}

    dropout = getattr(model, "dropout", None)
    leaves = leaves_of(model)
    return {
        "array_sizes": [int(np.size(leaf)) for leaf in leaves if isinstance(leaf, np.ndarray)],
        "other_leaves": [
            f"<{type_name(leaf)}>" if isinstance(leaf, Tree | Opaque) else repr(leaf)
            for leaf in leaves
            if not isinstance(leaf, np.ndarray)
        ],
        "module": isinstance(model, Tree),
        "linear1": linear("linear1"),
        "linear2": linear("linear2"),
        "dropout": {
            "type": type_name(dropout),
            "is_dropout": isinstance(dropout, Tree) and dropout.type_name == "Dropout",
        }
        | dropout_of(model),
    }


def built(ex, params, rate, seed):
    """The learner's MLP for `params`' sizes, rebuilt in its process with the judge's weights
    and biases (as `eqx.tree_at` would): Equinox's weights are `(out, in)`, the reference's
    `x @ w` ones `(in, out)`."""
    sizes = (*np.shape(params["w1"]), np.shape(params["w2"])[1])
    model = made(ex, sizes, rate, seed)
    call = f"MLP{sizes} with dropout_rate={rate}"
    assert isinstance(model, Tree) and arrays_of(model) is not None, (
        f"{call} is {type_name(model)}, not an eqx.Module with fields linear1, dropout and "
        "linear2: solve the MLP task first"
    )
    weights = {
        "linear1": {"weight": params["w1"].T, "bias": params["b1"]},
        "linear2": {"weight": params["w2"].T, "bias": params["b2"]},
    }
    return rebuilt(ex, model.replaced(weights))


def in_inference_mode(ex, model):
    """`eqx.nn.inference_mode(model)`, as the judge makes it: the dropout's flag on."""
    return rebuilt(ex, model.replaced({"dropout": {"inference": True}}))


def called_per_row(ex, model, xs, seeds):
    """`model(x, key=key(seed))` for each row and seed, as the learner's code calls it (no
    key where the seed is None): the outputs, stacked."""
    forward = ex.invoke(model)
    return np.stack(
        [
            np.asarray(forward(x) if seed is None else forward(x, key=jax.random.key(seed)))
            for x, seed in zip(xs, seeds, strict=True)
        ]
    )


def predicted(ex, model, xs, seed):
    return ex.predict(model, xs, None if seed is None else jax.random.key(seed))


def evaluated(ex, model):
    """The learner's `evaluation_mode(model)`, and its type, arrays and dropout."""
    result = ex.evaluation_mode(model)
    return result, type_name(result), arrays_of(result), dropout_of(result)


# --- in the learner's process: optimizer states, and what the inputs hold after a step -------


@builds_in_learner_process
def adam_state(_ex, model, count=0, mu=None, nu=None):
    """`optax.adam(1e-2).init(eqx.filter(model, eqx.is_array))`, the contract's state; with
    `mu` and `nu` (the judge's params shapes), the judge's moments and step count put in."""
    import equinox as eqx

    state = optax.adam(ADAM_LEARNING_RATE).init(eqx.filter(model, eqx.is_array))
    if mu is None:
        return state

    def holding(moments):
        return eqx.tree_at(
            layers,
            eqx.filter(model, eqx.is_array),
            (moments["w1"].T, moments["b1"], moments["w2"].T, moments["b2"]),
        )

    counted = {"count": jax.device_put(np.int32(count)), "mu": holding(mu), "nu": holding(nu)}
    return tuple(
        part._replace(**counted) if isinstance(part, optax.ScaleByAdamState) else part
        for part in state
    )


@in_learner_process
def inputs_around_steps(ex, model, opt_state, xs, ys, key, steps):
    """What the caller's model, opt_state, xs and ys held before `steps` train_steps on
    them (each from the same inputs) and after, up to the first step that left them
    unreadable (donated)."""
    inputs = (model, opt_state, xs, ys)
    before = after = [observed(tree) for tree in inputs]
    for _ in range(steps):
        ex.train_step(*inputs, key)
        after = [observed(tree) for tree in inputs]
        if any("unreadable" in leaf for seen in after for leaf in seen["leaves"]):
            break
    return before, after


def step_taken(ex, model, opt_state, xs, ys, key):
    """The learner's `train_step`: (what it returned, described: a triple's parts, or its
    type)."""
    result = ex.train_step(model, opt_state, xs, ys, key)
    if not (isinstance(result, tuple) and len(result) == 3):
        return {"returned": type_name(result)}
    new_model, new_state, loss = result
    return {
        "model": new_model,
        "model_type": type_name(new_model),
        "opt_state": new_state,
        "loss": loss,
        "arrays": arrays_of(new_model),
        "dropout": dropout_of(new_model),
    }


@in_learner_process
def weights_from_a_key(ex, sizes, rate):
    """A function of a key alone, kept there: the arrays of `MLP(*sizes,
    dropout_rate=rate, key=key)`, for the judge to export and read how it draws from its
    key (a model is no program's result: its class cannot cross as data)."""

    def weights(key):
        model = ex.MLP(*sizes, dropout_rate=rate, key=key)
        return [leaf for leaf in jax.tree.leaves(model) if isinstance(leaf, jax.Array)]

    return weights


# --- the judge's data and reference ----------------------------------------------------------


def seed(rng):
    return int(rng.integers(0, 2**31 - 1))


def dropout_params(rng, d_in=3, d_hidden=8):
    """Params whose `linear2` is square and orthogonal, so outputs solve back to the hidden
    layer without losing precision (`masks`)."""
    params = make_params(rng, d_in, d_hidden, d_hidden, scale=0.8)
    orthogonal, _ = np.linalg.qr(rng.normal(size=(d_hidden, d_hidden)))
    params["w2"] = as_float32(orthogonal)
    return params


def hidden(params, xs):
    p = to_numpy(params)
    return np.tanh(np.asarray(xs, np.float64) @ p["w1"] + p["b1"])


def masks(params, xs, got, rate, call):
    """Each row's dropout mask, recovered from the outputs `got` (1 kept, 0 dropped, -1 a
    unit too small to tell); fails where a unit is neither dropped nor kept as dropout keeps
    it."""
    p = to_numpy(params)
    got = np.asarray(got, np.float64)
    assert got.shape == (len(xs), p["w2"].shape[1]), (
        f"{call} gave shape {got.shape}, expected {(len(xs), p['w2'].shape[1])}"
    )
    seen = (got - p["b2"]) @ np.linalg.inv(p["w2"])  # the hidden layer linear2 was given
    kept_value = hidden(params, xs) / (1 - rate)
    kept = np.abs(seen - kept_value) <= UNIT_TOLERANCE
    dropped = np.abs(seen) <= UNIT_TOLERANCE
    row, unit = np.argwhere(~(kept | dropped))[0] if not np.all(kept | dropped) else (-1, -1)
    assert row < 0, (
        f"{call}: the hidden layer that reached linear2 (row {row}, unit {unit}) was "
        f"{seen[row, unit]:.4g}, neither 0 (dropped) nor tanh(linear1(x)) / (1 - "
        f"{rate:g}) = {kept_value[row, unit]:.4g} (kept). Dropout with rate {rate:g} zeroes "
        f"each unit with probability {rate:g} and scales the rest by 1 / (1 - {rate:g}), "
        "between the tanh and linear2: `linear2(dropout(tanh(linear1(x)), key=key))`"
    )
    decided = np.abs(kept_value) > DECIDES
    return np.where(decided, kept.astype(int), -1)


def assert_rate(found, rate, call):
    """About `rate` of the decided units are dropped (5 standard deviations: a correct model
    fails once in millions of runs)."""
    decided = found[found >= 0]
    share = float(np.mean(decided == 0))
    spread = 5 * np.sqrt(rate * (1 - rate) / decided.size)
    assert abs(share - rate) <= spread, (
        f"{call} dropped {share:.0%} of {decided.size} hidden units, not about {rate:.0%}: "
        f"dropout_rate={rate:g} is the probability of dropping a unit"
    )


def assert_rows_differ(found, call):
    """Not every row got one and the same mask: that is one key for the whole batch."""
    both = (found[:1] >= 0) & (found >= 0)  # units the first row and each other row decide
    assert np.any((found[:1] != found) & both), (
        f"{call} gave every one of its {len(found)} rows the same dropout mask: the rows share "
        "one key (PyTorch draws every element afresh). Give each row its own key: "
        "`keys = jax.random.split(key, len(xs))`, then "
        "`jax.vmap(lambda x, k: model(x, key=k))(xs, keys)`"
    )


def assert_masks_differ(first, second, call):
    both = (first >= 0) & (second >= 0)
    assert np.any(first[both] != second[both]), (
        f"{call} gave the same dropout masks for two different keys: the key passed in must "
        "decide the masks"
    )


def reference(params, xs):
    return np_forward(to_numpy(params), np.asarray(xs, np.float64))[1]


def assert_forward(got, params, xs, call):
    assert_close(got, reference(params, xs), call, rtol=1e-4, atol=1e-5)


def training_model(ex, rng, rate=RATE):
    params = dropout_params(rng)
    return params, built(ex, params, rate, seed(rng))


def distinct_rows(rng, params, count=ROWS):
    return random_array(rng, count, np.shape(params["w1"])[0])


# --- MLP --------------------------------------------------------------------------------------


@pytest.mark.task("MLP")
def test_mlp_holds_two_linears_and_a_dropout(ex, rng, tell):
    """MLP: an eqx.Module with linear1, dropout and linear2 of the sizes asked for, training"""
    d_in, d_hidden, d_out = (int(n) for n in rng.integers(2, 7, size=3))
    call = f"MLP({d_in}, {d_hidden}, {d_out}, dropout_rate={MLP_RATE}, key=key)"
    found = layout(ex, (d_in, d_hidden, d_out), MLP_RATE, seed(rng))
    sizes, others = found["array_sizes"], found["other_leaves"]
    tell(
        f"{call}: {len(sizes)} arrays, {sum(sizes)} numbers, what "
        "`eqx.filter(model, eqx.is_array)` keeps for the optimizer (PyTorch's "
        f"model.parameters()); the other leaves, {', '.join(others) or 'none'}, are settings"
    )
    assert found["module"], (
        f"{call} is not an eqx.Module: subclass `eqx.Module` (where PyTorch subclasses "
        "nn.Module), so that JAX sees the model as a pytree of its arrays"
    )
    for name, (n_in, n_out) in (("linear1", (d_in, d_hidden)), ("linear2", (d_hidden, d_out))):
        layer = found[name]
        assert layer["type"] == "Linear", (
            f"{call}.{name} is {layer['type']}, not an eqx.nn.Linear({n_in}, {n_out}, key=...)"
        )
        shapes = (np.shape(layer["weight"]), np.shape(layer["bias"]))
        assert shapes == ((n_out, n_in), (n_out,)), (
            f"{call}.{name} has weight and bias of shapes {shapes}; eqx.nn.Linear({n_in}, "
            f"{n_out}) has ({(n_out, n_in)}, {(n_out,)}) (Equinox, like PyTorch, stores "
            "weights as (out, in))"
        )
    dropout = found["dropout"]
    assert dropout["is_dropout"], (
        f"{call}.dropout is {dropout['type']}, not an eqx.nn.Dropout(p={MLP_RATE})"
    )
    assert dropout["rate"] == MLP_RATE, (
        f"{call}.dropout has rate {show(dropout['rate'])}, not {MLP_RATE}: "
        "eqx.nn.Dropout(p=dropout_rate)"
    )
    assert dropout["inference"] is False, (
        f"{call}.dropout is in inference mode: a new model trains (dropout on), as a new "
        "nn.Module does before model.eval()"
    )


@pytest.mark.task("MLP")
def test_mlp_forward_matches_on_one_example(ex, rng):
    """MLP: model(x) is linear2(tanh(linear1(x))) on one example, dropout off or rate 0"""
    params = make_params(rng, 4, 5, 2)
    xs = random_array(rng, 6, 4)
    no_dropout = built(ex, params, 0.0, seed(rng))
    assert_forward(
        called_per_row(ex, no_dropout, xs, [None] * len(xs)),
        params,
        xs,
        "model(x) for each row x, with dropout_rate=0.0 and your weights replaced by ours",
    )
    assert_forward(
        called_per_row(ex, no_dropout, xs, [seed(rng) for _ in xs]),
        params,
        xs,
        "model(x, key=key) for each row x, with dropout_rate=0.0",
    )
    inference = in_inference_mode(ex, built(ex, params, RATE, seed(rng)))
    assert_forward(
        called_per_row(ex, inference, xs, [None] * len(xs)),
        params,
        xs,
        f"eqx.nn.inference_mode(model)(x) for each row x, with dropout_rate={RATE}",
    )


@pytest.mark.task("MLP")
def test_mlp_dropout_draws_from_the_key(ex, rng):
    """MLP: in training, model(x, key=k) drops hidden units: same key same mask, new key new"""
    params, model = training_model(ex, rng, MLP_RATE)
    xs = distinct_rows(rng, params)
    seeds = [seed(rng) for _ in xs]
    call = f"model(x, key=key) on {len(xs)} examples, in training mode with dropout_rate={MLP_RATE}"
    got = called_per_row(ex, model, xs, seeds)
    first = masks(params, xs, got, MLP_RATE, call)
    assert_rate(first, MLP_RATE, call)
    again = called_per_row(ex, model, xs, seeds)
    assert_close(again, got, f"{call}, again with the same keys,", rtol=0, atol=1e-6)
    others = called_per_row(ex, model, xs, [seed(rng) for _ in xs])
    assert_masks_differ(first, masks(params, xs, others, MLP_RATE, call), call)


@pytest.mark.task("MLP")
def test_mlp_layers_draw_their_own_weights(ex, rng):
    """MLP: weights come from the key: same key same weights, and each layer its own draw"""
    size = int(rng.integers(3, 7))
    key_seed = seed(rng)
    call = f"MLP({size}, {size}, {size}, dropout_rate={RATE}, key=key)"
    first, again, other = (
        layout(ex, (size, size, size), RATE, s) for s in (key_seed, key_seed, seed(rng))
    )

    def weights(found):
        return [
            np.asarray(found[n][part])
            for n in ("linear1", "linear2")
            for part in ("weight", "bias")
        ]

    for name in ("linear1", "linear2"):
        assert first[name]["type"] == "Linear", f"{call}.{name} is not an eqx.nn.Linear"
    assert all(np.array_equal(a, b) for a, b in zip(weights(first), weights(again), strict=True)), (
        f"{call} twice with the same key gave different weights: draw them from `key` alone, "
        "never from a global generator"
    )
    # Weight matrices only: a bias may start at zero whatever the key.
    assert not any(np.array_equal(weights(first)[i], weights(other)[i]) for i in (0, 2)), (
        f"{call} gave the same weights for two different keys: draw them from `key`"
    )
    assert drawn_apart(weights(first)[0], weights(first)[2]), (
        f"{call}: linear2's weights are linear1's (the same magnitudes, rearranged or "
        "scaled), so both layers drew from the same key. PyTorch's layers share one global "
        "generator; in JAX each layer gets its own key: `key1, key2 = jax.random.split(key)`"
    )


@pytest.mark.task("MLP")
def test_mlp_uses_each_key_once(ex, rng):
    """MLP: uses no key twice, in JAX's checker and in its program, for sizes drawn anew"""
    # Where a reused key shows: the numbers of a layer drawn from the parent key after it was
    # split look as independent as any (05's two_normals, the same mistake).
    sizes = tuple(int(n) for n in rng.integers(2, 7, size=3))
    name = f"MLP{sizes}"
    weights = ex.invoke(weights_from_a_key(ex, sizes, MLP_RATE))
    # The program first, for a key the learner's process has not met yet.
    program = weights.exported(jax.random.key(seed(rng)))
    weights.keys_checked()(jax.random.key(seed(rng)))
    program.assert_each_key_used_once(name)


def drawn_apart(a, b):
    """Whether `b` is no rearrangement, sign change or rescaling of `a`: two independent
    draws never have sorted magnitudes in one ratio throughout."""
    x, y = (np.sort(np.abs(np.asarray(w, np.float64)).ravel()) for w in (a, b))
    if x.shape != y.shape or not x.all():
        return True
    ratios = y / x
    return not np.allclose(ratios, ratios[0], rtol=1e-4, atol=0)


# --- predict ----------------------------------------------------------------------------------


@pytest.mark.task("predict")
def test_predict_in_inference_mode_is_the_plain_forward(ex, rng):
    """predict: on an inference-mode model, every row's output, with or without a key"""
    params = make_params(rng, 4, 5, 3)
    xs = random_array(rng, int(rng.integers(5, 12)), 4)
    model = in_inference_mode(ex, built(ex, params, RATE, seed(rng)))
    assert_forward(
        predicted(ex, model, xs, None),
        params,
        xs,
        "predict(eqx.nn.inference_mode(model), xs)",
    )
    assert_forward(
        predicted(ex, model, xs, seed(rng)),
        params,
        xs,
        "predict(eqx.nn.inference_mode(model), xs, key) (in inference mode the key is unused)",
    )
    assert_forward(
        predicted(ex, built(ex, params, 0.0, seed(rng)), xs, seed(rng)),
        params,
        xs,
        "predict(model, xs, key) with dropout_rate=0.0",
    )


@pytest.mark.task("predict")
def test_predict_draws_masks_from_the_key(ex, rng):
    """predict: in training, each row dropped as dropout does; same key same, new key new"""
    params, model = training_model(ex, rng)
    xs = distinct_rows(rng, params)
    key_seed = seed(rng)
    call = f"predict(model, xs, key) in training mode with dropout_rate={RATE}"
    got = predicted(ex, model, xs, key_seed)
    first = masks(params, xs, got, RATE, call)
    assert_rows_differ(first, call)
    assert_rate(first, RATE, call)
    assert_close(
        predicted(ex, model, xs, key_seed),
        got,
        f"{call}, again with the same key,",
        rtol=0,
        atol=1e-6,
    )
    others = masks(params, xs, predicted(ex, model, xs, seed(rng)), RATE, call)
    assert_masks_differ(first, others, call)


@pytest.mark.task("predict")
def test_predict_gives_equal_rows_their_own_masks(ex, rng):
    """predict: in training, equal rows get different masks (a key per row, not per batch)"""
    params = dropout_params(rng)
    row = random_array(rng, np.shape(params["w1"])[0])
    # Every hidden unit well away from 0, so that every unit of every row tells.
    p = to_numpy(params)
    pre = np.asarray(row, np.float64) @ p["w1"] + p["b1"]
    params["b1"] = as_float32(p["b1"] + 0.5 * np.where(pre >= 0, 1, -1))
    model = built(ex, params, RATE, seed(rng))
    xs = as_float32(np.tile(np.asarray(row), (ROWS, 1)))
    call = f"predict(model, xs, key) on {ROWS} equal rows in training mode"
    found = masks(params, xs, predicted(ex, model, xs, seed(rng)), RATE, call)
    distinct = len({tuple(mask) for mask in found})
    # 8 units give 256 masks: 24 rows drawn at random give ~23 distinct ones, and fewer
    # than 8 once in more than 10^12 runs.
    assert distinct >= ROWS // 3, (
        f"{call} gave {distinct} distinct dropout mask(s) for {ROWS} rows: the rows share "
        "one key, so equal rows get equal masks (PyTorch draws every element afresh). Give "
        "each row its own key: `keys = jax.random.split(key, len(xs))`, then "
        "`jax.vmap(lambda x, k: model(x, key=k))(xs, keys)`"
    )


# --- evaluation_mode --------------------------------------------------------------------------


STILL_TRAINING = "still training"


def assert_switched(dropout, call):
    """The model `call` returned is not the one passed in as it was, still training: asked
    before it is called without a key, where its dropout raises for want of one, an error
    whose words name the key, not the mode."""
    if dropout["inference"] is False and not dropout["trained"] and dropout["rate"] == RATE:
        raise Finding(
            STILL_TRAINING,
            f"{call} returned a model still in training mode, as the one you passed in was "
            f"(its dropout's inference=False, rate {RATE}): nothing switched dropout off. "
            "`eqx.nn.inference_mode(model)` returns a new model with dropout off and leaves "
            "`model` as it was (an eqx.Module never changes in place, unlike torch's "
            "`model.eval()`, which flips a flag in the model itself): return what it "
            "returns, `return eqx.nn.inference_mode(model)`",
        )


@pytest.mark.task("evaluation_mode")
def test_evaluation_mode_turns_dropout_off(ex, rng):
    """evaluation_mode: the returned model's output is the deterministic one, key or no key"""
    params, model = training_model(ex, rng)
    xs = distinct_rows(rng, params, 8)
    returned, kind, arrays, dropout = evaluated(ex, model)
    call = "evaluation_mode(model)"
    assert arrays is not None, f"{call} returned {kind}, not the model with dropout off"
    assert_switched(dropout, call)
    assert_forward(called_per_row(ex, returned, xs, [None] * len(xs)), params, xs, f"{call}(x)")
    assert_forward(
        called_per_row(ex, returned, xs, [seed(rng) for _ in xs]),
        params,
        xs,
        f"{call}(x, key=key) (dropout off: the key changes nothing)",
    )
    # The same model in inference mode: its dropout's flag on, its rate as it was. A rate
    # of 0 also gives the plain forward, but it is another model, still training.
    assert inference_on(dropout["inference"]), (
        f"{call}.dropout has inference={plain(dropout['inference'])} and rate "
        f"{plain(dropout['rate'])}: the model should come back in inference mode, its dropout's "
        f"flag on (rate {RATE} kept), as `eqx.nn.inference_mode(model)` gives it. A rate set "
        "to 0 leaves a different model in training mode, like lowering nn.Dropout's p instead "
        "of calling model.eval()"
    )
    assert not dropout["trained"] and dropout["rate"] == RATE, (
        f"{call}.dropout has rate {plain(dropout['rate'])}, not the model's {RATE}: the same "
        "model in inference mode keeps its rate. `eqx.nn.inference_mode(model)` switches the "
        "flag alone"
    )


@pytest.mark.task("evaluation_mode")
def test_evaluation_mode_leaves_your_model_training(ex, rng):
    """evaluation_mode: the model you passed in still trains (dropout on), its values the same"""
    params, model = training_model(ex, rng)
    _, kind, arrays, _ = evaluated(ex, model)
    call = "evaluation_mode(model)"
    assert arrays is not None, f"{call} returned {kind}, not the model with dropout off"
    for k in NAMES:
        assert_close(
            arrays[k], params[k], f"{call}'s {k} (the same model's values)", rtol=0, atol=0
        )
    # The model passed in, called again: its outputs tell its weights and its mode.
    xs = distinct_rows(rng, params)
    after = f"model(x, key=key) after {call}"
    got = called_per_row(ex, model, xs, [seed(rng) for _ in xs])
    switched_off = np.allclose(got, reference(params, xs), rtol=1e-4, atol=1e-5)
    assert not switched_off, (
        f"after {call}, the model you passed in gives the dropout-free output whatever the "
        f"key: it is in inference mode too, so {call} changed it in place, like "
        f"model.eval(). {NOT_EVAL}"
    )
    found = masks(params, xs, got, RATE, after)
    dropped = bool(np.any(found == 0))
    assert dropped, (
        f"{after} dropped no hidden unit: the model you passed in no longer trains, so "
        f"{call} switched its dropout off in place, like model.eval(). {NOT_EVAL}"
    )
    assert_rate(found, RATE, after)


# --- train_step -------------------------------------------------------------------------------


def unpack_step(taken, call):
    """(model handle, opt_state handle, loss, arrays, dropout) from what a step returned."""
    assert "returned" not in taken, (
        f"{call} should return a triple (model, opt_state, loss), but returned "
        f"{taken.get('returned')}"
    )
    assert taken["arrays"] is not None, (
        f"{call}[0] should be the new model (an MLP), but is {taken['model_type']}"
    )
    return taken["model"], taken["opt_state"], taken["loss"], taken["arrays"], taken["dropout"]


def assert_adam_step(got, p, adam, x, y, call, after=""):
    """`got` is where Adam in state `adam` takes `p`; returns the judge's new params and state.
    `after` says what the step is, after the leaf it judges."""
    want, adam, _ = adam.step(p, x, y)
    first_step, _, _ = NumpyAdam.fresh(p).step(p, x, y)

    def close(target):
        return all(
            np.allclose(np.asarray(got[k], np.float64), target[k], **STEP_TOLERANCE) for k in NAMES
        )

    assert close(want) or not close(first_step), (
        f"{call} took Adam's very first step again: the opt_state passed in (its moments and "
        "step count) was not used, or the one a step made was not returned: a PyTorch "
        "optimizer keeps its state inside itself, an Optax one hands it back. Update from "
        "the opt_state you are given and return the new one"
    )
    for k in NAMES:
        assert_close(got[k], want[k], f"{call}'s new {k}{after}", **STEP_TOLERANCE)
    return want, adam


def assert_loss_before(value, p, x, y, call):
    mlp_reference.assert_loss_before(
        value, p, x, y, call, "jnp.mean((predict(model, xs, key) - ys) ** 2)"
    )


def run_steps(ex, model, opt_state, p, adam, batches, call):
    """The learner's steps, one per batch, checked each against the judge's Adam."""
    for number, (x, y) in enumerate(batches, start=1):
        this = f"step {number} of {call}" + (
            " (fed the model and opt_state the step before returned)" if number > 1 else ""
        )
        taken = step_taken(ex, model, opt_state, x, y, jax.random.key(number))
        model, opt_state, value, arrays, _ = unpack_step(taken, this)
        assert_loss_before(value, p, x, y, this)
        p, adam = assert_adam_step(arrays, p, adam, x, y, this)
    return model, opt_state


@pytest.mark.task("train_step")
def test_train_step_matches_adam(ex, rng):
    """train_step: 4 steps and one of tiny gradients move the weights as Adam does (no dropout)"""
    # Where a weight decay and a wrong eps show (both hide under STEP_TOLERANCE in ordinary
    # steps): a step in which linear1's gradient is exactly 0 and linear2's about 5e-8.
    # Whether linear1 moved is asked first: an ordinary step can show a decay added to the
    # gradient too, but not what it is. The step's values are judged after the ordinary
    # steps, whose messages say more about a step wrong everywhere.
    small_params, (small_x, small_y) = small_gradients(rng, zeroed=("w2",))
    small_model = built(ex, small_params, 0.0, seed(rng))
    small_p = to_numpy(small_params)
    call = "train_step(model, opt_state, xs, ys, key)"
    where = "from a fresh state with linear2's weight and bias 0 and ys about 2.5e-8"
    taken = step_taken(
        ex, small_model, adam_state(ex, small_model), small_x, small_y, jax.random.key(seed(rng))
    )
    _, _, small_value, small_arrays, _ = unpack_step(taken, f"{call} {where}")
    assert_unmoved(
        small_arrays,
        small_p,
        {"w1": "its linear1.weight", "b1": "its linear1.bias"},
        f"{call}, {where},",
        "none reaches linear1 through a 0 weight",
    )
    params, first_batch = adam_start(rng)
    model = built(ex, params, 0.0, seed(rng))
    p = to_numpy(params)
    run_steps(
        ex,
        model,
        adam_state(ex, model),
        p,
        NumpyAdam.fresh(p),
        # A fresh batch each step: on one batch repeated, Adam's second step is within
        # the step tolerance of its first, so a step that drops the state could pass.
        [first_batch] + [regression_data(rng) for _ in range(3)],
        call,
    )
    assert_loss_before(small_value, small_p, small_x, small_y, f"{call} {where}: {call}")
    assert_adam_step(
        small_arrays,
        small_p,
        NumpyAdam.fresh(small_p),
        small_x,
        small_y,
        call,
        after=(
            f", {where} (gradients where Adam's eps decides the step's size: "
            "optax.adam(1e-2) keeps its default eps=1e-8),"
        ),
    )


@pytest.mark.task("train_step")
def test_train_step_continues_any_adam_state(ex, rng):
    """train_step: continues from any state Adam reached, its moments and step count"""
    # Two outputs: the loss is the mean over the batch and the outputs alike (one output
    # hides a loss summed over outputs and averaged over the batch).
    p = to_numpy(make_params(rng, n_out=2))
    steps = int(rng.integers(3, 8))
    adam = NumpyAdam.fresh(p)
    for _ in range(steps):  # a fresh batch each step, so the moments are far from fresh ones
        p, adam, _ = adam.step(p, *regression_data(rng, n_out=2))
    params = {k: as_float32(v) for k, v in p.items()}
    p = to_numpy(params)
    model = built(ex, params, 0.0, seed(rng))

    def float32(moments):
        return {k: np.asarray(v, np.float32) for k, v in moments.items()}

    opt_state = adam_state(ex, model, adam.count, float32(adam.mu), float32(adam.nu))
    run_steps(
        ex,
        model,
        opt_state,
        p,
        adam,
        [regression_data(rng, n_out=2)],
        f"train_step(model, opt_state, xs, ys, key) for a model of 2 outputs, with Adam's "
        f"state after {steps} steps",
    )


@pytest.mark.task("train_step")
def test_train_step_trains_only_weights_and_biases(ex, rng):
    """train_step: the dropout's rate and mode come back as they were; only arrays train"""
    params, model = training_model(ex, rng)
    xs = distinct_rows(rng, params, 16)
    ys = random_array(rng, 16, np.shape(params["w2"])[1])
    call = f"train_step(model, opt_state, xs, ys, key) with dropout_rate={RATE}"
    taken = step_taken(ex, model, adam_state(ex, model), xs, ys, jax.random.key(seed(rng)))
    new_model, _, _, arrays, dropout = unpack_step(taken, call)
    assert not dropout["trained"] and dropout["rate"] == RATE, (
        f"{call} changed the dropout rate from {RATE} to {show(dropout['rate'])}: the "
        f"optimizer trained it. {ONLY_ARRAYS}"
    )
    assert dropout["inference"] is False, (
        f"{call} returned a model in inference mode: a step trains, and leaves the mode as it was"
    )
    # Judged from outside too: the new model, on examples with keys, still drops units at
    # the same rate and scales the rest by 1 / (1 - rate), with the weights the step returned.
    rows = distinct_rows(rng, params)
    then = f"the model {call} returned, called on {len(rows)} examples with keys,"
    got = called_per_row(ex, new_model, rows, [seed(rng) for _ in rows])
    assert_rate(masks(arrays, rows, got, RATE, then), RATE, then)


@pytest.mark.task("train_step")
def test_train_step_draws_dropout_from_the_key(ex, rng):
    """train_step: with dropout, the same key gives the same step, different keys different"""
    params, model = training_model(ex, rng)
    xs = distinct_rows(rng, params, 16)
    ys = random_array(rng, 16, np.shape(params["w2"])[1])
    opt_state = adam_state(ex, model)
    key_seed = seed(rng)
    call = f"train_step(model, opt_state, xs, ys, key) with dropout_rate={RATE}"
    # Four other keys, not one: a step whose dropout draws one mask for the whole batch (a
    # mistake another check catches) has 2**8 masks, so one other key repeats its step once in
    # 256 runs; four all repeat it once in 2**32.
    (_, _, loss, first, _), (_, _, loss_again, again, _), *others = [
        unpack_step(step_taken(ex, model, opt_state, xs, ys, jax.random.key(s)), call)
        for s in (key_seed, key_seed, *(seed(rng) for _ in range(4)))
    ]
    for k in NAMES:
        assert_close(
            again[k], first[k], f"{call}'s new {k}, again with the same key,", rtol=0, atol=1e-6
        )
    assert_close(loss_again, loss, f"{call}[2], again with the same key,", rtol=0, atol=1e-6)

    def same_step(other_loss, other):
        return np.isclose(float(other_loss), float(loss), rtol=0, atol=1e-7) and all(
            np.allclose(other[k], first[k], rtol=0, atol=1e-7) for k in NAMES
        )

    assert not all(same_step(other_loss, other) for _, _, other_loss, other, _ in others), (
        f"{call} took the same step for five different keys: the key must reach the dropout, "
        "so that each step drops other units: `predict(model, xs, key)` inside the loss"
    )
    deterministic = np_loss(to_numpy(params), xs, ys)
    assert not np.isclose(float(loss), deterministic, rtol=1e-6), (
        f"{call}[2] is the loss with dropout off ({deterministic:.6g}): the step trains the "
        "model in training mode, with dropout drawn from the key"
    )


@pytest.mark.task("train_step")
def test_train_step_leaves_inputs_alone(ex, rng):
    """train_step: your model, opt_state, xs and ys stay as they were, mode and rate too"""
    params, model = training_model(ex, rng)
    xs = distinct_rows(rng, params, 8)
    ys = random_array(rng, 8, np.shape(params["w2"])[1])
    call = "train_step(model, opt_state, xs, ys, key), twice on the same inputs,"
    before, after = inputs_around_steps(
        ex, model, adam_state(ex, model), xs, ys, jax.random.key(seed(rng)), 2
    )
    for name, was, now in zip(("model", "opt_state", "xs", "ys"), before, after, strict=True):
        assert_untouched(now, was, name, call)
    # From its outputs: the model passed in still holds the judge's weights and still
    # drops units at its rate.
    rows = distinct_rows(rng, params)
    then = f"your model, called on {len(rows)} examples with keys after {call}"
    got = called_per_row(ex, model, rows, [seed(rng) for _ in rows])
    assert_rate(masks(params, rows, got, RATE, then), RATE, then)


@pytest.mark.task("train_step")
def test_train_step_compiles_once(ex, rng):
    """train_step: one compiled program on its first call, reused for 8 more Adam steps"""
    params, first_batch = adam_start(rng, n_hidden=5, batch=24)
    model = built(ex, params, 0.0, seed(rng))
    opt_state = adam_state(ex, model)
    batches = [first_batch] + [regression_data(rng, 24) for _ in range(8)]
    keys = [jax.random.key(seed(rng)) for _ in batches]
    call = "train_step(model, opt_state, xs, ys, key)"
    p = to_numpy(params)
    adam = NumpyAdam.fresh(p)
    with count_compilations() as first:
        taken = step_taken(ex, model, opt_state, *batches[0], keys[0])
    model, opt_state, _, arrays, _ = unpack_step(taken, call)
    listed = ", ".join(first.names[:6]) + (", …" if first.count > 6 else "")
    assert first.count <= ONE_PROGRAM, (
        f"the first {call} for new shapes compiled {first.count} separate programs ({listed}): "
        "every operation outside a jit runs on its own, as in PyTorch's eager mode. Put the "
        "whole step under `@eqx.filter_jit` (jax.jit cannot take a model's non-array fields)"
    )
    p, adam = assert_adam_step(arrays, p, adam, *batches[0], call)
    with count_compilations() as later:
        for (x, y), key in zip(batches[1:], keys[1:], strict=True):
            model, opt_state, _, arrays, _ = unpack_step(
                step_taken(ex, model, opt_state, x, y, key), call
            )
            p, adam = assert_adam_step(arrays, p, adam, x, y, f"{call}, on a new batch,")
    assert later.count == 0, (
        f"{call} compiled {later.count} more times in 8 steps with data of the same shape "
        f"({', '.join(sorted(set(later.names)))}): the program compiled on the first call "
        "should be reused. Decorate train_step itself with `@eqx.filter_jit`, once, at module "
        "level, and make the optimizer there too"
    )
