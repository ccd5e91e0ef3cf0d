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

from collections import Counter
from functools import partial

import jax


def sub_jaxprs(params):
    """The programs an equation holds (a jitted function's body, a loop's, each branch)."""
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "eqns"):  # a Jaxpr
                yield item
            elif hasattr(getattr(item, "jaxpr", None), "eqns"):  # a ClosedJaxpr
                yield item.jaxpr


def count_ops(f, *args):
    """How many times each primitive appears in `f`'s traced program, nested ones included."""
    counts = Counter()

    def walk(jaxpr):
        for equation in jaxpr.eqns:
            counts[equation.primitive.name] += 1
            for inner in sub_jaxprs(equation.params):
                walk(inner)

    walk(jax.make_jaxpr(f)(*args).jaxpr)
    return dict(counts)


def flops(f, *args):
    """XLA's estimate of the floating-point operations of `jax.jit(f)` compiled for `args`."""
    cost = jax.jit(f).lower(*args).compile().cost_analysis()
    if isinstance(cost, list):  # JAX before 0.5: one dict per program
        cost = cost[0]
    return float(cost["flops"])


def compile_for(f, *specs):
    """`jax.jit(f)` compiled ahead of time for the shapes and dtypes `specs`."""
    return jax.jit(f).lower(*specs).compile()


@partial(jax.jit, donate_argnums=0)
def sgd_step(params, grads, lr):
    """`p - lr * g` leaf by leaf, written into `params`' own memory."""
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)
