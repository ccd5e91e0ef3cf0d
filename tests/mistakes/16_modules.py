"""Wrong answers a learner writes for 16_modules, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function or
class); `fails` names the checks that must then fail; `raises`, where given, is the
exception the first of them reports, whose diagnosis the grader must show; `says`, a
fragment of its message. `CORRECT` lists other right answers, each appended the same way,
that must pass every check.
"""

MISTAKES = [
    {
        "name": "both layers drawn from the same key, as from PyTorch's one global generator",
        "advice": None,
        "code": """
class MLP(MLP):
    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=key)
        self.dropout = eqx.nn.Dropout(dropout_rate)
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=key)
""",
        "fails": ["test_mlp_layers_draw_their_own_weights"],
        "says": "drew from the same key",
    },
    {
        "name": "the weights from a fixed key, the key passed in ignored (torch.manual_seed(0))",
        "advice": None,
        "code": """
class MLP(MLP):
    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        key1, key2 = jax.random.split(jax.random.key(0))
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=key1)
        self.dropout = eqx.nn.Dropout(dropout_rate)
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=key2)
""",
        "fails": ["test_mlp_layers_draw_their_own_weights"],
        "says": "two different keys",
    },
    {
        "name": "the MLP built in inference mode, as after model.eval()",
        "advice": None,
        "code": """
class MLP(MLP):
    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        key1, key2 = jax.random.split(key)
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=key1)
        self.dropout = eqx.nn.Dropout(dropout_rate, inference=True)
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=key2)
""",
        "fails": [
            "test_mlp_holds_two_linears_and_a_dropout",
            "test_mlp_dropout_draws_from_the_key",
        ],
    },
    {
        "name": "dropout_rate taken as the probability of keeping a unit",
        "advice": None,
        "code": """
class MLP(MLP):
    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        key1, key2 = jax.random.split(key)
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=key1)
        self.dropout = eqx.nn.Dropout(1 - dropout_rate)
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=key2)
""",
        "fails": [
            "test_mlp_holds_two_linears_and_a_dropout",
            "test_mlp_dropout_draws_from_the_key",
        ],
    },
    {
        "name": "dropout before the tanh",
        "advice": None,
        "code": """
class MLP(MLP):
    def __call__(self, x, *, key=None):
        return self.linear2(jnp.tanh(self.dropout(self.linear1(x), key=key)))
""",
        "fails": ["test_mlp_dropout_draws_from_the_key", "test_predict_draws_masks_from_the_key"],
        "says": "neither 0",
    },
    {
        "name": "a hand-written mask without the 1 / (1 - rate) scaling",
        "advice": None,
        "code": """
class MLP(MLP):
    def __call__(self, x, *, key=None):
        hidden = jnp.tanh(self.linear1(x))
        if key is not None and not self.dropout.inference:
            kept = jax.random.bernoulli(key, 1 - self.dropout.p, hidden.shape)
            hidden = jnp.where(kept, hidden, 0)
        return self.linear2(hidden)
""",
        "fails": ["test_mlp_dropout_draws_from_the_key", "test_predict_draws_masks_from_the_key"],
        "says": "neither 0",
    },
    {
        "name": "predict with one key for the whole batch",
        "advice": None,
        "code": """
def predict(model, xs, key=None):
    return jax.vmap(lambda x: model(x, key=key))(xs)
""",
        "fails": ["test_predict_gives_equal_rows_their_own_masks"],
        "says": "share one key",
    },
    {
        "name": "predict as a Python loop over rows, every row with the same key",
        "advice": None,
        "code": """
def predict(model, xs, key=None):
    return jnp.stack([model(x, key=key) for x in xs])
""",
        "fails": ["test_predict_gives_equal_rows_their_own_masks"],
    },
    {
        "name": "predict never passes the key on, so training mode has no key for dropout",
        "advice": "got no PRNG key",
        "code": """
def predict(model, xs, key=None):
    return jax.vmap(model)(xs)
""",
        "fails": ["test_predict_draws_masks_from_the_key"],
        "raises": "RuntimeError",
    },
    {
        "name": "predict calls the model on the whole batch, as an nn.Module takes one",
        "advice": "takes one example",
        "code": """
def predict(model, xs, key=None):
    return model(xs, key=key)
""",
        "fails": ["test_predict_in_inference_mode_is_the_plain_forward"],
    },
    {
        "name": "evaluation_mode flips the flag on the model passed in, like model.eval()",
        "advice": None,
        "code": """
def evaluation_mode(model):
    object.__setattr__(model.dropout, "inference", True)
    return model
""",
        "fails": ["test_evaluation_mode_leaves_your_model_training"],
        "says": "like model.eval()",
    },
    {
        "name": "evaluation_mode assigns to the frozen module's field",
        "advice": "a model never changes in place",
        "code": """
def evaluation_mode(model):
    model.dropout.inference = True
    return model
""",
        "fails": [
            "test_evaluation_mode_turns_dropout_off",
            "test_evaluation_mode_leaves_your_model_training",
        ],
        "raises": "FrozenInstanceError",
    },
    {
        # Its mode is read before it is called: called without a key, its dropout raises
        # for one (once the verdict, told that dropout got no key).
        "name": "evaluation_mode that changes nothing: the model still drops units",
        "advice": None,
        "code": """
def evaluation_mode(model):
    return model
""",
        "fails": ["test_evaluation_mode_turns_dropout_off"],
        "says": "still in training mode, as the one you passed in was",
    },
    {
        # torch's `model.eval()` habit: once told dropout got no key, and to call
        # inference_mode, which it does.
        "name": "evaluation_mode calls inference_mode and drops its result, like model.eval()",
        "advice": "`model = eqx.nn.inference_mode(model)`",
        "code": """
def evaluation_mode(model):
    eqx.nn.inference_mode(model)
    return model
""",
        "fails": ["test_evaluation_mode_turns_dropout_off"],
        "says": "still in training mode",
        "explains": "drops the result of `eqx.nn.inference_mode(model)`",
    },
    {
        # Once told dropout got no key.
        "name": "evaluation_mode sets the flag with eqx.tree_at and drops the new model",
        "advice": "`model = eqx.tree_at(lambda m: m.dropout.inference, model, True)`",
        "code": """
def evaluation_mode(model):
    eqx.tree_at(lambda m: m.dropout.inference, model, True)
    return model
""",
        "fails": ["test_evaluation_mode_turns_dropout_off"],
        "explains": "an eqx.Module never changes in place",
    },
    {
        "name": "evaluation_mode sets the caller's dropout rate to 0 in place",
        "advice": None,
        "code": """
def evaluation_mode(model):
    object.__setattr__(model.dropout, "p", 0.0)
    return model
""",
        "fails": ["test_evaluation_mode_leaves_your_model_training"],
    },
    {
        "name": "train_step hands back the state it was given, as if the optimizer kept its own",
        "advice": None,
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean((predict(model, xs, key) - ys) ** 2)

    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, _ = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, value
""",
        "fails": ["test_train_step_matches_adam"],
        "says": "first step again",
    },
    {
        # torch's `optimizer.step()` habit; once a bare wrong value (the weights as given).
        "name": "train_step drops what eqx.apply_updates returns, as if it stepped in place",
        "advice": "`model = eqx.apply_updates(model, updates)`",
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean((predict(model, xs, key) - ys) ** 2)

    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    eqx.apply_updates(model, updates)
    return model, opt_state, value
""",
        "fails": ["test_train_step_matches_adam"],
        "explains": "torch's `optimizer.step()` moves them in place",
    },
    {
        # The gradients applied as they came, the state as it was: once a bare wrong value.
        "name": "train_step drops what optimizer.update returns and applies the gradients",
        "advice": "`updates, opt_state = optimizer.update(",
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean((predict(model, xs, key) - ys) ** 2)

    value, grads = eqx.filter_value_and_grad(loss)(model)
    optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, grads), opt_state, value
""",
        "fails": ["test_train_step_matches_adam"],
        "explains": "returns `(updates, new_state)`",
    },
    {
        "name": "train_step starts a fresh optimizer state every step",
        "advice": None,
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean((predict(model, xs, key) - ys) ** 2)

    params = eqx.filter(model, eqx.is_array)
    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, opt_state = optimizer.update(grads, optimizer.init(params), params)
    return eqx.apply_updates(model, updates), opt_state, value
""",
        "fails": ["test_train_step_matches_adam", "test_train_step_continues_any_adam_state"],
    },
    {
        "name": "train_step not compiled: it runs op by op",
        "advice": None,
        "code": """
train_step = train_step.__wrapped__
""",
        "fails": ["test_train_step_compiles_once"],
    },
    {
        "name": "a new eqx.filter_jit of a new function on every call",
        "advice": None,
        "code": """
_compiled_step = train_step


def train_step(model, opt_state, xs, ys, key):
    return eqx.filter_jit(lambda *args: _compiled_step.__wrapped__(*args))(
        model, opt_state, xs, ys, key
    )
""",
        "fails": ["test_train_step_compiles_once"],
    },
    {
        "name": "jax.jit over a model with non-array fields: the dropout's flag is traced",
        "advice": "eqx.filter_jit",
        "code": """
train_step = jax.jit(train_step.__wrapped__)
""",
        "fails": ["test_train_step_matches_adam"],
        "raises": "TracerBoolConversionError",
    },
    {
        "name": "jax.value_and_grad of the whole model, flags and all, like loss.backward()",
        "advice": "eqx.filter_value_and_grad",
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean((predict(model, xs, key) - ys) ** 2)

    value, grads = jax.value_and_grad(loss)(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, value
""",
        "fails": ["test_train_step_matches_adam"],
        "raises": "TypeError",
    },
    {
        "name": "Optax on every float of the model, the dropout rate too",
        "advice": "which calls `eqx.partition`",
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    params, static = eqx.partition(model, eqx.is_inexact_array_like)

    def loss(params):
        return jnp.mean((predict(eqx.combine(params, static), xs, key) - ys) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return eqx.combine(optax.apply_updates(params, updates), static), opt_state, value
""",
        "fails": ["test_train_step_matches_adam", "test_train_step_trains_only_weights_and_biases"],
    },
    {
        "name": "the loss after the step returned",
        "advice": None,
        "code": """
_step = train_step


def train_step(model, opt_state, xs, ys, key):
    model, opt_state, _ = _step(model, opt_state, xs, ys, key)
    return model, opt_state, jnp.mean((predict(model, xs, key) - ys) ** 2)
""",
        "fails": ["test_train_step_matches_adam", "test_train_step_continues_any_adam_state"],
    },
    {
        "name": "the loss computed without the key: dropout has no key in training",
        "advice": "got no PRNG key",
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean((predict(model, xs) - ys) ** 2)

    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, value
""",
        "fails": ["test_train_step_draws_dropout_from_the_key"],
        "raises": "RuntimeError",
    },
    {
        "name": "the step trains in inference mode: dropout never drops",
        "advice": None,
        "code": """
_step = train_step


def train_step(model, opt_state, xs, ys, key):
    trained, opt_state, value = _step(eqx.nn.inference_mode(model), opt_state, xs, ys, key)
    return trained, opt_state, value
""",
        "fails": [
            "test_train_step_draws_dropout_from_the_key",
            "test_train_step_trains_only_weights_and_biases",
        ],
    },
    {
        "name": "the step written into the caller's model, like optimizer.step()",
        "advice": None,
        "code": """
_step = train_step


def train_step(model, opt_state, xs, ys, key):
    new_model, opt_state, value = _step(model, opt_state, xs, ys, key)
    for name in ("linear1", "linear2"):
        object.__setattr__(model, name, getattr(new_model, name))
    return model, opt_state, value
""",
        "fails": ["test_train_step_leaves_inputs_alone"],
    },
    {
        "name": "the caller's model and state donated to the step",
        "advice": None,
        "code": """
train_step = eqx.filter_jit(train_step.__wrapped__, donate="all")
""",
        "fails": ["test_train_step_leaves_inputs_alone"],
    },
    {
        "name": "both layers from the same key, the second's weights negated to look new",
        "advice": None,
        "code": """
class MLP(MLP):
    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=key)
        self.dropout = eqx.nn.Dropout(dropout_rate)
        second = eqx.nn.Linear(d_hidden, d_out, key=key)
        self.linear2 = eqx.tree_at(lambda layer: layer.weight, second, -second.weight.T.T)
""",
        "fails": ["test_mlp_layers_draw_their_own_weights"],
        "says": "drew from the same key",
    },
    {
        # PyTorch's habit: a loss summed over outputs, then averaged over the batch. With
        # one output it is the mean squared error.
        "name": "train_step's loss sums the squared error over outputs, averages over the batch",
        "advice": None,
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean(jnp.sum((predict(model, xs, key) - ys) ** 2, axis=-1))

    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, value
""",
        "fails": ["test_train_step_continues_any_adam_state"],
        "says": "the loss before the step",
    },
    {
        # Equinox's dropout at rate 0 is the identity, so the outputs alone cannot tell.
        "name": "evaluation_mode sets the dropout rate to 0 on a copy, still in training mode",
        "advice": None,
        "code": """
def evaluation_mode(model):
    return eqx.tree_at(lambda m: m.dropout.p, model, 0.0)
""",
        "fails": ["test_evaluation_mode_turns_dropout_off"],
        "says": "should come back in inference mode",
    },
    {
        # optax.adamw itself fails on Adam's state (its chain has three parts); AdamW's
        # decay written into the updates fits it. It moves params by 1e-6 of themselves a
        # step, under every step tolerance: only a leaf whose gradient is exactly 0 shows it.
        "name": "train_step with AdamW's decoupled weight decay added to Adam's updates",
        "advice": None,
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean((predict(model, xs, key) - ys) ** 2)

    value, grads = eqx.filter_value_and_grad(loss)(model)
    params = eqx.filter(model, eqx.is_array)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    updates = jax.tree.map(lambda u, p: u - 1e-2 * 1e-4 * p, updates, params)
    return eqx.apply_updates(model, updates), opt_state, value
""",
        "fails": ["test_train_step_matches_adam"],
        "says": "AdamW's weight decay",
    },
    {
        # PyTorch's Adam(weight_decay=1e-4): an L2 term added to the gradient. Next to
        # gradients of 0.1 it shifts Adam's step by ~1e-5, about the step tolerance.
        "name": "train_step adding a weight decay to the gradient, as PyTorch's Adam(weight_decay)",
        "advice": None,
        # Compile-once compares each of its 9 steps with Adam too, where this shift sits at
        # the step tolerance: one grading of 4 on JAX 0.10.2 failed it there, by 3e-4 in a
        # weight (the floor comparison, 2026-12-06). The small-gradient step decides it.
        "undecided": ["test_train_step_compiles_once"],
        "code": """
@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    def loss(model):
        return jnp.mean((predict(model, xs, key) - ys) ** 2)

    value, grads = eqx.filter_value_and_grad(loss)(model)
    params = eqx.filter(model, eqx.is_array)
    grads = jax.tree.map(lambda g, p: g + 1e-4 * p, grads, params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return eqx.apply_updates(model, updates), opt_state, value
""",
        "fails": ["test_train_step_matches_adam"],
        "says": "PyTorch's Adam(weight_decay=...)",
    },
    {
        # eps=1e-6 against 1e-8 changes Adam's step only where a gradient is near eps: the
        # check's small-gradient step shows it; its ordinary steps do, at times, first.
        "name": "train_step's Adam with eps=1e-6 instead of the default 1e-8",
        "advice": None,
        "code": """
optimizer = optax.adam(1e-2, eps=1e-6)
""",
        "fails": ["test_train_step_matches_adam"],
        "says": "returned a wrong value",
    },
    {
        # 05's two_normals mistake in a Module's __init__: linear1 from the parent key after
        # splitting it. Its weights look as independent as any (a red team's).
        "name": "MLP draws linear1 from the parent key after splitting it",
        "advice": "a PRNG key used twice",
        "code": """
class MLP(MLP):
    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        _, key2 = jax.random.split(key)
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=key)
        self.dropout = eqx.nn.Dropout(dropout_rate)
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=key2)
""",
        "fails": ["test_mlp_uses_each_key_once"],
        "raises": "KeyReuseError",
    },
    {
        # JAX's key-reuse checker lets a fold_in beside another draw from the key pass; the
        # program the grader reads shows both draw from its words.
        "name": "MLP draws linear1 from the key itself and linear2 from fold_in(key, 1)",
        "advice": None,
        "code": """
class MLP(MLP):
    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=key)
        self.dropout = eqx.nn.Dropout(dropout_rate)
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=jax.random.fold_in(key, 1))
""",
        "fails": ["test_mlp_uses_each_key_once"],
        "says": "draws from one key twice",
    },
]

CORRECT = [
    {
        "name": "keys by fold_in, eqx.filter_vmap, tree_at for inference, partition and combine",
        "code": """
class MLP(eqx.Module):
    linear1: eqx.nn.Linear
    dropout: eqx.nn.Dropout
    linear2: eqx.nn.Linear

    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=jax.random.fold_in(key, 1))
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=jax.random.fold_in(key, 2))
        self.dropout = eqx.nn.Dropout(p=dropout_rate, inference=False)

    def __call__(self, x, *, key=None):
        hidden = jax.nn.tanh(self.linear1(x))
        return self.linear2(self.dropout(hidden, key=key))


def predict(model, xs, key=None):
    if key is None:
        return eqx.filter_vmap(model)(xs)
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(xs.shape[0]))
    return eqx.filter_vmap(lambda x, k: model(x, key=k))(xs, keys)


def evaluation_mode(model):
    return eqx.tree_at(lambda m: m.dropout.inference, model, True)


@eqx.filter_jit
def train_step(model, opt_state, xs, ys, key):
    params, static = eqx.partition(model, eqx.is_array)

    def loss(params):
        return jnp.mean((predict(eqx.combine(params, static), xs, key) - ys) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return eqx.combine(optax.apply_updates(params, updates), static), opt_state, value
""",
    },
    {
        "name": "jax.vmap with in_axes over the model, keys split in __init__ three ways",
        "code": """
class MLP(MLP):
    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        first, _, second = jax.random.split(key, 3)
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=first)
        self.dropout = eqx.nn.Dropout(dropout_rate)
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=second)


def predict(model, xs, key=None):
    keys = None if key is None else jax.random.split(key, len(xs))
    return jax.vmap(
        lambda m, x, k: m(x, key=k), in_axes=(None, 0, None if keys is None else 0)
    )(model, xs, keys)


def evaluation_mode(model):
    return eqx.nn.inference_mode(model, value=True)
""",
    },
]
