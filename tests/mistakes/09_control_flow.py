"""Wrong answers a learner writes for 09_control_flow, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` entries are other
right answers, appended the same way, that must pass every check.
"""

MISTAKES = [
    {
        "name": "a Python for loop over range(n), n traced",
        "advice": "jax.lax.fori_loop",
        "code": """
def power_iteration(m, v, n):
    for _ in range(n):
        v = m @ v
        v = v / jnp.linalg.norm(v)
    return v
""",
        "fails": [
            "test_power_iteration_with_traced_n",
            "test_power_iteration_compiles_once_per_shape",
            "test_power_iteration_program_size_does_not_grow",
        ],
        "raises": "TracerIntegerConversionError",
    },
    {
        "name": "n read out as a Python int, like n.item()",
        "advice": "a traced value turned into a Python number",
        "code": """
def power_iteration(m, v, n):
    for _ in range(int(n)):
        v = m @ v
        v = v / jnp.linalg.norm(v)
    return v
""",
        "fails": [
            "test_power_iteration_with_traced_n",
            "test_power_iteration_program_size_does_not_grow",
        ],
        "raises": "ConcretizationTypeError",
    },
    {
        # At n = 1 it runs none, and its v is the input: once told to keep an update's
        # result, the cause the evidence at n = 9 (8 rounds) rules out.
        "name": "fori_loop from 1: one round short",
        "advice": None,
        "code": """
def power_iteration(m, v, n):
    return jax.lax.fori_loop(1, n, lambda _, v: (m @ v) / jnp.linalg.norm(m @ v), v)
""",
        "fails": ["test_power_iteration_with_traced_n"],
        "says": "it ran n - 1 rounds where n were asked (0 for n = 1, 8 for n = 9)",
    },
    {
        # Once a bare wrong value.
        "name": "fori_loop to n + 1, as if its upper bound were included",
        "advice": None,
        "code": """
def power_iteration(m, v, n):
    return jax.lax.fori_loop(0, n + 1, lambda _, v: (m @ v) / jnp.linalg.norm(m @ v), v)
""",
        "fails": ["test_power_iteration_with_traced_n"],
        "says": "it ran n + 1 rounds where n were asked",
    },
    {
        # Once a bare wrong value.
        "name": "a while_loop counting rounds while i <= n",
        "advice": None,
        "code": """
def power_iteration(m, v, n):
    def body(state):
        i, v = state
        v = m @ v
        return i + 1, v / jnp.linalg.norm(v)

    return jax.lax.while_loop(lambda state: state[0] <= n, body, (0, v))[1]
""",
        "fails": ["test_power_iteration_with_traced_n"],
        "says": "`i <= n`",
    },
    {
        # torch's loops change tensors in place; fori_loop returns its carry. Its v is the
        # input at every n: once told so with no word of the loop.
        "name": "fori_loop's result dropped, v returned as given",
        "advice": "`v = jax.lax.fori_loop(0, n, one_round, v)`",
        "code": """
def power_iteration(m, v, n):
    def one_round(_, v):
        v = m @ v
        return v / jnp.linalg.norm(v)

    jax.lax.fori_loop(0, n, one_round, v)
    return v
""",
        "fails": ["test_power_iteration_with_traced_n"],
        "says": "`v = jax.lax.fori_loop(0, n, body, v)`",
    },
    {
        "name": "power iteration without the normalisation",
        "advice": None,
        "code": """
def power_iteration(m, v, n):
    return jax.lax.fori_loop(0, n, lambda _, v: m @ v, v)
""",
        "fails": ["test_power_iteration_with_traced_n"],
    },
    {
        # Once only "should return shape (1, 4), but returned shape (2, 4)".
        "name": "rnn_states with h0 stacked in front of the scan's states",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    _, states = jax.lax.scan(cell, h0, xs)
    return jnp.concatenate([h0[None], states])
""",
        "fails": ["test_rnn_states_match_reference"],
        "says": "h0, the state before the first row, is not one of them",
    },
    {
        # The first step taken by hand and the scan run over the rest, from the second
        # row, where it starts from the first step's state: once a bare shape.
        "name": "rnn_states scanning xs[1:] after its first step",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    return jax.lax.scan(cell, cell(h0, xs[0])[0], xs[1:])[1]
""",
        "fails": ["test_rnn_states_match_reference"],
        "says": "a scan over xs[1:], runs one step fewer",
    },
    {
        "name": "the RNN stepped by a Python loop over the rows",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    h, states = h0, []
    for x_t in xs:
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        states.append(h)
    return jnp.stack(states)
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        # The cell slices its step's row and writes its state itself, so the loop adds
        # only calls; MLIR prints the helper's name quoted (`@"row step"`), which patterns
        # over the text never matched: 4 operations at 3 steps and at 30.
        "name": "the RNN stepped by a Python loop over a jitted cell named with a space",
        "advice": None,
        "code": """
def _cell(carry, w_h, w_x, xs):
    h, states, t = carry
    h = jnp.tanh(h @ w_h + jax.lax.dynamic_index_in_dim(xs, t, keepdims=False) @ w_x)
    return h, jax.lax.dynamic_update_index_in_dim(states, h, t, 0), t + 1


_cell.__name__ = "row step"
_cell = jax.jit(_cell)


def rnn_states(w_h, w_x, h0, xs):
    carry = (h0, jnp.zeros((xs.shape[0], h0.shape[0]), h0.dtype), jnp.int32(0))
    for _ in range(xs.shape[0]):
        carry = _cell(carry, w_h, w_x, xs)
    return carry[1]
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        "name": "the RNN stepped by a Python loop over a jitted lambda",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def written(h, states, t):
        return h, jax.lax.dynamic_update_index_in_dim(states, h, t, 0), t + 1

    step = jax.jit(
        lambda h, states, t: written(
            jnp.tanh(h @ w_h + jax.lax.dynamic_index_in_dim(xs, t, keepdims=False) @ w_x),
            states,
            t,
        )
    )
    carry = (h0, jnp.zeros((xs.shape[0], h0.shape[0]), h0.dtype), jnp.int32(0))
    for _ in range(xs.shape[0]):
        carry = step(*carry)
    return carry[1]
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        "name": "scan emits the state before the step (h0 in, the last state lost)",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        return jnp.tanh(h @ w_h + x_t @ w_x), h

    return jax.lax.scan(cell, h0, xs)[1]
""",
        "fails": ["test_rnn_states_match_reference"],
    },
    {
        "name": "scan's final carry returned instead of the stacked states",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    return jax.lax.scan(cell, h0, xs)[0]
""",
        "fails": ["test_rnn_states_match_reference"],
        "says": "(final_carry, stacked_outputs)",
    },
    {
        "name": "the states collected in a fori_loop carry that grows",
        "advice": "carry changes shape",
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def step(t, states):
        h = jnp.tanh(states[-1] @ w_h + xs[t] @ w_x)
        return jnp.concatenate([states, h[None]])

    return jax.lax.fori_loop(0, xs.shape[0], step, h0[None])[1:]
""",
        "fails": ["test_rnn_states_match_reference", "test_rnn_states_program_size_does_not_grow"],
        "raises": "TypeError",
    },
    {
        "name": "a Python while on the traced error",
        "advice": "jax.lax.while_loop",
        "code": """
def newton_sqrt(a, tol):
    x = a
    while jnp.abs(x * x - a) > tol * a:
        x = (x + a / x) / 2
    return x
""",
        "fails": ["test_newton_sqrt_under_jit", "test_newton_sqrt_under_vmap"],
        "raises": "TracerBoolConversionError",
    },
    {
        "name": "a fixed 8 Newton steps, too few for large a",
        "advice": None,
        "code": """
def newton_sqrt(a, tol):
    return jax.lax.fori_loop(0, 8, lambda _, x: (x + a / x) / 2, a)
""",
        "fails": ["test_newton_sqrt_under_jit", "test_newton_sqrt_under_vmap"],
    },
    {
        "name": "Newton started from 0: a / 0",
        "advice": None,
        "code": """
def newton_sqrt(a, tol):
    return jax.lax.while_loop(
        lambda x: jnp.abs(x * x - a) > tol * a, lambda x: (x + a / x) / 2, jnp.zeros_like(a)
    )
""",
        "fails": ["test_newton_sqrt_under_jit", "test_newton_sqrt_under_vmap"],
        "says": "a loop that never ends",
    },
    {
        "name": "fori_loop body written (v, i), the order of a torch loop's variables",
        "advice": "the index first",
        "code": """
def power_iteration(m, v, n):
    def one_round(v, i):
        v = m @ v
        return v / jnp.linalg.norm(v)

    return jax.lax.fori_loop(0, n, one_round, v)
""",
        "fails": ["test_power_iteration_with_traced_n"],
        "raises": "ValueError",
        "explains": "`body(i, carry)`",
    },
    {
        "name": "Newton steps kept positive with Python's max",
        "advice": "Python's built-in `max`/`min`",
        "code": """
def newton_sqrt(a, tol):
    x = a
    for _ in range(50):
        x = max((x + a / x) / 2, 0.0)
    return x
""",
        "fails": ["test_newton_sqrt_under_jit"],
        "raises": "TracerBoolConversionError",
        "explains": "built-in `max`/`min`",
    },
    {
        # torch's row vectors: on a symmetric m the same rounds, on any other m.T @ v.
        "name": "power_iteration multiplies v @ m, as with a row vector",
        "advice": None,
        "code": """
def power_iteration(m, v, n):
    def one_round(_, v):
        v = v @ m
        return v / jnp.linalg.norm(v)

    return jax.lax.fori_loop(0, n, one_round, v)
""",
        "fails": ["test_power_iteration_with_traced_n"],
        "says": "not symmetric",
    },
    {
        # Right while v settles within 100 rounds; an m whose second eigenvalue is 0.99 of
        # its top one, at n near 1000, shows the rounds it skipped.
        "name": "power_iteration capped at a fixed 100 rounds, the rest masked off",
        "advice": None,
        "code": """
MAX_ROUNDS = 100


def power_iteration(m, v, n):
    def one_round(i, v):
        w = m @ v
        return jnp.where(i < n, w / jnp.linalg.norm(w), v)

    return jax.lax.fori_loop(0, MAX_ROUNDS, one_round, v)
""",
        "fails": ["test_power_iteration_with_traced_n"],
        "says": "not a fixed number of rounds",
    },
    {
        # Right for a top eigenvalue of 1; an m scaled by 10 or 0.1 overflows or underflows.
        "name": "power_iteration normalises once, after the loop",
        "advice": None,
        "code": """
def power_iteration(m, v, n):
    v = jax.lax.fori_loop(0, n, lambda _, v: m @ v, v)
    return v / jnp.linalg.norm(v)
""",
        "fails": ["test_power_iteration_with_traced_n"],
        "says": "normalise inside the loop",
        # The size check confirms each program at n drawn in 1-1000 on m with top eigenvalue
        # near 1: a long draw overflows or underflows, a short one does not (its verdict
        # flipped between two gradings of one file, newest JAX against the floor's).
        "undecided": ["test_power_iteration_program_size_does_not_grow"],
    },
    {
        # A Python loop over chunks of 16 rows, each a scan: 20 operations more from T = 3
        # to 24, less than a step's worth, so two lengths read it as bounded; it grows on
        # without end (142 at 120, 1285 at 1200). Found by a red team.
        "name": "the RNN scanned 16 rows at a time by a Python loop over chunks",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    h, chunks = h0, []
    for start in range(0, xs.shape[0], 16):
        h, states = jax.lax.scan(cell, h, xs[start : start + 16])
        chunks.append(states)
    return jnp.concatenate(chunks)
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        # A switch on the length: a Python loop below 100 steps, a scan above. Its size
        # grows to T = 72 and falls at 120: stopped growing, but by shrinking to a fraction
        # of the largest, which no unrolled scan does (a red team's).
        "name": "rnn_states: a Python loop for short sequences, lax.scan for long ones",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    if xs.shape[0] >= 100:
        return jax.lax.scan(cell, h0, xs)[1]
    h, states = h0, []
    for x_t in xs:
        h, _ = cell(h, x_t)
        states.append(h)
    return jnp.stack(states)
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        # A Python loop padded with no-op adds (two operations each) to about 1,700 at every
        # T up to 240: flat from T = 3 to 24, where the old check decided "bounded", and
        # 480's loop (3,393) under twice that (a red team's). Held to 64 times the grader's
        # scan (20 operations), at lengths drawn anew, it fails at the first.
        "name": "rnn_states: a Python loop padded flat with no-op adds",
        "advice": None,
        "code": """
PADDED_TO = 1700


def rnn_states(w_h, w_x, h0, xs):
    h, states = h0, []
    for x_t in xs:
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        states.append(h)
    for _ in range(max(0, (PADDED_TO - 7 * xs.shape[0]) // 2)):
        h0 = h0 + 0.0
    return jnp.stack(states) + 0.0 * h0
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        # The padded loop flat from T = 3 to 24, lax.scan from 400 steps on: the old check
        # measured 480 once and never asked whether it shrank there (a red team's).
        "name": "rnn_states: a padded Python loop, lax.scan only past the lengths measured",
        "advice": None,
        "code": """
PADDED_TO = 180


def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    if xs.shape[0] >= 400:
        return jax.lax.scan(cell, h0, xs)[1]
    h, states = h0, []
    for x_t in xs:
        h, _ = cell(h, x_t)
        states.append(h)
    for _ in range(max(0, (PADDED_TO - 7 * xs.shape[0]) // 2)):
        h0 = h0 + 0.0
    return jnp.stack(states) + 0.0 * h0
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        # Chunks longer than half the old check's farthest length: one scan at every T it
        # measured up to 120, two at 480 (40 operations, twice 20). The lengths drawn now
        # span more than four times, the longest 640 or more: three chunks.
        "name": "rnn_states scanned 256 rows at a time by a Python loop over chunks",
        "advice": None,
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    h, chunks = h0, []
    for start in range(0, xs.shape[0], 256):
        h, states = jax.lax.scan(cell, h, xs[start : start + 256])
        chunks.append(states)
    return jnp.concatenate(chunks)
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        # Aimed at the rule that catches the padded loops above: padded to 1,200, under 64
        # times the scan's 19 at T = 1 and 20 after, so flat up to 170 steps; the longest
        # length drawn is 640 or more.
        "name": "rnn_states: a Python loop padded to just under the size allowed",
        "advice": None,
        "code": """
PADDED_TO = 1200


def rnn_states(w_h, w_x, h0, xs):
    h, states = h0, []
    for x_t in xs:
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        states.append(h)
    for _ in range(max(0, (PADDED_TO - 7 * xs.shape[0]) // 2)):
        h0 = h0 + 0.0
    return jnp.stack(states) + 0.0 * h0
""",
        "fails": ["test_rnn_states_program_size_does_not_grow"],
    },
    {
        # tol never read: exact to float32's rounding over the contract's a in [1e-3, 1e6]
        # (64% off at a = 1e12, outside it; a red team's). Newton squares the error each
        # round, so the x it returns came from a round already within tol.
        "name": "newton_sqrt: a fixed 20 Newton rounds, tol ignored",
        "advice": None,
        "code": """
def newton_sqrt(a, tol):
    return jax.lax.fori_loop(0, 20, lambda _, x: (x + a / x) / 2, jnp.asarray(a))
""",
        "fails": ["test_newton_sqrt_under_jit"],
        "says": "ran on past the first x within tol",
    },
    {
        "name": "newton_sqrt stops at the contract's strictest tol, 1e-6, whatever tol is",
        "advice": None,
        "code": """
def newton_sqrt(a, tol):
    return jax.lax.while_loop(
        lambda x: jnp.abs(x * x - a) > 1e-6 * a, lambda x: (x + a / x) / 2, jnp.asarray(a)
    )
""",
        "fails": ["test_newton_sqrt_under_jit"],
        "says": "ran on past the first x within tol",
    },
]

CORRECT = [
    {
        "name": "power_iteration as a while_loop with its own counter",
        "code": """
def power_iteration(m, v, n):
    def body(state):
        i, v = state
        v = m @ v
        return i + 1, v / jnp.sqrt(jnp.sum(v * v))

    return jax.lax.while_loop(lambda state: state[0] < n, body, (0, v))[1]
""",
    },
    {
        # n traced as the mask of a scan over the contract's 1000 rounds at most.
        "name": "power_iteration as a scan over 1000 rounds, those past n masked off",
        "code": """
def power_iteration(m, v, n):
    def one_round(v, i):
        w = m @ v
        return jnp.where(i < n, w / jnp.linalg.norm(w), v), None

    return jax.lax.scan(one_round, v, jnp.arange(1000))[0]
""",
    },
    {
        "name": "rnn_states filling a preallocated array in a fori_loop",
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def step(t, carry):
        h, states = carry
        h = jnp.tanh(h @ w_h + xs[t] @ w_x)
        return h, states.at[t].set(h)

    states = jnp.zeros((xs.shape[0], h0.shape[0]), h0.dtype)
    return jax.lax.fori_loop(0, xs.shape[0], step, (h0, states))[1]
""",
    },
    {
        "name": "newton_sqrt from 1, carrying (x, done) in a while_loop",
        "code": """
def newton_sqrt(a, tol):
    def close_enough(x):
        return jnp.abs(x * x - a) <= tol * a

    def body(state):
        x, _ = state
        x = 0.5 * (x + a / x)
        return x, close_enough(x)

    start = jnp.ones_like(a)
    return jax.lax.while_loop(lambda s: ~s[1], body, (start, close_enough(start)))[0]
""",
    },
    {
        # A scan unrolled u times holds u copies of the cell and one for each of the T mod u
        # left over: 26, 65, 47, 47 operations at T = 3, 30, 60, 300 with unroll=4. Bounded,
        # so no Python loop; `unroll=True` copies the cell T times and grows as one does.
        "name": "rnn_states as a scan unrolled 4 times",
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def cell(h, x_t):
        h = jnp.tanh(h @ w_h + x_t @ w_x)
        return h, h

    return jax.lax.scan(cell, h0, xs, unroll=4)[1]
""",
    },
    {
        "name": "rnn_states as a fori_loop unrolled 13 times, its cell named with a space",
        "code": """
def rnn_states(w_h, w_x, h0, xs):
    def step(t, carry):
        h, states = carry
        h = jnp.tanh(h @ w_h + xs[t] @ w_x)
        return h, states.at[t].set(h)

    step.__name__ = "one step"
    states = jnp.zeros((xs.shape[0], h0.shape[0]), h0.dtype)
    return jax.lax.fori_loop(0, xs.shape[0], jax.jit(step), (h0, states), unroll=13)[1]
""",
    },
]
