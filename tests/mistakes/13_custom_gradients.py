"""Wrong answers a learner writes for 13_custom_gradients, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` lists other right
answers, each appended the same way, that must pass every check.
"""

MISTAKES = [
    # --- clip_gradient ---
    {
        "name": "the value clamped, as torch.clamp does (the stub)",
        "advice": None,
        "code": """
def clip_gradient(x, limit):
    return jnp.clip(x, -limit, limit)
""",
        "fails": [
            "test_clip_gradient_returns_x_unchanged",
            "test_clip_gradient_clips_the_gradient",
            "test_clip_gradient_clips_each_example_under_vmap",
        ],
        "says": "torch.clamp",
    },
    {
        "name": "a custom_vjp that clips in fwd as well as in bwd",
        "advice": None,
        "code": """
@jax.custom_vjp
def clip_gradient(x, limit):
    return jnp.clip(x, -limit, limit)


clip_gradient.defvjp(
    lambda x, limit: (jnp.clip(x, -limit, limit), limit),
    lambda limit, g: (jnp.clip(g, -limit, limit), None),
)
""",
        "fails": ["test_clip_gradient_returns_x_unchanged"],
    },
    {
        "name": "bwd returns a bare array instead of a tuple",
        "advice": "return a tuple",
        "code": """
@jax.custom_vjp
def clip_gradient(x, limit):
    return x


clip_gradient.defvjp(lambda x, limit: (x, limit), lambda limit, g: jnp.clip(g, -limit, limit))
""",
        "fails": [
            "test_clip_gradient_clips_the_gradient",
            "test_clip_gradient_clips_each_example_under_vmap",
        ],
        "raises": "TypeError",
        "explains": "one cotangent per input",
    },
    {
        "name": "nondiff_argnums, and bwd still answers for limit",
        "advice": "leaves out those in `nondiff_argnums`",
        "code": """
from functools import partial


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def clip_gradient(x, limit):
    return x


clip_gradient.defvjp(
    lambda x, limit: (x, None), lambda limit, _, g: (jnp.clip(g, -limit, limit), None)
)
""",
        "fails": ["test_clip_gradient_clips_the_gradient"],
        "raises": "TypeError",
    },
    {
        "name": "bwd passes the gradient on unclipped",
        "advice": None,
        "code": """
@jax.custom_vjp
def clip_gradient(x, limit):
    return x


clip_gradient.defvjp(lambda x, limit: (x, None), lambda _, g: (g, None))
""",
        "fails": [
            "test_clip_gradient_clips_the_gradient",
            "test_clip_gradient_clips_each_example_under_vmap",
        ],
        "says": "unclipped",
    },
    {
        "name": "the gradient clipped by its norm, like clip_grad_norm_",
        "advice": None,
        "code": """
@jax.custom_vjp
def clip_gradient(x, limit):
    return x


def clip_gradient_bwd(limit, g):
    return g * jnp.minimum(1.0, limit / jnp.linalg.norm(g)), None


clip_gradient.defvjp(lambda x, limit: (x, limit), clip_gradient_bwd)
""",
        "fails": [
            "test_clip_gradient_clips_the_gradient",
            "test_clip_gradient_clips_each_example_under_vmap",
        ],
    },
    {
        "name": "the limit fixed at 0.5 in bwd",
        "advice": None,
        "code": """
@jax.custom_vjp
def clip_gradient(x, limit):
    return x


clip_gradient.defvjp(lambda x, limit: (x, None), lambda _, g: (jnp.clip(g, -0.5, 0.5), None))
""",
        "fails": ["test_clip_gradient_clips_the_gradient"],
    },
    {
        "name": "a Python if on the gradient in bwd",
        "advice": "a Python `if`/`while`",
        "code": """
@jax.custom_vjp
def clip_gradient(x, limit):
    return x


def clip_gradient_bwd(limit, g):
    if jnp.abs(g).max() > limit:
        g = jnp.clip(g, -limit, limit)
    return g, None


clip_gradient.defvjp(lambda x, limit: (x, limit), clip_gradient_bwd)
""",
        "fails": ["test_clip_gradient_clips_the_gradient"],
        "raises": "TracerBoolConversionError",
    },
    {
        "name": "a jax.debug.print left in bwd: no program that calls Python can be handed over",
        "advice": None,
        "code": """
@jax.custom_vjp
def clip_gradient(x, limit):
    return x


def clip_gradient_bwd(limit, g):
    jax.debug.print("g={}", g)
    return jnp.clip(g, -limit, limit), None


clip_gradient.defvjp(lambda x, limit: (x, limit), clip_gradient_bwd)
""",
        "fails": ["test_clip_gradient_clips_the_gradient"],
        "says": "calls back into Python",
    },
    # --- round_ste ---
    {
        "name": "plain jnp.round: its gradient is 0 (the stub)",
        "advice": None,
        "code": """
def round_ste(x):
    return jnp.round(x)
""",
        "fails": [
            "test_round_ste_passes_the_gradient_straight_through",
            "test_round_ste_gradient_under_vmap",
        ],
        "says": "gave zeros",
    },
    {
        "name": "the whole result behind stop_gradient",
        "advice": None,
        "code": """
def round_ste(x):
    return jax.lax.stop_gradient(jnp.round(x))
""",
        "fails": [
            "test_round_ste_passes_the_gradient_straight_through",
            "test_round_ste_gradient_under_vmap",
        ],
    },
    {
        "name": "x added and taken away again: the derivatives cancel",
        "advice": None,
        "code": """
def round_ste(x):
    return jnp.round(x) + x - x
""",
        "fails": [
            "test_round_ste_passes_the_gradient_straight_through",
            "test_round_ste_gradient_under_vmap",
        ],
    },
    {
        "name": "the clipped straight-through estimator: gradient 1 only within [-1, 1]",
        "advice": None,
        "code": """
@jax.custom_jvp
def round_ste(x):
    return jnp.round(x)


@round_ste.defjvp
def round_ste_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return jnp.round(x), jnp.where(jnp.abs(x) <= 1, t, 0.0)
""",
        "fails": [
            "test_round_ste_passes_the_gradient_straight_through",
            "test_round_ste_gradient_under_vmap",
        ],
    },
    {
        "name": "floor for round, through stop_gradient",
        "advice": None,
        "code": """
def round_ste(x):
    return x + jax.lax.stop_gradient(jnp.floor(x) - x)
""",
        "fails": ["test_round_ste_rounds"],
    },
    {
        "name": "a custom_vjp whose bwd returns g, not (g,)",
        "advice": "return a tuple",
        "code": """
@jax.custom_vjp
def round_ste(x):
    return jnp.round(x)


round_ste.defvjp(lambda x: (jnp.round(x), None), lambda _, g: g)
""",
        "fails": [
            "test_round_ste_passes_the_gradient_straight_through",
            "test_round_ste_gradient_under_vmap",
        ],
        "raises": "TypeError",
        "explains": "one cotangent per input",
    },
    {
        "name": "a custom_vjp whose fwd returns the output alone",
        "advice": "returns the output and the residuals",
        "code": """
@jax.custom_vjp
def round_ste(x):
    return jnp.round(x)


round_ste.defvjp(lambda x: jnp.round(x), lambda _, g: (g,))
""",
        "fails": ["test_round_ste_passes_the_gradient_straight_through"],
        "raises": "TypeError",
        "explains": "ctx.save_for_backward",
    },
    # --- stable_f ---
    {
        "name": "f itself: autodiff's derivative is NaN at 0 (the stub)",
        "advice": None,
        "code": """
def stable_f(x):
    return f(x)
""",
        "fails": ["test_stable_f_gradient_is_finite_at_0", "test_stable_f_forward_mode"],
        "says": "NaN at x = 0",
    },
    {
        "name": "a custom_vjp: right in reverse mode, no forward mode",
        "advice": None,
        "code": """
@jax.custom_vjp
def stable_f(x):
    return f(x)


def stable_f_bwd(x, g):
    root = jnp.sqrt(x)
    return ((root + 2) / (2 * (1 + root) ** 2) * g,)


stable_f.defvjp(lambda x: (f(x), x), stable_f_bwd)
""",
        "fails": ["test_stable_f_forward_mode"],
        "says": "reverse mode only",
    },
    {
        "name": "a where around f: the branch not taken still sends NaN back",
        "advice": None,
        "code": """
def stable_f(x):
    return jnp.where(x == 0, 0.0, f(x))
""",
        "fails": ["test_stable_f_gradient_is_finite_at_0", "test_stable_f_forward_mode"],
        "says": "NaN",
    },
    {
        "name": "an epsilon under the square root: 0.999999 at 0, not 1",
        "advice": None,
        "code": """
def stable_f(x):
    return x / (1 + jnp.sqrt(x + 1e-12))
""",
        "fails": ["test_stable_f_gradient_is_finite_at_0", "test_stable_f_forward_mode"],
        "says": "exactly 1",
    },
    {
        "name": "a custom_jvp whose formula clamps x away from 0",
        "advice": None,
        "code": """
@jax.custom_jvp
def stable_f(x):
    return f(x)


@stable_f.defjvp
def stable_f_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    root = jnp.sqrt(jnp.maximum(x, 1e-12))
    return f(x), (root + 2) / (2 * (1 + root) ** 2) * t
""",
        "fails": ["test_stable_f_gradient_is_finite_at_0", "test_stable_f_forward_mode"],
    },
    {
        "name": "a custom_jvp rule that asks autodiff for the derivative again",
        "advice": None,
        "code": """
@jax.custom_jvp
def stable_f(x):
    return f(x)


@stable_f.defjvp
def stable_f_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return jax.jvp(f, (x,), (t,))
""",
        "fails": ["test_stable_f_gradient_is_finite_at_0", "test_stable_f_forward_mode"],
    },
    {
        "name": "a custom_jvp rule that forgets to multiply by the tangent",
        "advice": None,
        "code": """
@jax.custom_jvp
def stable_f(x):
    return f(x)


@stable_f.defjvp
def stable_f_jvp(primals, tangents):
    (x,), _ = primals, tangents
    root = jnp.sqrt(x)
    return f(x), (root + 2) / (2 * (1 + root) ** 2)
""",
        "fails": ["test_stable_f_forward_mode"],
        "says": "is f'(x) itself, whatever the tangent t",
    },
    # --- remat_mlp ---
    {
        "name": "each layer checkpointed on its own (the stub)",
        "advice": None,
        "code": """
def remat_mlp(params, x):
    h = x
    for w, b in params:
        h = jax.checkpoint(layer)(h, w, b)
    return h
""",
        "fails": ["test_remat_mlp_keeps_less_than_one_layer"],
        "says": "checkpoint_sequential",
    },
    {
        "name": "no checkpoint at all",
        "advice": None,
        "code": """
remat_mlp = mlp
""",
        "fails": ["test_remat_mlp_keeps_less_than_one_layer"],
        "says": "nothing is recomputed",
    },
    {
        "name": "a checkpoint whose policy saves everything",
        "advice": None,
        "code": """
def remat_mlp(params, x):
    policy = jax.checkpoint_policies.everything_saveable
    return jax.checkpoint(mlp, policy=policy)(params, x)
""",
        "fails": ["test_remat_mlp_keeps_less_than_one_layer"],
        "says": "its policy saves everything it may",
    },
    {
        "name": "a checkpoint that saves the matrix products",
        "advice": None,
        "code": """
def remat_mlp(params, x):
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(mlp, policy=policy)(params, x)
""",
        "fails": ["test_remat_mlp_keeps_less_than_one_layer"],
    },
    {
        "name": "two segments, like checkpoint_sequential(functions, 2, x): one activation kept",
        "advice": None,
        "code": """
def remat_mlp(params, x):
    half = len(params) // 2
    x = jax.checkpoint(mlp)(params[:half], x)
    return jax.checkpoint(mlp)(params[half:], x)
""",
        "fails": ["test_remat_mlp_keeps_less_than_one_layer"],
    },
    {
        "name": "x behind stop_gradient, as if it were detached",
        "advice": None,
        "code": """
def remat_mlp(params, x):
    return jax.checkpoint(mlp)(params, jax.lax.stop_gradient(x))
""",
        "fails": ["test_remat_mlp_gradients", "test_remat_mlp_keeps_less_than_one_layer"],
    },
]

CORRECT = [
    {
        "name": "clip_gradient with limit in nondiff_argnums; round_ste with stop_gradient",
        "code": """
from functools import partial


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def clip_gradient(x, limit):
    return x


clip_gradient.defvjp(lambda x, limit: (x, None), lambda limit, _, g: (jnp.clip(g, -limit, limit),))


def round_ste(x):
    return x + jax.lax.stop_gradient(jnp.round(x) - x)
""",
    },
    {
        "name": "a custom_vjp made per limit; round_ste as a custom_vjp",
        "code": """
def clip_gradient(x, limit):
    @jax.custom_vjp
    def identity(x):
        return x

    identity.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -limit, limit),))
    return identity(x)


@jax.custom_vjp
def round_ste(x):
    return jnp.round(x)


round_ste.defvjp(lambda x: (jnp.round(x), None), lambda _, g: (g,))
""",
    },
    {
        "name": "stable_f by the double where: the identity's derivative at 0",
        "code": """
def stable_f(x):
    safe = jnp.where(x > 0, x, 1.0)
    return jnp.where(x > 0, f(safe), x)
""",
    },
    {
        "name": "stable_f's derivative written as 1/(1+s) - s/(2(1+s)^2)",
        "code": """
@jax.custom_jvp
def stable_f(x):
    return f(x)


@stable_f.defjvp
def stable_f_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    s = jnp.sqrt(x)
    derivative = 1 / (1 + s) - s / (2 * (1 + s) ** 2)
    return stable_f(x), derivative * t
""",
    },
    {
        "name": "remat_mlp as a custom_vjp that keeps params and x and reruns the network",
        "code": """
@jax.custom_vjp
def remat_mlp(params, x):
    return mlp(params, x)


def remat_mlp_bwd(inputs, g):
    return jax.vjp(mlp, *inputs)[1](g)


remat_mlp.defvjp(lambda params, x: (mlp(params, x), (params, x)), remat_mlp_bwd)
""",
    },
    {
        "name": "jax.remat with nothing saveable around layers that are checkpointed too, jitted",
        "code": """
from functools import partial


@jax.jit
@partial(jax.remat, policy=jax.checkpoint_policies.nothing_saveable)
def remat_mlp(params, x):
    h = x
    for w, b in params:
        h = jax.checkpoint(layer)(h, w, b)
    return h
""",
    },
]
