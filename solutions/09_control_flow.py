"""09 · Loops that compile.

In PyTorch a loop is a Python loop: `for _ in range(n)` runs n times, `while err > tol`
reads the number each round, and a recurrent net steps through time in Python. Under
`jax.jit` Python runs only once, while tracing: a Python loop is unrolled into one copy
of its body per round (the compiled program grows with the loop count, and so does the
compile time), and a count or a stopping test that is a traced value cannot drive it at
all (`range(n)` raises TracerIntegerConversionError, `while` raises
TracerBoolConversionError). `jax.lax` has loops that compile to one loop in the program:
`fori_loop(lower, upper, body, init)` for a counted loop (its bounds may be traced),
`while_loop(cond, body, init)` for a loop with a traced stopping test, and
`scan(step, carry, xs)` to step through the rows of an array and stack what each step
emits. The value carried from round to round keeps one shape and dtype.

Rule to remember: under jit, a loop whose length or end depends on data is a `jax.lax`
loop; a Python loop is only for counts fixed while tracing, and it unrolls.

Deeper: https://docs.jax.dev/en/latest/control-flow.html and
https://docs.jax.dev/en/latest/_autosummary/jax.lax.scan.html
"""

import jax
import jax.numpy as jnp


def power_iteration(m, v, n):
    """`n` rounds of `v = m @ v; v = v / norm(v)` from `v`; `n` may be a traced value."""

    def one_round(_, v):
        v = m @ v
        return v / jnp.linalg.norm(v)

    return jax.lax.fori_loop(0, n, one_round, v)


def rnn_states(w_h, w_x, h0, xs):
    """Every state `h_t = tanh(h_{t-1} @ w_h + x_t @ w_x)` over the rows of `xs`, stacked."""

    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    _, states = jax.lax.scan(cell, h0, xs)
    return states


def newton_sqrt(a, tol):
    """The square root of `a` by Newton's iteration, until `|x * x - a| <= tol * a`."""

    def not_close_enough(x):
        return jnp.abs(x * x - a) > tol * a

    def newton_step(x):
        return (x + a / x) / 2

    return jax.lax.while_loop(not_close_enough, newton_step, jnp.asarray(a))
