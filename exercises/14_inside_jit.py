"""14 · What `jit` builds.

In PyTorch, `torch.compile(f)` (or `torch.jit.trace`) hides what it builds; you see it
with `torch._dynamo.explain` and count FLOPs with `torch.profiler`. In JAX every step of
`jax.jit(f)(x)` is yours to call: it traces `f` into a jaxpr (`jax.make_jaxpr(f)(x)`: the
primitives, with the body of each nested jitted function, loop and branch inside its
equation), lowers it to StableHLO (`jax.jit(f).lower(x)`, `.as_text()`), and has XLA
compile that into an executable (`.compile()`) that knows its own cost
(`.cost_analysis()`) and memory (`.memory_analysis()`), and runs only on the shapes and
dtypes it was compiled for. `lower` takes `jax.ShapeDtypeStruct`s: ahead-of-time
compilation, with nothing run. PyTorch's in-place update `p.sub_(lr * g)` is buffer
donation in JAX: `jax.jit(step, donate_argnums=0)` hands the caller's old arrays to XLA,
which writes the result into their memory; the old arrays are deleted.

Rule to remember: `jax.jit(f)` = trace → lower → compile, cached per shape; do the steps
yourself (`.lower(*specs).compile()`) to see or fix what runs, and donate what you will
never read again.

Deeper: https://docs.jax.dev/en/latest/jaxpr.html,
https://docs.jax.dev/en/latest/aot.html and
https://docs.jax.dev/en/latest/faq.html#buffer-donation
"""

import jax


def count_ops(f, *args):
    """How many times each primitive appears in `f`'s traced program, nested ones included."""
    # TODO: a jitted function's call, a loop and a cond each show here as one equation
    # (`pjit`/`jit`, `scan`, `while`, `cond`), like the single node `torch.jit.trace`
    # records for a submodule; the primitives inside them are not counted.
    counts = {}
    for equation in jax.make_jaxpr(f)(*args).jaxpr.eqns:
        name = equation.primitive.name
        counts[name] = counts.get(name, 0) + 1
    return counts


def flops(f, *args):
    """XLA's estimate of the floating-point operations of `jax.jit(f)` compiled for `args`."""
    # TODO: like a profiler, this runs f to measure it, so it fails on
    # jax.ShapeDtypeStructs (and would run an f that never ends); and it reads the cost
    # analysis the way JAX before 0.5 returned it. f must be compiled, never run, and
    # the result read as the JAX you run returns it.
    compiled = jax.jit(f)
    jax.block_until_ready(compiled(*args))
    return compiled.lower(*args).compile().cost_analysis()[0]["flops"]


def compile_for(f, *specs):
    """`jax.jit(f)` compiled ahead of time for the shapes and dtypes `specs`."""
    # TODO: like `torch.compile`, this only wraps f: it traces and compiles on the first
    # call, and again for every new shape or dtype. It must be compiled now, for `specs`
    # alone.
    return jax.jit(f)


def sgd_step(params, grads, lr):
    """`p - lr * g` leaf by leaf, written into `params`' own memory."""
    # TODO: this is PyTorch's `for p in params: p.sub_(lr * g)`: it writes new arrays
    # into the caller's dict (only a flat dict, too), runs op by op and keeps every old
    # array alive. The caller's params must be handed over (donated) to one compiled step
    # that returns the new ones.
    for name in params:
        params[name] = params[name] - lr * grads[name]
    return params
