"""13 · Your own backward rule.

In PyTorch a function gets a backward rule of its own as a `torch.autograd.Function`:
`forward(ctx, x)` computes the output and keeps what backward needs with
`ctx.save_for_backward(...)`, and `backward(ctx, grad_output)` returns one gradient per
input. A lighter touch is a hook, `x.register_hook(lambda g: g.clamp(-1, 1))`, which changes
the gradient flowing into `x`; and `torch.utils.checkpoint.checkpoint(f, x)` keeps no
activations of `f`, recomputing them in the backward pass.

JAX has no tape to hook: you give the *function* a rule. `f = jax.custom_vjp(f)` and
`f.defvjp(fwd, bwd)`: `fwd(*args)` returns the output and the residuals to keep (that is
`ctx.save_for_backward`), and `bwd(residuals, g)` returns a tuple with one cotangent per
input (`None` for one that needs none). It serves reverse mode only (`jax.grad`, `jax.vjp`).
`f = jax.custom_jvp(f)` with `@f.defjvp` gives instead the output and its tangent, linear in
the input's tangent: JAX transposes it for reverse mode, so it serves both modes, and is the
choice whenever the derivative has a formula. A hook is a `custom_vjp` identity whose `bwd`
changes `g`. `jax.checkpoint(f)` (alias `jax.remat`) is `torch.utils.checkpoint`: around the
whole network it keeps only its inputs; around each layer it still keeps every layer's input.

Rule to remember: give the function its rule, not the tensor: `jax.custom_jvp` when you can
write the derivative (both modes), `jax.custom_vjp` when you must change the backward pass
(reverse mode only), and `jax.checkpoint` around everything you want recomputed rather than kept.

Deeper: https://docs.jax.dev/en/latest/notebooks/Custom_derivative_rules_for_Python_code.html
and https://docs.jax.dev/en/latest/gradient-checkpointing.html
"""

import jax
import jax.numpy as jnp


@jax.custom_vjp
def clip_gradient(x, limit):
    """`x` unchanged; its gradient clipped to `[-limit, limit]` on the way back."""
    return x


def clip_gradient_fwd(x, limit):
    return x, limit  # the residual: what the backward pass needs (ctx.save_for_backward)


def clip_gradient_bwd(limit, g):
    return jnp.clip(g, -limit, limit), None  # one per input: `limit` gets no gradient


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


@jax.custom_jvp
def round_ste(x):
    """`jnp.round(x)`, with the straight-through estimator's gradient: 1."""
    return jnp.round(x)


@round_ste.defjvp
def round_ste_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return jnp.round(x), t


def f(x):
    """`x / (1 + sqrt(x))`: autodiff's derivative is NaN at 0 (`sqrt`'s is infinite there)."""
    return x / (1 + jnp.sqrt(x))


@jax.custom_jvp
def stable_f(x):
    """`f`, with its derivative written out: `(sqrt(x) + 2) / (2 * (1 + sqrt(x))**2)`."""
    return f(x)


@stable_f.defjvp
def stable_f_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    root = jnp.sqrt(x)
    return f(x), (root + 2) / (2 * (1 + root) ** 2) * t


def layer(h, w, b):
    return jnp.tanh(h @ w + b)


def mlp(params, x):
    """`h = tanh(h @ w + b)` for each `(w, b)` in `params`, from `h = x`."""
    h = x
    for w, b in params:
        h = layer(h, w, b)
    return h


def remat_mlp(params, x):
    """`mlp`, keeping only `params` and `x` for the backward pass, which recomputes the rest."""
    return jax.checkpoint(mlp)(params, x)
