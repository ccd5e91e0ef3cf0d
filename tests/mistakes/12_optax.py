"""Wrong answers a learner writes for 12_optax, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` lists other right
answers, each appended the same way, that must pass every check.
"""

MISTAKES = [
    {
        "name": "updates subtracted, as if they were gradients",
        "advice": None,
        "code": """
@jax.jit
def adam_step(params, opt_state, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    updates, opt_state = optax.adam(1e-2).update(grads, opt_state, params)
    return jax.tree.map(lambda p, u: p - u, params, updates), opt_state, value
""",
        "fails": ["test_adam_step_matches_adam", "test_train_adam_matches_adam"],
        "says": "the opposite way to Adam's step",
    },
    {
        # torch.optim.Adam's default lr; the contract asks optax.adam(1e-2). Told before as
        # "the steps do not share one optimizer state"; now by the factor its step is off by.
        "name": "Adam at torch's default learning rate, 1e-3",
        "advice": None,
        "code": """
@jax.jit
def adam_step(params, opt_state, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    updates, opt_state = optax.adam(1e-3).update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value
""",
        "fails": ["test_adam_step_matches_adam"],
        "says": "its step is 1/10 of the expected one: a learning rate 10× smaller",
    },
    {
        "name": "a new optimizer and a fresh state every step, the state passed in ignored",
        "advice": None,
        "code": """
@jax.jit
def adam_step(params, opt_state, x, y):
    optimizer = optax.adam(1e-2)
    return optimizer_step(optimizer, params, optimizer.init(params), x, y)
""",
        "fails": ["test_adam_step_matches_adam", "test_adam_step_continues_any_adam_state"],
    },
    {
        "name": "the step not compiled: Adam runs op by op",
        "advice": None,
        "code": """
def adam_step(params, opt_state, x, y):
    return optimizer_step(adam, params, opt_state, x, y)
""",
        "fails": ["test_adam_step_compiles_once"],
    },
    {
        "name": "a new jax.jit of a new function on every call",
        "advice": None,
        "code": """
def adam_step(params, opt_state, x, y):
    return jax.jit(lambda *args: optimizer_step(adam, *args))(params, opt_state, x, y)
""",
        "fails": ["test_adam_step_compiles_once"],
    },
    {
        "name": "the caller's params and state donated to the step",
        "advice": None,
        "code": """
from functools import partial


@partial(jax.jit, donate_argnums=(0, 1))
def adam_step(params, opt_state, x, y):
    return optimizer_step(adam, params, opt_state, x, y)
""",
        "fails": ["test_adam_step_leaves_inputs_alone"],
    },
    {
        "name": "the update written into the caller's dict, like optimizer.step()",
        "advice": None,
        "code": """
@jax.jit
def adam_step(params, opt_state, x, y):
    new_params, opt_state, value = optimizer_step(adam, params, opt_state, x, y)
    params.update(new_params)
    return params, opt_state, value
""",
        "fails": ["test_adam_step_leaves_inputs_alone_eagerly"],
    },
    {
        "name": "the loss after the step returned",
        "advice": None,
        "code": """
@jax.jit
def adam_step(params, opt_state, x, y):
    params, opt_state, _ = optimizer_step(adam, params, opt_state, x, y)
    return params, opt_state, loss(params, x, y)
""",
        "fails": ["test_adam_step_matches_adam", "test_adam_step_continues_any_adam_state"],
    },
    {
        "name": "train_adam drops the state each step returns",
        "advice": None,
        "code": """
def train_adam(params, x, y, steps):
    opt_state = adam.init(params)
    losses = []
    for _ in range(steps):
        params, _, value = adam_step(params, opt_state, x, y)
        losses.append(value)
    return params, losses
""",
        "fails": ["test_train_adam_matches_adam"],
    },
    {
        "name": "train_adam written the torch.optim way",
        "advice": "used like a torch.optim object",
        "code": """
def train_adam(params, x, y, steps):
    optimizer = optax.adam(1e-2)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        value, grads = jax.value_and_grad(loss)(params, x, y)
        params = optimizer.step(grads)
        losses.append(value)
    return params, losses
""",
        "fails": ["test_train_adam_matches_adam"],
        "raises": "AttributeError",
    },
    {
        "name": "train_adam with plain SGD",
        "advice": None,
        "code": """
def train_adam(params, x, y, steps):
    losses = []
    for _ in range(steps):
        losses.append(loss(params, x, y))
        grads = jax.grad(loss)(params, x, y)
        params = jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads)
    return params, losses
""",
        "fails": ["test_train_adam_matches_adam"],
    },
    {
        "name": "freezing with optax.masked: the masked leaves get their raw gradients",
        "advice": None,
        "code": """
finetune_optimizer = optax.masked(
    optax.adam(1e-2), {"w1": False, "b1": False, "w2": True, "b2": True}
)
""",
        "fails": [
            "test_finetune_step_freezes_w1_b1_and_trains_w2_b2",
            "test_finetune_init_state_lasts_a_run",
        ],
    },
    {
        "name": "the frozen and trained labels swapped",
        "advice": None,
        "code": """
finetune_optimizer = optax.multi_transform(
    {"trained": optax.adam(1e-2), "frozen": optax.set_to_zero()},
    {"w1": "trained", "b1": "trained", "w2": "frozen", "b2": "frozen"},
)
""",
        "fails": [
            "test_finetune_step_freezes_w1_b1_and_trains_w2_b2",
            "test_finetune_init_state_lasts_a_run",
        ],
    },
    {
        "name": "frozen with a smaller learning rate instead of none",
        "advice": None,
        "code": """
finetune_optimizer = optax.multi_transform(
    {"trained": optax.adam(1e-2), "frozen": optax.adam(1e-6)}, FROZEN
)
""",
        "fails": [
            "test_finetune_step_freezes_w1_b1_and_trains_w2_b2",
            "test_finetune_init_state_lasts_a_run",
        ],
    },
    {
        "name": "finetune_step not compiled",
        "advice": None,
        "code": """
def finetune_step(params, opt_state, x, y):
    return optimizer_step(finetune_optimizer, params, opt_state, x, y)
""",
        "fails": ["test_finetune_step_compiles_once"],
    },
    {
        "name": "each value clipped on its own, like clip_grad_value_",
        "advice": None,
        "code": """
clipped_sgd = optax.chain(optax.clip(1.0), optax.sgd(0.1))
""",
        "fails": ["test_clipped_sgd_step_clips_large_gradients"],
    },
    {
        "name": "each leaf clipped to norm 1 on its own",
        "advice": None,
        "code": """
@jax.jit
def clipped_sgd_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)

    def clip(g):
        return g * jnp.minimum(1.0, 1.0 / jnp.linalg.norm(g))

    return jax.tree.map(lambda p, g: p - 0.1 * clip(g), params, grads)
""",
        "fails": ["test_clipped_sgd_step_clips_large_gradients"],
    },
    {
        "name": "always scaled to norm 1, even when shorter",
        "advice": None,
        "code": """
@jax.jit
def clipped_sgd_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    norm = optax.global_norm(grads)
    return jax.tree.map(lambda p, g: p - 0.1 * g / norm, params, grads)
""",
        "fails": ["test_clipped_sgd_step_keeps_small_gradients"],
    },
    {
        "name": "train_adam keeps one module-global opt_state across calls",
        "advice": None,
        "code": """
opt_state = None


def train_adam(params, x, y, steps):
    global opt_state
    if opt_state is None:
        opt_state = adam.init(params)
    losses = []
    for _ in range(steps):
        params, opt_state, value = adam_step(params, opt_state, x, y)
        losses.append(value)
    return params, jnp.stack(losses)
""",
        "fails": ["test_train_adam_twice_from_the_same_params_agrees"],
        "says": "carried on from state the first left behind",
    },
    {
        "name": "the clip chained after sgd: the step is clipped, not the gradients",
        "advice": None,
        "code": """
clipped_sgd = optax.chain(optax.sgd(0.1), optax.clip_by_global_norm(1.0))
""",
        "fails": ["test_clipped_sgd_step_clips_large_gradients"],
        "says": "the clip must come before",
    },
    {
        "name": "train_adam writes what it trained into the caller's dict, like opt.step()",
        "advice": None,
        "code": """
def train_adam(params, x, y, steps):
    opt_state = optax.adam(1e-2).init(params)
    trained, losses = params, []
    for _ in range(steps):
        trained, opt_state, value = adam_step(trained, opt_state, x, y)
        losses.append(value)
    params.update(trained)
    return params, losses
""",
        "fails": ["test_train_adam_leaves_params_alone"],
    },
    {
        # PyTorch's habit: a loss summed over outputs, then averaged over the batch (or
        # reduction="sum" divided by the batch size). With one output it is the MSE.
        "name": "loss sums the squared error over outputs and averages over the batch",
        "advice": None,
        "code": """
def loss(params, x, y):
    return jnp.mean(jnp.sum((mlp(params, x) - y) ** 2, axis=-1))
""",
        "fails": ["test_adam_step_continues_any_adam_state"],
    },
    {
        # AdamW's decay (1e-4 * lr) moves params by 1e-6 of themselves a step: under every
        # step tolerance, so only a leaf whose gradient is exactly 0 shows it.
        "name": "train_adam with AdamW: weight decay the contract does not ask for",
        "advice": None,
        "code": """
def train_adam(params, x, y, steps):
    opt = optax.adamw(1e-2)
    opt_state = opt.init(params)
    losses = []
    for _ in range(steps):
        params, opt_state, value = optimizer_step(opt, params, opt_state, x, y)
        losses.append(value)
    return params, jnp.stack(losses)
""",
        "fails": ["test_train_adam_matches_adam"],
        "says": "AdamW's weight decay",
    },
    {
        "name": "finetune_step with AdamW on the trained leaves",
        "advice": None,
        "code": """
finetune_optimizer = optax.multi_transform(
    {"trained": optax.adamw(1e-2), "frozen": optax.set_to_zero()}, FROZEN
)
""",
        "fails": ["test_finetune_step_freezes_w1_b1_and_trains_w2_b2"],
        "says": "AdamW's weight decay",
    },
    {
        # eps=1e-6 against 1e-8 changes Adam's step only where a gradient is near eps: the
        # checks' small-gradient steps show it; their ordinary steps do, at times, first.
        "name": "Adam with eps=1e-6 instead of the default 1e-8",
        "advice": None,
        "code": """
adam = optax.adam(1e-2, eps=1e-6)
""",
        "fails": ["test_adam_step_matches_adam", "test_train_adam_matches_adam"],
        "says": "returned a wrong value",
    },
    {
        "name": "finetune_step's Adam with eps=1e-6 instead of the default 1e-8",
        "advice": None,
        "code": """
finetune_optimizer = optax.multi_transform(
    {"trained": optax.adam(1e-2, eps=1e-6), "frozen": optax.set_to_zero()}, FROZEN
)
""",
        "fails": ["test_finetune_step_freezes_w1_b1_and_trains_w2_b2"],
        "says": "returned a wrong value",
    },
    {
        # Passes the old checks, whose gradients never had a norm of 0.
        "name": "gradients scaled by min(norm, 1) / norm: NaN where the batch is fitted exactly",
        "advice": None,
        "code": """
@jax.jit
def clipped_sgd_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    norm = optax.global_norm(grads)
    scale = jnp.minimum(norm, 1.0) / norm
    return jax.tree.map(lambda p, g: p - 0.1 * scale * g, params, grads)
""",
        "fails": ["test_clipped_sgd_step_keeps_small_gradients"],
        "says": "for gradients of global norm 0",
    },
]

CORRECT = [
    {
        "name": "Adam on {w2, b2} alone, w1 and b1 passed through",
        "code": """
TRAINED_NAMES = ("w2", "b2")


def finetune_init(params):
    return adam.init({k: params[k] for k in TRAINED_NAMES})


@jax.jit
def finetune_step(params, opt_state, x, y):
    def trained_loss(trained):
        return loss({**params, **trained}, x, y)

    trained = {k: params[k] for k in TRAINED_NAMES}
    value, grads = jax.value_and_grad(trained_loss)(trained)
    updates, opt_state = adam.update(grads, opt_state, trained)
    return {**params, **optax.apply_updates(trained, updates)}, opt_state, value
""",
    },
    {
        "name": "Adam written as its two parts; a lax.scan training loop; clipping by hand",
        "code": """
adam = optax.chain(optax.scale_by_adam(), optax.scale(-1e-2))


def train_adam(params, x, y, steps):
    def one_step(carry, _):
        params, opt_state, value = adam_step(*carry, x, y)
        return (params, opt_state), value

    (params, _), losses = jax.lax.scan(one_step, (params, adam.init(params)), None, length=steps)
    return params, losses


@jax.jit
def clipped_sgd_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    factor = jnp.minimum(1.0, 1.0 / optax.global_norm(grads))
    return jax.tree.map(lambda p, g: p - 0.1 * factor * g, params, grads)
""",
    },
]
