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

import jax.numpy as jnp


def power_iteration(m, v, n):
    """`n` rounds of `v = m @ v; v = v / norm(v)` from `v`; `n` may be a traced value."""
    # TODO: under jax.jit, `n` is a tracer with no number in it, so Python's `range` cannot
    # count with it. Use a loop that runs inside the compiled program.
    for _ in range(n):
        v = m @ v
        v = v / jnp.linalg.norm(v)
    return v


def rnn_states(w_h, w_x, h0, xs):
    """Every state `h_t = tanh(h_{t-1} @ w_h + x_t @ w_x)` over the rows of `xs`, stacked."""
    # TODO: this Python loop is unrolled while tracing: one copy of the cell per time step,
    # so the program (and its compile time) grows with the sequence length. Step through
    # the rows with a loop the program keeps as one loop.
    h = h0
    states = []
    for x_t in xs:
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        states.append(h)
    return jnp.stack(states)


def newton_sqrt(a, tol):
    """The square root of `a` by Newton's iteration, until `|x * x - a| <= tol * a`."""
    # TODO: `while` asks Python for True or False each round, and under jax.jit (or
    # jax.vmap) the test is a traced value with neither. Loop inside the compiled program.
    x = a
    while jnp.abs(x * x - a) > tol * a:
        x = (x + a / x) / 2
    return x
