"""Wrong answers a learner writes for 08_gotchas, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` entries are other
right answers, appended the same way, that must pass every check.
"""

# 07's SGD step in NumPy on the host, for the wrong answers that do fit's work outside any
# compiled program (issue #57, class 3a: each passed test_fit_beats_eager, 20-460× the
# eager loop, while fit without a program of its own was held to the reference alone).
NUMPY_STEP = """
import numpy as _np


def _np_step(params, x, y):
    p = {k: _np.asarray(v, _np.float64) for k, v in params.items()}
    x, y = _np.asarray(x, _np.float64), _np.asarray(y, _np.float64)
    hidden = _np.tanh(x @ p["w1"] + p["b1"])
    out = hidden @ p["w2"] + p["b2"]
    d_out = 2 * (out - y) / out.size
    d_hidden = (d_out @ p["w2"].T) * (1 - hidden**2)
    grads = {
        "w1": x.T @ d_hidden, "b1": d_hidden.sum(0), "w2": hidden.T @ d_out, "b2": d_out.sum(0)
    }
    new = {k: (p[k] - 0.1 * grads[k]).astype(_np.float32) for k in p}
    return new, _np.float32(_np.mean((out - y) ** 2))


def _np_fit(params, x, y, steps):
    losses = []
    for _ in range(steps):
        params, value = _np_step(params, x, y)
        losses.append(value)
    return params, _np.asarray(losses, _np.float32)


def _traced(*trees):
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(trees))
"""

MISTAKES = [
    {
        "name": "a Python if on each traced element",
        "advice": "a Python `if`/`while`",
        "code": """
def gate(x, threshold):
    return jnp.stack([v if v > threshold else jnp.zeros_like(v) for v in x])
""",
        "fails": ["test_gate_under_jit"],
        "raises": "TracerBoolConversionError",
    },
    {
        "name": "a Python if inside vmap",
        "advice": "a Python `if`/`while`",
        "code": """
def gate(x, threshold):
    return jax.vmap(lambda v: v if v > threshold else 0.0)(x.reshape(-1)).reshape(x.shape)
""",
        "fails": ["test_gate_under_jit", "test_gate_eagerly"],
        "raises": "TracerBoolConversionError",
    },
    {
        "name": "boolean-mask indexing under jit",
        "advice": "boolean-mask indexing",
        "code": """
def gate(x, threshold):
    return x.at[x <= threshold].set(0.0)
""",
        "fails": ["test_gate_under_jit"],
        "raises": "NonConcreteBooleanIndexError",
    },
    {
        "name": "the gate's branches swapped: zero where x passes, x where it does not",
        "advice": None,
        "code": """
def gate(x, threshold):
    return jnp.where(x > threshold, 0, x)
""",
        "fails": ["test_gate_under_jit", "test_gate_eagerly"],
        "says": "Is a condition or mask inverted",
    },
    {
        "name": "one key for all copies",
        "advice": None,
        "code": """
def noisy_copies(key, x, n):
    return jnp.stack([x + jax.random.normal(key, x.shape) for _ in range(n)])
""",
        "fails": ["test_noisy_copies_are_all_different", "test_noisy_copies_use_no_key_twice"],
    },
    {
        "name": "NumPy's global RNG instead of the key",
        "advice": None,
        "code": """
def noisy_copies(key, x, n):
    return x + np.random.standard_normal((n, *x.shape)).astype(np.float32)
""",
        "fails": ["test_noisy_copies_depend_only_on_the_key"],
    },
    {
        "name": "one noise value per copy, not per element",
        "advice": None,
        "code": """
def noisy_copies(key, x, n):
    return x + jax.random.normal(key, (n,) + (1,) * x.ndim, x.dtype)
""",
        "fails": ["test_noisy_copies_noise_is_standard_normal"],
    },
    {
        "name": "fit without jit: the loop runs eagerly",
        "advice": None,
        "code": """
def fit(params, x, y, steps):
    losses = []
    for _ in range(steps):
        value, grads = jax.value_and_grad(_loss)(params, x, y)
        params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
        losses.append(value)
    return params, losses
""",
        "fails": ["test_fit_beats_eager"],
        "says": "its steps still run one operation at a time",
    },
    {
        # Told before "its steps still run one operation at a time": the step is compiled,
        # but anew in every fit call (a new function to JAX), which a second call shows.
        "name": "fit jits a step function it makes anew in each call",
        "advice": None,
        "code": """
def fit(params, x, y, steps):
    def one_step(params):
        value, grads = jax.value_and_grad(_loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value

    step = jax.jit(one_step)
    losses = []
    for _ in range(steps):
        params, value = step(params)
        losses.append(value)
    return params, jnp.stack(losses)
""",
        "fails": ["test_fit_beats_eager"],
        "says": "each fit call compiles its step again",
    },
    {
        "name": "fit with the wrong learning rate",
        "advice": None,
        "code": """
def fit(params, x, y, steps):
    losses = []
    for _ in range(steps):
        params, value = _step(params, x, y, 0.01)
        losses.append(value)
    return params, losses
""",
        "fails": ["test_fit_matches_reference_sgd"],
    },
    {
        "name": "row_sums jits once per length, in a module that silences JAX's logs",
        "advice": None,
        "code": """
import logging

logging.disable(logging.WARNING)


def row_sums(rows):
    return jnp.stack([jax.jit(jnp.sum)(row) for row in rows])
""",
        "fails": ["test_row_sums_compiles_a_bounded_number_of_times"],
    },
    {
        "name": "row_sums jits once per length",
        "advice": None,
        "code": """
def row_sums(rows):
    return jnp.stack([jax.jit(jnp.sum)(row) for row in rows])
""",
        "fails": ["test_row_sums_compiles_a_bounded_number_of_times"],
    },
    {
        "name": "row_sums pads on the device with jnp.pad, which compiles per length",
        "advice": None,
        "code": """
def row_sums(rows):
    sums = []
    for row in rows:
        padded = jnp.pad(row, (0, _bucket(row.shape[0]) - row.shape[0]))
        sums.append(_padded_sums(padded[None, :])[0])
    return jnp.stack(sums)
""",
        "fails": ["test_row_sums_compiles_a_bounded_number_of_times"],
    },
    {
        "name": "row_sums pads to the longest row, with no fixed sizes",
        "advice": None,
        "code": """
def row_sums(rows):
    rows = [np.asarray(row) for row in rows]
    width = max(row.shape[0] for row in rows)
    padded = np.zeros((len(rows), width), np.float32)
    for i, row in enumerate(rows):
        padded[i, : row.shape[0]] = row
    return _padded_sums(padded)
""",
        "fails": ["test_row_sums_compiles_a_bounded_number_of_times"],
    },
    {
        "name": "fit continues from the params the last call ended with",
        "advice": None,
        "code": """
_last = {}


def fit(params, x, y, steps):
    params = _last.get('params', params)
    losses = []
    for _ in range(steps):
        params, value = _step(params, x, y)
        losses.append(value)
    _last['params'] = params
    return params, jnp.stack(losses)
""",
        "fails": ["test_fit_twice_from_the_same_params_agrees"],
        "says": "called twice with the same arguments",
    },
    {
        "name": "noisy_copies' noise of the wrong shape, under the key-reuse check",
        "advice": "Incompatible shapes for broadcasting",
        "code": """
def noisy_copies(key, x, n):
    keys = jax.random.split(key, n)
    return jnp.stack([x + jax.random.normal(k, (x.shape[0],)) for k in keys])
""",
        "fails": ["test_noisy_copies_use_no_key_twice"],
        "says": "Incompatible shapes",
    },
    {
        # PyTorch's habit: a loss summed over outputs, then averaged over the batch (or
        # reduction="sum" divided by the batch size). With one output it is the MSE.
        "name": "_loss sums the squared error over outputs and averages over the batch",
        "advice": None,
        "code": """
def _loss(params, x, y):
    return jnp.mean(jnp.sum((_mlp(params, x) - y) ** 2, axis=-1))
""",
        "fails": ["test_fit_matches_reference_sgd"],
    },
    {
        "name": "gate keeps x at the threshold too, x >= threshold",
        "advice": None,
        "code": """
def gate(x, threshold):
    return jnp.where(x >= threshold, x, 0.0)
""",
        "fails": ["test_gate_under_jit", "test_gate_eagerly"],
        "says": "exactly",
    },
    {
        # Called on arrays, the 07 loop in NumPy on the host; traced (exported), the
        # compiled fit. Its values pass, fit has no compile count, and NumPy's steps are
        # fast: only the timed calls' bits, against its program's, tell.
        "name": "fit tells a tracer from an array: NumPy when called, the compiled loop traced",
        "advice": None,
        "code": """
import numpy as _np

_compiled_fit = fit


def fit(params, x, y, steps):
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((params, x, y))):
        return _compiled_fit(params, x, y, steps)
    p = {k: _np.asarray(v, _np.float64) for k, v in params.items()}
    x, y = _np.asarray(x, _np.float64), _np.asarray(y, _np.float64)
    losses = []
    for _ in range(steps):
        hidden = _np.tanh(x @ p["w1"] + p["b1"])
        out = hidden @ p["w2"] + p["b2"]
        losses.append(_np.mean((out - y) ** 2))
        d_out = 2 * (out - y) / out.size
        d_hidden = (d_out @ p["w2"].T) * (1 - hidden**2)
        grads = {
            "w1": x.T @ d_hidden, "b1": d_hidden.sum(0), "w2": hidden.T @ d_out,
            "b2": d_out.sum(0),
        }
        p = {k: p[k] - 0.1 * grads[k] for k in p}
    return {k: v.astype(_np.float32) for k, v in p.items()}, _np.asarray(losses, _np.float32)
""",
        "fails": ["test_fit_beats_eager"],
        "says": "Does it check whether its argument is a tracer?",
    },
    {
        # Passes the old checks, whose rows were at most 100 long.
        "name": "row_sums truncates each row to a tokenizer's MAX_LEN = 128, one padded size",
        "advice": None,
        "code": """
MAX_LEN = 128

def row_sums(rows):
    padded = np.zeros((len(rows), MAX_LEN), np.float32)
    for i, row in enumerate(rows):
        row = np.asarray(row)[:MAX_LEN]
        padded[i, : row.shape[0]] = row
    return _padded_sums(padded)
""",
        "fails": ["test_row_sums_values"],
        "says": "(past any MAX_LEN, and empty) returned a wrong value",
    },
    {
        # Passes the old checks, whose rows were at least 1 long.
        "name": "row_sums buckets each row by 2 ** ceil(log2(n)), undefined for an empty row",
        "advice": None,
        "code": """
import math

def row_sums(rows):
    sums = []
    for row in rows:
        row = np.asarray(row)
        padded = np.zeros((1, 2 ** math.ceil(math.log2(row.shape[0]))), row.dtype)
        padded[0, : row.shape[0]] = row
        sums.append(_padded_sums(padded)[0])
    return jnp.stack(sums)
""",
        "fails": ["test_row_sums_values"],
    },
    # --- fit's work on the host, where fit cannot be traced (issue #57, class 3a) ---------
    {
        "name": "fit in NumPy on the host, raising ConcretizationTypeError on purpose when traced",
        "advice": "a traced value used where JAX needs a concrete one",
        "code": NUMPY_STEP
        + """

def fit(params, x, y, steps):
    for leaf in jax.tree.leaves((params, x, y)):
        if isinstance(leaf, jax.core.Tracer):
            raise jax.errors.ConcretizationTypeError(leaf, "fit runs on the host")
    return _np_fit(params, x, y, steps)
""",
        "fails": ["test_fit_beats_eager"],
        "raises": "ConcretizationTypeError",
    },
    {
        "name": "fit in NumPy on the host, raising its own ConcretizationTypeError subclass",
        "advice": "a traced value used where JAX needs a concrete one",
        "code": NUMPY_STEP
        + """

class _HostOnly(jax.errors.ConcretizationTypeError):
    pass


def fit(params, x, y, steps):
    if _traced(params, x, y):
        raise _HostOnly(x, "fit runs on the host")
    return _np_fit(params, x, y, steps)
""",
        "fails": ["test_fit_beats_eager"],
        "raises": "_HostOnly",
    },
    {
        "name": "fit in NumPy on the host, reading a traced value as a float (JAX's own error)",
        "advice": "a NumPy call on a traced value",
        "code": NUMPY_STEP
        + """

def fit(params, x, y, steps):
    if _traced(params, x, y):
        float(x[0, 0])  # JAX raises ConcretizationTypeError, as for a loss read as a float
    return _np_fit(params, x, y, steps)
""",
        "fails": ["test_fit_beats_eager"],
        "raises": "TracerArrayConversionError",
    },
    {
        "name": "fit in NumPy on the host, a Python if on a traced value when traced",
        "advice": "a NumPy call on a traced value",
        "code": NUMPY_STEP
        + """

def fit(params, x, y, steps):
    if _traced(params, x, y) and x[0, 0] == x[0, 0]:  # JAX raises TracerBoolConversionError
        pass
    return _np_fit(params, x, y, steps)
""",
        "fails": ["test_fit_beats_eager"],
        "raises": "TracerArrayConversionError",
    },
    {
        # Traced, the right loop that reads its losses as floats; called, NumPy.
        "name": "fit in NumPy on the host, handing a tracer the loop that reads losses as floats",
        "advice": None,
        "code": NUMPY_STEP
        + """

def _loop_reading_floats(params, x, y, steps):
    losses = []
    for _ in range(steps):
        params, value = _step(params, x, y)
        losses.append(float(value))
    return params, losses


def fit(params, x, y, steps):
    try:
        host = _np.asarray(x)
    except jax.errors.TracerArrayConversionError:  # the grader's tracer
        return _loop_reading_floats(params, x, y, steps)
    return _np_fit(params, host, y, steps)
""",
        "fails": ["test_fit_beats_eager"],
        "says": "Does it check whether its argument is a tracer?",
    },
    {
        "name": "fit in NumPy on the host, raising under jax.jit's trace, not jax.make_jaxpr's",
        "advice": "a traced value used where JAX needs a concrete one",
        "code": NUMPY_STEP
        + """
import sys

_compiled_fit = fit


def _under_jit():
    frame = sys._getframe()
    while frame is not None and not frame.f_code.co_filename.endswith("pjit.py"):
        frame = frame.f_back
    return frame is not None


def fit(params, x, y, steps):
    if not _traced(params, x, y):
        return _np_fit(params, x, y, steps)
    if _under_jit():
        raise jax.errors.ConcretizationTypeError(x, "fit runs on the host")
    return _compiled_fit(params, x, y, steps)
""",
        "fails": ["test_fit_beats_eager"],
        "raises": "ConcretizationTypeError",
    },
    {
        "name": "fit's jitted step runs NumPy on the host in jax.pure_callback, losses as floats",
        "advice": None,
        "code": NUMPY_STEP
        + """

@jax.jit
def _host_step(params, x, y):
    shapes = jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, p.dtype), params)
    loss = jax.ShapeDtypeStruct((), jnp.float32)
    return jax.pure_callback(_np_step, (shapes, loss), params, x, y)


def fit(params, x, y, steps):
    losses = []
    for _ in range(steps):
        params, value = _host_step(params, x, y)
        losses.append(float(value))
    return params, losses
""",
        "fails": ["test_fit_beats_eager"],
        "says": "calls back into Python on the host",
    },
    {
        "name": "fit's jitted step runs NumPy on the host in io_callback, losses as floats",
        "advice": None,
        "code": NUMPY_STEP
        + """
from jax.experimental import io_callback


@jax.jit
def _host_step(params, x, y):
    shapes = jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, p.dtype), params)
    loss = jax.ShapeDtypeStruct((), jnp.float32)
    return io_callback(_np_step, (shapes, loss), params, x, y)


def fit(params, x, y, steps):
    losses = []
    for _ in range(steps):
        params, value = _host_step(params, x, y)
        losses.append(float(value))
    return params, losses
""",
        "fails": ["test_fit_beats_eager"],
        "says": "calls back into Python on the host",
    },
    {
        # The compiled step computes the loss; its params come back from a host callback.
        "name": "fit's jitted step runs NumPy on the host in jax.debug.callback, losses as floats",
        "advice": None,
        "code": NUMPY_STEP
        + """
_on_the_host = {}


def _store_step(params, x, y):
    _on_the_host["params"], _ = _np_step(params, x, y)


@jax.jit
def _host_step(params, x, y):
    jax.debug.callback(_store_step, params, x, y)
    return _loss(params, x, y)


def fit(params, x, y, steps):
    losses = []
    for _ in range(steps):
        losses.append(float(_host_step(params, x, y)))
        jax.effects_barrier()
        params = _on_the_host.get("params", params)
    return params, losses
""",
        "fails": ["test_fit_beats_eager"],
        "says": "calls back into Python on the host",
    },
]

CORRECT = [
    {
        "name": "gate as a masked multiply",
        "code": """
def gate(x, threshold):
    return x * (x > threshold)
""",
    },
    {
        "name": "noisy_copies as one draw of shape (n, *x.shape)",
        "code": """
def noisy_copies(key, x, n):
    return x + jax.random.normal(key, (n, *x.shape), x.dtype)
""",
    },
    {
        "name": "noisy_copies splitting the key in a Python loop",
        "code": """
def noisy_copies(key, x, n):
    out = []
    for _ in range(n):
        key, sub = jax.random.split(key)
        out.append(x + jax.random.normal(sub, x.shape))
    return jnp.stack(out)
""",
    },
    {
        "name": "noisy_copies with fold_in, one key per copy index",
        "code": """
def noisy_copies(key, x, n):
    return jnp.stack(
        [x + jax.random.normal(jax.random.fold_in(key, i), x.shape) for i in range(n)]
    )
""",
    },
    {
        "name": "fit as one jitted lax.scan, steps static, losses after each step",
        "code": """
from functools import partial


@partial(jax.jit, static_argnums=3)
def fit(params, x, y, steps):
    def one_step(params, _):
        params, _ = _step(params, x, y)
        return params, _loss(params, x, y)

    return jax.lax.scan(one_step, params, None, length=steps)
""",
    },
    {
        "name": "row_sums bucketing row by row, results stacked eagerly",
        "code": """
@jax.jit
def _sum_one(padded):
    return jnp.sum(padded)


def row_sums(rows):
    sums = []
    for row in rows:
        row = np.asarray(row)
        padded = np.zeros(_bucket(row.shape[0]), row.dtype)
        padded[: row.shape[0]] = row
        sums.append(_sum_one(padded))
    return jnp.stack(sums)
""",
    },
    {
        # The step jitted anew in each of fit's steps, its loss read back every step: one
        # program still; 34–102× the eager loop at load 25.
        "name": "fit calling jax.jit(_plain_step) in each step, losses as Python floats",
        "code": """
def _plain_step(params, x, y, lr=0.1):
    value, grads = jax.value_and_grad(_loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads), value


def fit(params, x, y, steps):
    losses = []
    for _ in range(steps):
        params, value = jax.jit(_plain_step)(params, x, y)
        losses.append(float(value))
    return params, losses
""",
    },
    {
        # PyTorch's loss.item(), and a Python `if` on each (concrete) loss: no program of
        # fit can be traced, yet its scalar reads answered, the grader exports one.
        "name": "fit reading each loss with .item() after a Python if on jnp.isnan(loss)",
        "code": """
def fit(params, x, y, steps):
    losses = []
    for _ in range(steps):
        params, value = _step(params, x, y)
        if jnp.isnan(value):
            raise FloatingPointError("the loss diverged")
        losses.append(value.item())
    return params, losses
""",
    },
]
