"""Rules for values that JAX treats otherwise than PyTorch: a PRNG key, a traced value, a
container of arrays (a pytree), a loop's carry, a matrix product's shapes.

Each rule states its evidence: the error's type and text, and what the failing line, or
the learner's lines that called it, show. The rule table is kata.diagnosis.diagnose.RULES.
"""

from __future__ import annotations

import ast
import re

from kata.diagnosis import diagnose_calls, library_api
from kata.diagnosis.diagnose_types import Diagnosis, Failure


def loop_body_signature(f: Failure) -> Diagnosis | None:
    """A `jax.lax` loop's function written to another signature than the loop's: a scan
    step that returns one value, a while_loop test that returns an array, or a function
    that takes other arguments than fori_loop, while_loop or scan passes it."""
    if f.is_a("TypeError") and f.says("scan body output must be a pair"):
        return Diagnosis(
            "a `jax.lax.scan` step that returns one value: scan's step is `step(carry, x)` "
            "and must return a pair, the carry for the next row and what to stack for this "
            "one.",
            "`return new_carry, output` (for a recurrent cell that stacks its states: "
            "`return h, h`); scan then returns `(final_carry, stacked_outputs)`.",
        )
    if f.is_a("TypeError") and f.says("cond_fun must return a boolean scalar"):
        returned = COND_RETURNED.search(f.message)
        if returned and returned.group(1) != "bool":
            # A number, not a bool: the body run as the test (`while_loop(body, cond, x)`
            # returns the carry from the test's place), or a test that computes a number.
            return Diagnosis(
                "a `jax.lax.while_loop` test that returns a number, not a bool: "
                "`lax.while_loop(cond_fun, body_fun, init_val)` takes the condition first, "
                "so a body passed first is run as the test, and returns the carry.",
                "pass the condition first, `lax.while_loop(cond, body, init)`; a condition "
                "returns one bool (`return i < n`).",
            )
        return Diagnosis(
            "a `jax.lax.while_loop` test that returns an array of booleans: `cond(carry)` "
            "must return one bool, the answer to 'go on?'.",
            "reduce it: `jnp.any(err > tol)` or `jnp.all(...)`, or compare a scalar.",
        )
    # JAX called the function with other arguments than it takes: the learner's lines
    # never call it by the name the message gives (a call of theirs is an ordinary error).
    callee = diagnose_calls.CALLBACK_ARITY.search(f.message)
    if not f.is_a("TypeError") or callee is None or f.any_line_has(rf"\b{callee.group(1)}\("):
        return None
    for loop, cause, fix in LOOP_CALLBACKS:
        if f.any_line_has(rf"\b{loop}\("):
            return Diagnosis(cause, fix)
    return None


# "cond_fun must return a boolean scalar, but got output type(s) [ShapedArray(bool[3])]":
# the dtype the test returned.
COND_RETURNED = re.compile(r"cond_fun must return a boolean scalar.*?ShapedArray\((\w+?)\d*\[")


# What each `jax.lax` loop calls the learner's function with, in the order the rule tries
# them: the loop named on the learner's lines.
LOOP_CALLBACKS = (
    (
        "fori_loop",
        "a `jax.lax.fori_loop` body with the wrong arguments: fori_loop calls "
        "`body(i, value)`, the round's index first, then the value it carries.",
        "define `def body(i, v): ...` returning the new `v` (ignore `i` if the rounds "
        "are all alike).",
    ),
    (
        "while_loop",
        "a `jax.lax.while_loop` function with the wrong arguments: while_loop calls "
        "`cond(carry)` and `body(carry)` with one argument each, the carry.",
        "pack what changes into one carry, `(i, x)`, and unpack it inside: "
        "`def body(carry): i, x = carry; return i + 1, x * 2`.",
    ),
    (
        "scan",
        "a `jax.lax.scan` step with the wrong arguments: scan calls `step(carry, x)`, the "
        "carry first, then this round's slice of `xs`.",
        "define `def step(carry, x): ...` returning `(new_carry, output)`.",
    ),
)


def python_operator_on_tracer(f: Failure) -> Diagnosis | None:
    """Python's `max`/`min` or `and`/`or`/`not` on a traced value, which asks
    Python for a bool."""
    if not f.is_a("TracerBoolConversionError"):
        return None
    branches = f.line_has(r"^\s*(if|elif|while)\b")
    also = (
        " The `if`/`while` on the same line needs a bool too: choose with `jnp.where(cond, a, "
        "b)` or `jax.lax.cond`."
        if branches
        else ""
    )
    if f.line_has(r"(?<![.\w])(max|min)\("):
        return Diagnosis(
            "Python's built-in `max`/`min` on a traced value: they compare with `>`/`<` and ask "
            "Python for a bool, which a tracer under `jit`/`grad`/`vmap` cannot give." + also,
            "`jnp.maximum(a, b)` / `jnp.minimum(a, b)` elementwise, `jnp.max(x)` / "
            "`jnp.min(x)` for the largest or smallest element.",
        )
    if f.line_has(r"\b(and|or|not)\b"):
        return Diagnosis(
            "Python's `and`/`or`/`not` on a traced value: they ask Python for a bool, which "
            "a tracer under `jit`/`grad`/`vmap` cannot give." + also,
            "`jnp.logical_and(a, b)`, `jnp.logical_or`, `jnp.logical_not` (or `&`, `|`, `~` "
            "with each comparison in parentheses: `(x > 0) & (x < 1)`).",
        )
    return None


# What asks Python for a bool on the learner's own line.
BRANCHES = r"^\s*(if|elif|while|assert)\b|\bbool\(|\bif\b.*\belse\b|\b(and|or|not)\b"


def bool_inside_a_call(f: Failure) -> Diagnosis | None:
    """A traced bool asked for inside a function the line calls, the line itself
    asking none: a setting passed as an argument, traced with it (a model's flag under jax.jit)."""
    if not f.is_a("TracerBoolConversionError") or not f.source_line or f.line_has(BRANCHES):
        return None
    if not f.line_has(r"\w\s*\("):
        return None
    model = f.any_line_has(r"\beqx\.|\bmodel\b|\bmodel\(")
    return Diagnosis(
        "a Python `if` on a traced value inside a function this line calls, not on the line "
        "itself: a setting handed in as an argument was traced with the arrays, as `jax.jit` "
        "traces every argument"
        + (", a model's flags too (an `eqx.nn.Dropout`'s `inference`)." if model else "."),
        (
            "jit the model's function with `eqx.filter_jit`, which traces its arrays alone, "
            "or mark the setting static."
            if model
            else "mark the setting static (`jax.jit(f, static_argnames='training')`), or keep "
            "it out of the traced arguments."
        ),
    )


# `a @ b`, `jnp.dot(a, b)`, `jnp.matmul(a, b)`: the learner's own product, operands named.
PRODUCT = re.compile(
    r"([\w.\[\]]+(?:\.T)?)\s*@\s*([\w.\[\]]+)|\b(?:dot|matmul)\(\s*([\w.\[\]]+)\s*,\s*([\w.\[\]]+)"
)


WEIGHT_NAME = re.compile(r"^(?:\w+\.)?(?:w\w*|W\w*|weight\w*|kernel\w*)$")


def matrix_product_sizes(f: Failure) -> Diagnosis | None:
    """A matrix product whose summed axes differ: inside a scan step, in the
    learner's own `a @ b`, or inside a library layer the learner called."""
    found = re.search(r"contracting dimensions to have the same shape, got (\S+) and (\S+?)\.?$",
                      f.message.splitlines()[0] if f.message else "")  # fmt: skip
    if not found:
        return None
    left, right = (size.strip("(,)") for size in found.groups())
    sizes = f"a matrix product whose summed axes differ in length ({left} against {right})"
    loop = re.search(r"\b(scan|fori_loop)\(", " ".join(f.learner_lines[:-1]))
    if loop and not f.line_has(rf"\b{loop.group(1)}\("):
        first = "`step(carry, x)`, the carry first" if loop.group(1) == "scan" else (
            "`body(i, carry)`, the index first")  # fmt: skip
        return Diagnosis(
            f"{sizes}, inside the function `jax.lax.{loop.group(1)}` calls: it calls "
            f"{first}; a step whose arguments are in the other order multiplies the wrong "
            "one.",
            "check the step's argument order against that, and that `xs` holds its steps "
            "along axis 0 (`xs.swapaxes(0, 1)` if they run along another).",
        )
    product = PRODUCT.search(f.source_line)
    if product is None and not re.search(r"\w\s*\(", f.source_line):  # no line of theirs
        return Diagnosis(
            f"{sizes}.", "print the shapes of the operands and multiply (n, k) by (k, m)."
        )
    if product is None:  # the product ran inside a function the line called, not the learner's
        library = diagnose_calls.outermost_library_call(f.source_line)
        if library:
            return Diagnosis(
                f"{sizes}, inside `{library[0]}`, which this line calls.",
                f"print the shapes of what it is given: {library_api.shown(*library)}.",
            )
        return Diagnosis(
            f"{sizes}, inside the layer this line calls: an Equinox layer (`eqx.nn.Linear`, "
            "`eqx.nn.MLP`) takes one example, not a batch, as torch's layers do.",
            "call the layer on each example: `jax.vmap(model)(xs)`.",
        )
    a, b = (name for name in product.groups() if name)
    weight = (
        f" If `{b}` is a weight stored torch's way, (out, in), it multiplies as "
        f"`{a} @ {b}.T`; if `{a}` holds its examples along its last axis, `{a}.T @ {b}`."
        if WEIGHT_NAME.match(b)
        else ""
    )
    return Diagnosis(
        f"{sizes}: `{a} @ {b}` sums the last axis of `{a}` ({left} long) against the first "
        f"of `{b}` ({right} long).{weight}",
        f"print the shapes (`{a}.shape`, `{b}.shape`) and multiply (n, k) by (k, m).",
    )


# The spec a sharding error names: "spec=P(None, 'devices')" (NamedSharding's), "in_specs
# of value P(None, 'devices')" (shard_map's).
SPEC = re.compile(r"(?:spec=|specs of value )(P\((?:[^()]|\([^()]*\))*\))")
# What does not fit: "array axis 1 is partitioned 8 times, but the dimension size is 3";
# "maps array axis 1 (of size 3) to mesh axis 'devices' (of size 8)"; "valid for values of
# rank at least 2, but was applied to a value of rank 1".
UNEVEN = re.compile(
    r"axis (\d+) is partitioned (\d+) times, but the dimension size is (\d+)|"
    r"axis (\d+) \(of size (\d+)\) to mesh axis '\w+' \(of size (\d+)\)"
)
TOO_FEW_AXES = re.compile(r"rank at least (\d+), but was applied to a value of rank (\d+)")
# 15_sharding's own words for a split along another axis than the rows (its fsdp check).
ROWS = "PartitionSpec's first entry is axis 0, the rows"


def spec_splits_another_axis(f: Failure) -> Diagnosis | None:
    """`P(None, 'devices')` where rows were to be split: its first entry, None, keeps axis
    0 (the rows) whole and splits a later axis, one the array lacks or cannot divide."""
    spec = SPEC.search(f.message) if f.is_a("ValueError") else None
    try:
        entries = ast.parse(spec.group(1), mode="eval").body.args if spec else []
    except SyntaxError:
        return None
    named = [i for i, e in enumerate(entries) if ast.unparse(e) != "None"]
    uneven, few = UNEVEN.search(f.message), TOO_FEW_AXES.search(f.message)
    if not named or named[0] == 0 or not (uneven or few):
        return None
    axis, mesh_axis = named[0], ast.unparse(entries[named[0]])
    if uneven:
        parts, size = uneven.group(2, 3) if uneven.group(1) else uneven.group(6, 5)
        here = f"axis {axis} holds {size}, which {parts} devices cannot split evenly"
        other = f"if axis {axis} is meant, its size must be a multiple of {parts}"
    else:
        rank = int(few.group(2))
        here = f"the array has {rank} axis{'' if rank == 1 else 'es'}, no axis {axis}"
        other = f"a spec has no more entries than its array has axes ({rank} here)"
    return Diagnosis(
        f"`{spec.group(1)}` splits axis {axis}, not the rows, over the mesh axis "
        f"{mesh_axis}: {ROWS}, and `None` there keeps them whole; here {here}.",
        f"to split the rows, name the mesh axis for axis 0: `P({mesh_axis})` (or "
        f"`P({mesh_axis}, None)`); {other}.",
    )


def key_reuse(f: Failure) -> Diagnosis | None:
    """A PRNG key used twice, as JAX's key-reuse checker found: a key made once at
    module level, a used key split again, or two draws from one key."""
    if not f.is_a("KeyReuseError"):
        return None
    # JAX's checker speaks of a "jit-compiled function" even when the learner never jitted:
    # jax.random's own functions are compiled.
    checker = (
        " (JAX's key-reuse checker caught it; it says 'jit-compiled function' because "
        "jax.random's own functions are compiled, whether or not you used jit)"
        if f.says("jit-compiled")
        else " (JAX's key-reuse checker caught it)"
    )
    if f.line_has(r"\w\(\s*(_[A-Za-z]\w*|[A-Z][A-Z0-9_]+)\s*[,)]"):
        return Diagnosis(
            "a key made once at module level, the `torch.manual_seed` habit: every call draws "
            "from the same key, so every call gives the same numbers" + checker + ".",
            "take randomness only from the `key` argument: split it for each draw.",
        )
    split = re.search(
        r"^\s*([\w\s,]+?)\s*=\s*(?:jax\.)?(?:random\.)?split\(\s*(\w+)", f.source_line
    )
    if split and split.group(2) not in re.split(r"\s*,\s*", split.group(1)):
        return Diagnosis(
            f"`{split.group(2)}` was used before this split (by a draw or an earlier split), "
            f"and this split gives no new `{split.group(2)}` back (its pieces go to "
            f"`{split.group(1).strip()}`): in a loop, every round splits the same used key"
            + checker
            + ".",
            f"carry the key forward: `{split.group(2)}, sub = jax.random.split("
            f"{split.group(2)})`, and draw from `sub`.",
        )
    if f.line_has(r"\bsplit\("):
        return Diagnosis(
            "a key split after it was already used for a draw: JAX stops at this `split`, "
            "but the mistake is the earlier draw from the key itself instead of from the "
            "piece split off it" + checker + ".",
            "draw only from the new piece: `key, sub = jax.random.split(key)`, then "
            "`jax.random.normal(sub, ...)`, and carry `key` forward.",
        )
    return Diagnosis(
        "a PRNG key used twice: the same key always gives the same numbers, so two draws "
        "from one key are not independent" + checker + ".",
        "split before every use: `key, sub = jax.random.split(key)`; use `sub` once and "
        "carry `key` forward.",
    )


# "The leaked intermediate value was created on line /…/07_train_step.py:41:8 (step)."
LEAK_ORIGIN = re.compile(r"created on line (?:\S*/)?([^/\s]+\.py):(\d+)(?::\d+)? \(([\w.<>]+)\)")


# "The error occurred while tracing the function step at /…/07_train_step.py:37 for jit."
TRACED_FUNCTION = re.compile(r"tracing the function (\S+) at (?:\S*/)?([^/\s]+\.py):(\d+)")


# `np.asarray(x)`, `_np.asarray(x)` (a module imported under a private name), `onp.`.
NUMPY_CALL = r"\b_*(np|numpy|onp)\.|__array__"


LEAK_FIX = (
    "return every value you need from the transformed function (`return new_params, loss`) "
    "and keep logs outside it: append what it returned, after the call."
)


def leaked_tracer(f: Failure) -> Diagnosis | None:
    """A traced value kept past its trace (in a global, a list, a closure) and used
    or returned after it ended."""
    if f.is_a("UnexpectedTracerError"):
        origin = LEAK_ORIGIN.search(f.message)
        where = (
            f" It was made at line {origin.group(2)} of {origin.group(1)}, in "
            f"`{origin.group(3)}`: whatever stores it there (a global, a list's `.append`, a "
            "closure's variable, `self.…`) is the leak."
            if origin
            else ""
        )
        return Diagnosis(
            "a leaked tracer: a value from inside `jax.jit`/`grad`/`vmap` was stored outside "
            "the function (a global, a list, a closure, `self.…`) and used after tracing "
            "ended, when it no longer stands for any number." + where,
            LEAK_FIX,
        )
    traced = TRACED_FUNCTION.search(f.message)
    if f.is_a("TracerArrayConversionError") and not f.line_has(NUMPY_CALL) and traced:
        # The grader reads the result with NumPy: a tracer in it was kept from an
        # earlier trace (JAX names the function traced then, not a NumPy call of yours).
        return Diagnosis(
            f"a leaked tracer: your result holds a value kept from inside `{traced.group(1)}` "
            f"(line {traced.group(3)}) while it was traced, stored in a global, a list, a "
            "closure or `self.…`; it stands for no number, so it cannot be read. (If you did "
            "call NumPy on a traced value, that is the other cause: use `jnp` inside.)",
            LEAK_FIX,
        )
    return None


def not_a_pytree(f: Failure) -> Diagnosis | None:
    """A value JAX cannot trace handed to a transformed function: a function, a
    Python value, or a class JAX does not know holds arrays."""
    not_jax = f.says("not a valid jax type", "error interpreting argument")
    if f.is_a("TypeError") and not_jax and f.says("<class 'function'>", "functools.partial"):
        return Diagnosis(
            "a function returned where a value was expected: `jax.grad(f)` (or `jit`, "
            "`vmap`) builds a new function, and nothing has called it yet.",
            "call it on the arguments, `return jax.grad(f)(x)`, or define the name as the "
            "function itself at module level: `df = jax.grad(f)`.",
        )
    python_value = re.search(r"type <class '(str|NoneType|bytes|set|frozenset|range)'>", f.message)
    if f.is_a("TypeError") and not_jax and python_value:
        return Diagnosis(
            f"a Python value (a `{python_value.group(1)}`) passed as an argument of a "
            "transformed function: JAX traces arguments as arrays, and this one is none.",
            "mark the argument static, `jax.jit(f, static_argnames='mode')`, or keep it out "
            "of the arguments (a closure or a default).",
        )
    if f.is_a("TypeError") and not_jax:
        return Diagnosis(
            "JAX was handed an object it cannot see inside (a class it does not know is a "
            "container of arrays).",
            "register the class as a pytree: `jax.tree_util.register_dataclass` or "
            "`register_pytree_node`.",
        )
    return None


# A lookup by a key written out, or by a name holding one: `params['w1']`,
# `state["layer1"]["w"]`, `params[name] for name in NAMES`.
KEY_WRITTEN_OUT = re.compile(r"\w\]?\s*\[\s*(?:(['\"])\w+\1|[A-Za-z_]\w*)\s*\]")


# A format string's field: `jax.debug.print("norm={norm}", v)`, `"{loss:.3f}".format(l)`.
FORMAT_CALL = re.compile(r"\b(?:debug\.print|debug\.callback|format|print)\(")


def missing_key(f: Failure) -> Diagnosis | None:
    """A params dict read the state_dict way: the line looks a key up by its name."""
    missing = re.search(r"KeyError: '(\w+)'", f.message)
    if not (f.is_a("KeyError") and missing and f.line_has(KEY_WRITTEN_OUT.pattern)):
        return None
    literal = re.search(r"\[\s*(['\"])(\w+)\1\s*\]", f.source_line)
    if literal and not f.line_has(rf"(['\"]){missing.group(1)}\1"):  # another lookup raised
        return None
    return Diagnosis(
        f"the code looks up `'{missing.group(1)}'`, a key the input does not have: keys "
        "written out for one model (`params['w1']`, the way a state_dict is read) fail on "
        "any other.",
        "let JAX walk the structure: `jax.tree.map(fn, tree)`, `jax.tree.leaves(tree)`.",
    )


def format_field_without_value(f: Failure) -> Diagnosis | None:
    """A format string's named field with its value passed by position
    (`jax.debug.print("norm={norm}", v)`)."""
    missing = re.search(r"KeyError: '(\w+)'", f.message)
    field = missing and f.line_has(r"\{" + missing.group(1) + r"[:!}]")
    if not (f.is_a("KeyError") and field and f.line_has(FORMAT_CALL.pattern)):
        return None
    name = missing.group(1)
    return Diagnosis(
        f"the format string names a field `{{{name}}}` and no `{name}=` was passed: "
        "`jax.debug.print` (like `str.format`) fills a named field from a keyword, a value "
        "passed by position fills `{}`.",
        f'pass it by name, `jax.debug.print("{name}={{{name}}}", {name}=value)`, or use '
        'an empty field: `jax.debug.print("value={}", value)`.',
    )


CONTAINER_ATTRIBUTE = re.compile(r"'(dict|list|tuple)' object has no attribute '(\w+)'")


def container_as_array(f: Failure) -> Diagnosis | None:
    """An array's attribute (`.shape`, `.reshape`) asked of a dict, list or tuple."""
    found = CONTAINER_ATTRIBUTE.search(f.message) if f.is_a("AttributeError") else None
    if found is None or found.group(2) not in library_api.array_members():
        return None
    return Diagnosis(
        f"a container treated as an array: `.{found.group(2)}` of a {found.group(1)}. "
        "Parameters nest to any depth (dicts in dicts, lists of layers), so a loop over the "
        "top level, the `state_dict` way, meets a dict or a list where it expects an array.",
        "let JAX walk every level: `jax.tree.map(lambda p: p.shape, params)`, "
        "`jax.tree.leaves(params)`.",
    )


# "sqrt requires ndarray or scalar arguments, got <class 'dict'> at position 0." (jnp's
# check of its arguments; `jnp.linalg.norm` names itself whole).
NOT_AN_ARRAY = re.compile(
    r"([\w.]+) requires ndarray or scalar arguments, got <class '(dict|list|tuple)'> at "
    r"position (\d+)"
)


def pytree_where_an_array_goes(f: Failure) -> Diagnosis | None:
    """A `jnp` function (elementwise or a reduction) given a dict, list or tuple of arrays,
    as a params dict or `jax.tree.map` gives: a pytree, not an array; a list may be one
    array's values too, which NumPy would take."""
    found = NOT_AN_ARRAY.search(f.message) if f.is_a("TypeError") else None
    if found is None:
        return None
    name, container, position = found.groups()
    resolved = library_api.called(f.source_line, name.rpartition(".")[2])
    spelled = resolved[0] if resolved else name if "." in name else f"jnp.{name}"
    mapped, stacked = _mapped_over_leaves(f.source_line, spelled, int(position))
    reduces = resolved is not None and "axis" in library_api.keywords(resolved[1])
    cause = (
        f"`{spelled}` was given a {container} (its argument {int(position) + 1}): a pytree, a "
        "container of arrays, as a params dict is and as `jax.tree.map` returns over one, "
        f"not an array. `{spelled}` takes one array; JAX maps nothing over containers by "
        "itself."
    )
    fix = f"map it over every leaf: `{mapped}`" + (
        "; for one number over every leaf together, combine what each gives, e.g. "
        "`sum(jnp.sum(leaf) for leaf in jax.tree.leaves(tree))` (`optax.global_norm(tree)` "
        "for the norm of them all)"
        if reduces
        else ""
    )
    if container == "dict":
        return Diagnosis(cause, fix + ".")
    return Diagnosis(
        cause + f" Or the {container} holds one array's values (numbers, or arrays of one "
        "shape), which NumPy would turn into an array and JAX does not.",
        f"{fix}; for one array, stack it first: `{stacked}`.",
    )


def _mapped_over_leaves(line: str, spelled: str, position: int) -> tuple[str, str]:
    """The line's call of `spelled` mapped over the tree at `position` (`jax.tree.map(
    jnp.sqrt, g)`), and called on it stacked (`jnp.sqrt(jnp.stack(g))`)."""
    calls = [c for c in diagnose_calls.calls_in(line) if ast.unparse(c.func) == spelled]
    if not calls or len(calls[0].args) <= position:
        return f"jax.tree.map({spelled}, tree)", f"{spelled}(jnp.stack(xs))"
    call = calls[0]
    tree = ast.unparse(call.args[position])

    def called_on(argument: str) -> str:
        args = [*call.args]
        args[position] = ast.parse(argument, mode="eval").body
        return ast.unparse(ast.Call(call.func, args, call.keywords))

    if len(call.args) + len(call.keywords) == 1:
        return f"jax.tree.map({spelled}, {tree})", called_on(f"jnp.stack({tree})")
    return f"jax.tree.map(lambda leaf: {called_on('leaf')}, {tree})", called_on(
        f"jnp.stack({tree})"
    )


def dict_iterated_for_its_arrays(f: Failure) -> Diagnosis | None:
    """A string where an array was meant, as a loop over a dict gives
    (`for p in params: p.shape`; the loop's own line, when the traceback holds it)."""
    found = re.search(r"'str' object has no attribute '(\w+)'", f.message)
    if not (f.is_a("AttributeError") and found and found.group(1) in library_api.array_members()):
        return None
    member = found.group(1)
    loop = re.search(r"\bfor\s+(\w+)\s+in\s+(\w+)\s*[:\])]", " ".join(f.learner_lines))
    if loop is None:
        named = re.search(rf"(\w+)\.{member}\b", f.source_line)
        return Diagnosis(
            f"`{named.group(1) if named else 'it'}.{member}` of a string, where an array was "
            "meant: a loop over a dict (`for p in params`) gives its keys, the names, not its "
            "arrays.",
            "loop over `params.values()` (or `.items()`), or let JAX walk every level: "
            "`jax.tree.leaves(params)`.",
        )
    return Diagnosis(
        f"a loop over `{loop.group(2)}`, a dict, gives its keys, strings: `{loop.group(1)}` "
        f"is a name, not an array. A state_dict is read with `.items()`.",
        f"loop over `{loop.group(2)}.values()` (or `.items()`), or let JAX walk every level: "
        f"`jax.tree.leaves({loop.group(2)})`.",
    )


# Optax reading a state that its optimizer did not make: "The number of updates and states
# has to be the same in chain!" (a chain's count of states), "'EmptyState' object has no
# attribute 'mu'" (another transformation's state), "'tuple' object has no attribute
# 'inner_state'" (a chain's where `optax.masked`'s goes), "'dict' ... 'mu'" (no state at all).
STATE_FIELD_MISSING = re.compile(r"'(\w+)' object has no attribute '(\w+)'")
# `opt.update(grads, opt_state, params)`: the optimizer as spelled, and the three arguments.
UPDATE_CALL = re.compile(r"([\w.\[\]]+)\.update\(\s*([^,()]+),\s*([^,()]+)(?:,\s*([^,()]+))?")
NOT_A_STATE = ("dict", "str", "list", "ndarray", "ArrayImpl")
STATE_FIX = (
    "update with the very optimizer whose `init` made the state: make it once, "
    "`opt = optax.adam(1e-2)` at module level, then `opt_state = opt.init(params)` and "
    "each step `updates, opt_state = opt.update(grads, opt_state, params)`; a state handed "
    "to your step was made by the optimizer its contract names, so update it with that one."
)


def state_of_another_optimizer(f: Failure) -> Diagnosis | None:
    """An Optax `update` handed a state its optimizer did not make (another optimizer's
    `init`, the params, `update`'s own pair): Optax fails reading it, in any of its words."""
    if not f.line_has(r"\bupdate\("):
        return None
    missing = STATE_FIELD_MISSING.search(f.message) if f.is_a("AttributeError") else None
    owner, field = missing.groups() if missing else ("", "")
    if missing and not (
        field in library_api.optax_state_fields()
        and not f.line_has(rf"\.{field}\b")  # read by Optax, not by the line itself
        and (owner in ("tuple", "NoneType", *NOT_A_STATE) or owner.endswith("State"))
    ):
        return None
    if owner == "NoneType" or (f.is_a("TypeError") and f.says("'NoneType' has no len()")):
        return Diagnosis(
            "`update` was handed None for the state: a step that returned no state (`return "
            "params, None, loss`), or `init`'s state never kept.",
            STATE_FIX,
        )
    if missing:
        found = f"Optax found a `{owner}` where it reads the state's `.{field}`"
    elif f.is_a("ValueError") and f.says("number of updates and states"):
        found = "Optax's chain found another number of states than it has transformations"
    else:
        return None
    update = UPDATE_CALL.search(f.source_line)
    opt, second, third = update.group(1, 3, 4) if update else ("opt", "", "")
    if re.search(r"param", second or "") or re.search(r"state", third or ""):
        return Diagnosis(
            f"`{opt}.update` got its arguments in another order than it takes them "
            f"({found}): it takes `update(grads, opt_state, params)`, the state second.",
            f"`updates, opt_state = {opt}.update(grads, opt_state, params)`.",
        )
    # Arguments named neither in order nor out of it (`update(g, s, p)`): both causes.
    also = (
        ""
        if re.search(r"state", second or "")
        else " (Or its arguments are out of order: it takes `update(grads, opt_state, params)`.)"
    )
    if missing and owner in NOT_A_STATE:
        return Diagnosis(
            f"`{opt}.update` was handed something other than a state ({found}): the params, "
            "say, or the `(updates, opt_state)` pair `update` returns, kept whole." + also,
            "keep the pair apart, `updates, opt_state = opt.update(grads, opt_state, "
            "params)`, and hand `update` the state alone.",
        )
    return Diagnosis(
        f"`{opt}.update` was handed a state another optimizer's `init` made ({found}): an "
        "Optax state holds one entry per transformation of the optimizer that made it "
        "(`optax.adam`'s: Adam's moments and count, then the learning rate's; "
        "`optax.masked`'s an `inner_state`; `optax.multi_transform`'s `inner_states`), so only "
        "that optimizer can read it. A torch optimizer builds its own state; an Optax state "
        "must come from the very optimizer that updates with it." + also,
        STATE_FIX,
    )


def optimizer_state_field(f: Failure) -> Diagnosis | None:
    """An Optax state's field asked of the tuple `opt.init` returned (`state.mu`):
    the tuple holds one state per transformation."""
    found = CONTAINER_ATTRIBUTE.search(f.message) if f.is_a("AttributeError") else None
    if found is None or found.group(1) != "tuple":
        return None
    if found.group(2) not in library_api.optax_state_fields():
        return None
    field = found.group(2)
    return Diagnosis(
        f"`.{field}` asked of a tuple: an Optax optimizer's state is a tuple with one state "
        "per transformation it chains (`optax.adam`'s is `(ScaleByAdamState(count, mu, nu), "
        f"EmptyState())`), and `{field}` belongs to one of them, unlike torch's "
        "`optimizer.state[p]`.",
        f"take the transformation's state first: `opt_state[0].{field}`; print `opt_state` "
        "to see its structure.",
    )
