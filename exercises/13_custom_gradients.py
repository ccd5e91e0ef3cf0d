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


def clip_gradient(x, limit):
    """`x` unchanged; its gradient clipped to `[-limit, limit]` on the way back."""
    # TODO: like torch.clamp, this clips the value in the forward pass, and the gradient
    # is just clamp's (zero wherever the value was clipped). The value must pass through
    # unchanged; only the cotangent flowing back into `x` is clipped, as a tensor hook
    # `x.register_hook(lambda g: g.clamp(-limit, limit))` would clip it.
    return jnp.clip(x, -limit, limit)


def round_ste(x):
    """`jnp.round(x)`, with the straight-through estimator's gradient: 1."""
    # TODO: rounding is flat almost everywhere, so its gradient is 0 and nothing upstream
    # of it learns. Keep the rounded value, but let the gradient pass straight through
    # unchanged, as a `torch.autograd.Function` whose backward returns grad_output would.
    return jnp.round(x)


def f(x):
    """`x / (1 + sqrt(x))`: autodiff's derivative is NaN at 0 (`sqrt`'s is infinite there)."""
    return x / (1 + jnp.sqrt(x))


def stable_f(x):
    """`f`, with its derivative written out: `(sqrt(x) + 2) / (2 * (1 + sqrt(x))**2)`."""
    # TODO: autodiff differentiates `f` step by step, and `sqrt`'s derivative is infinite at
    # 0, so the gradient there is NaN though f'(0) is exactly 1. Give stable_f the derivative
    # above as its own rule, one that serves forward mode (jax.jvp) as well as reverse.
    return f(x)


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
    # TODO: this checkpoints each layer on its own, like checkpoint_sequential with one
    # segment per layer: every layer's input is still kept for the backward pass. Keep
    # only what the whole network started from, and recompute the rest on the way back.
    h = x
    for w, b in params:
        h = jax.checkpoint(layer)(h, w, b)
    return h
