"""Diagnoses of calls into JAX, Optax and Equinox: what the called function takes, read
from its signature (kata.diagnosis.library_api), and what JAX hands a function it calls back
(a `custom_vjp`'s `bwd`, a `custom_jvp` rule). The order in which JAX's functions that take
functions take their arguments is kata.diagnosis.argument_order's.

Each rule states its evidence: the error's type and text, and what the failing line
calls. The rule table is kata.diagnosis.diagnose.RULES.
"""

from __future__ import annotations

import ast
import re

from kata.diagnosis import library_api, torch_to_jax
from kata.diagnosis.diagnose_types import Diagnosis, Failure

UNEXPECTED_KEYWORD = re.compile(r"([\w.]+)\(\) got an unexpected keyword argument '(\w+)'")
CONTAINERS = ("dict", "list", "tuple")


def _keywords_taken(function: object) -> str:
    taken = library_api.keywords(function)
    return ", ".join(f"`{name}=`" for name in taken) if taken else "no keywords"


def keyword_a_library_lacks(f: Failure) -> Diagnosis | None:
    """A keyword the called JAX, Optax or Equinox function does not take
    (`jax.vmap(f, in_dims=0)`, `x.at[i].set(v, accumulate=True)`, `optax.sgd(lr=...)`): its
    own keywords, and torch's table's JAX spelling."""
    found = UNEXPECTED_KEYWORD.search(f.message) if f.is_a("TypeError") else None
    if found is None:
        return None
    qualified, keyword = found.groups()
    owner, _, name = qualified.rpartition(".")
    if name == "__init__" and owner:  # `eqx.nn.Linear(3, 4, bias=False)`: the class called
        name = owner.rpartition(".")[2]
    # `ufunc.__call__` (`jnp.add(x, y, alpha=2)`) names no function the line spells, and
    # torch's `dtype=` has a row of its own (kata.diagnosis.diagnose_spelling.torch_spelling).
    if name.startswith("__") or keyword == "dtype":
        return None
    resolved = library_api.called(f.source_line, name)
    function = resolved[1] if resolved else library_api.method_of_class(qualified)
    if function is None:
        return None
    spelled = resolved[0] if resolved else qualified
    cause = (
        f"{library_api.shown(spelled, function)} takes no `{keyword}=`; its keywords are "
        f"{_keywords_taken(function)}."
    )
    row = torch_to_jax.lookup("keyword", keyword)
    # The table's spelling counts where this function takes it: `dim=`'s `axis=` is no
    # keyword of `jax.tree.map`.
    renamed = set(re.findall(r"`(\w+)=`", row.jax)) if row else set()
    if row and (not renamed or renamed & set(library_api.keywords(function))):
        why = f" {row.why[0].upper()}{row.why[1:]}." if row.why else ""
        fix = f"in JAX: {row.jax}." if row.jax else f"JAX has no equivalent: {row.none}."
        return Diagnosis(f"`{keyword}=` is PyTorch's keyword: " + cause + why, fix)
    # `kata rules mode=` searches torch's keywords alone: `kata rules mode` would show
    # `torch.mode`, the statistic, for `jax.jit(f, mode=...)`. Offered only where the
    # table has the keyword.
    rules = f" (`kata rules {keyword}=` for torch's meaning)" if row else ""
    return Diagnosis(cause, f"pass what `{spelled}` takes, by the names above{rules}.")


# "bwd() takes 2 positional arguments but 3 were given", "run.<locals>.<lambda>() missing
# 1 required positional argument": the function's name.
CALLBACK_ARITY = re.compile(
    r"(?:[\w.<>]+\.)?(<lambda>|\w+)\(\) (?:takes \d+ positional arguments? but \d+ "
    r"(?:was|were) given|missing \d+ required positional)"
)
# A lambda of two arguments JAX called with more: a backward rule written `(res, g)` under
# `nondiff_argnums`, which gets those arguments first. `jax.tree.map` calls a lambda with
# one argument per tree, and a learner's line that maps over trees says so.
TWO_TAKEN_MORE_GIVEN = re.compile(r"<lambda>\(\) takes 2 positional arguments but ([3-9]) were")
MAPS_OVER_TREES = r"\btree(?:_util)?\.(?:tree_)?map\(|\btree_map\("
# A learner's line running reverse mode, inside which JAX calls a custom_vjp's `bwd`.
REVERSE_MODE = r"\b(?:grad|value_and_grad|vjp|jacrev|hessian)\("
BWD_ORDER = (
    "JAX calls `bwd(residuals, g)`, and with `nondiff_argnums` it passes those arguments "
    "first, `bwd(*nondiff_args, residuals, g)` (torch's `backward(ctx, grad)` keeps them on "
    "`ctx`)"
)
BWD_FIX = (
    "take them in that order: for `@partial(jax.custom_vjp, nondiff_argnums=(1,))` on "
    "`f(x, limit)`, `def bwd(limit, res, g): return (clipped_g,)`, a cotangent for each "
    "other input."
)
# A rule given fewer arguments than it takes may be the other rule's place: `f.defvjp(bwd,
# fwd)` has JAX call `bwd` with the function's own arguments.
DEFVJP_ORDER = (
    " Or the two rules are swapped: `f.defvjp(fwd, bwd)` takes the forward rule first, and "
    "JAX calls whatever comes first with the function's own arguments."
)


def custom_rule_arguments(f: Failure) -> Diagnosis | None:
    """A `custom_vjp`'s `fwd` or `bwd`, or a `custom_jvp` rule, that JAX called with other
    arguments than it takes: the rule is JAX's to call, never the learner's line's."""
    found = CALLBACK_ARITY.search(f.message) if f.is_a("TypeError") else None
    if found is None or f.any_line_has(rf"(?<![\w.]){re.escape(found.group(1))}\("):
        return None  # called by the learner's own line: an ordinary call
    name = found.group(1)
    swapped = DEFVJP_ORDER if "missing" in found.group(0) else ""
    # A rule's own name says what it is (`bwd`, `clip_fwd`), where the traceback holds no
    # line of the learner's (JAX calls `bwd` after the learner's code has returned);
    # torch's names (`forward`, `backward`) need a custom_vjp on a learner's line, since a
    # check calls a learner's `forward` too; a `backward` JAX called inside the learner's
    # `jax.grad` is one too (a check's call would hold no line of the learner's).
    vjp = f.any_line_has(r"custom_vjp|defvjp|nondiff_argnums")
    reverse = bool(f.learner_lines) and f.any_line_has(REVERSE_MODE)
    torch_backward = (vjp or reverse) and re.search(r"backward", name)
    backward = re.search(r"(?:^|_)bwd$", name) or torch_backward
    forward = re.search(r"(?:^|_)fwd$", name) or (vjp and re.search(r"forward", name))
    if backward or (vjp and not forward):
        return Diagnosis(
            f"JAX called your `custom_vjp` backward rule `{name}` with other arguments than "
            f"it takes: {BWD_ORDER}.{swapped}",
            BWD_FIX + (" And hand them over as `f.defvjp(fwd, bwd)`." if swapped else ""),
        )
    given = TWO_TAKEN_MORE_GIVEN.search(f.message)
    if given and not f.any_line_has(MAPS_OVER_TREES):
        return Diagnosis(
            f"JAX called a `lambda` of two arguments with {given.group(1)}: a `custom_vjp` "
            f"backward rule written `(res, g)` under `nondiff_argnums`. {BWD_ORDER}.",
            BWD_FIX,
        )
    if forward:
        return Diagnosis(
            f"JAX called your `custom_vjp` forward rule `{name}` with other arguments than "
            "it takes: `fwd` takes exactly the function's own arguments, all of them, "
            "`nondiff_argnums` included.",
            "give `fwd` the function's signature: for `f(x, y)`, `def fwd(x, y): return "
            "f(x, y), (x, y)`.",
        )
    if re.search(r"(?:^|_)jvp$", name) or f.any_line_has(r"custom_jvp|defjvp"):
        return Diagnosis(
            f"JAX called your `custom_jvp` rule `{name}` with other arguments than it takes: "
            "it calls `rule(primals, tangents)`, two tuples with one entry per argument.",
            "`def rule(primals, tangents): (x,) = primals; (t,) = tangents; return f(x), "
            "df(x) * t`.",
        )
    return None


def parsed_line(line: str) -> tuple[str, list[ast.Call]]:
    """A learner's line as parsed (a `return`, an `if ...:` or a `with ...:` line parses
    once its block is stubbed), and its calls; the text is what the calls' offsets index."""
    for text in (line.strip(), line.strip() + " pass"):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        return text, [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return line, []


def calls_in(line: str) -> list[ast.Call]:
    """The calls on a learner's line, parsed."""
    return parsed_line(line)[1]


# A name that holds positions, not a point: `argnums`, `wrt_idx`, `i`.
POSITIONS_NAME = re.compile(r"argnum|nums?$|idx|index|pos|^[ijkn]$")


def value_where_argnums_goes(f: Failure) -> Diagnosis | None:
    """A point passed where a transformation takes `argnums`, as in `jax.hessian(f, x)`:
    the second place of grad, jacrev, hessian... is the positions to differentiate."""
    # What JAX says when it reads a value as positions: an array or float as an index, a
    # number as a sequence of them.
    as_positions = f.says("integer", "not iterable", "argnums", "index")
    if f.is_a("AssertionError") or not as_positions:
        return None
    transforms = library_api.transforms_taking_argnums()
    for call in calls_in(f.source_line):
        name = ast.unparse(call.func).rpartition(".")[2]
        if name not in transforms or len(call.args) < 2:
            continue
        value = call.args[1]
        positions = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        if all(isinstance(n, ast.Constant) and isinstance(n.value, int) for n in positions):
            continue
        if isinstance(value, ast.Name) and POSITIONS_NAME.search(value.id):
            continue  # `jax.grad(f, argnums)`: named as positions, whatever else went wrong
        function, point = ast.unparse(call.args[0]), ast.unparse(value)
        return Diagnosis(
            f"`jax.{name}(f, {point})`: the second place of `jax.{name}` is `argnums`, the "
            "positions of the arguments to differentiate, not the point to differentiate at "
            f"(torch's `hessian(f, x)` takes the point). `{point}` was read as positions.",
            f"build the function, then call it at the point: `jax.{name}({function})({point})` "
            f"(`jax.{name}(f, argnums=1)(a, b)` for the second argument).",
        )
    return None


ARITHMETIC_OPERANDS = re.compile(
    r"unsupported operand type\(s\) for [^:]+: '(\w+)' and '(\w+)'|bad operand type for "
    r"unary [^:]+: '(\w+)'|can't multiply sequence by non-int|can only concatenate (\w+)"
)


# `jax.vmap`'s axes that do not fit what they map: JAX's words, and its details where given
# ("... key path\n    vmap in_axes[0]\nAt that key path, the prefix pytree ... with 1 child
# keys\n    w\nbut ... with 2 child keys\n    b w").
AXES_MISFIT = re.compile(
    r"vmap (in|out)_axes (?:specification must be a tree prefix|must be an int, None, or a tuple)"
)
AXES_PATH = re.compile(r"key path\s+vmap \w+_axes(?:\[(\d+)\])?")
AXES_KEYS = re.compile(
    r"(?:child keys|with metadata)\s+(.*)\nbut .* (?:child keys|metadata)\s+(.*)"
)
AXES_TYPES = re.compile(
    r"subtree of type\s+<class '([\w.]+)'>.*?subtree of different type\s+<class '([\w.]+)'>",
    re.DOTALL,
)
AXES_LENGTHS = re.compile(r"of type (\w+) of length (\d+), but .* same type but of length (\d+)")
AXES_COUNT = re.compile(r"len\(in_axes\)=(\d+), len\(args\)=(\d+)|but got (\{.*\})")
AXES_FIX = (
    "give `in_axes` a tuple with one entry per argument, each a number (or None) for all of "
    "that argument, or its own structure with a number at every leaf: for `f(params, x)`, "
    "`in_axes=(None, 0)`, or `in_axes=({'w': 0, 'b': None}, 0)` naming every key of "
    "`params`; one argument's entry still sits in a tuple, `in_axes=({'w': 0, 'b': 0},)`."
)


def _listed(names: list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _axes_misfit(message: str, where: str, value: str) -> tuple[str, str]:
    """What JAX's details say does not fit (the keys, types, lengths or count), and what
    mends a dict's keys."""
    keys, types = AXES_KEYS.search(message), AXES_TYPES.search(message)
    lengths, count = AXES_LENGTHS.search(message), AXES_COUNT.search(message)
    if keys:
        given, held = re.findall(r"\w+", keys.group(1)), re.findall(r"\w+", keys.group(2))
        missing = [k for k in held if k not in given]
        extra = [k for k in given if k not in held]
        said = (f": it lacks {_listed(missing)}" if missing else ": ") + (
            f"{'; ' if missing else ''}it names {_listed(extra)}, which the {value} lacks"
            if extra else "")  # fmt: skip
        mend = f" Here: give {where} every key of the {value}" + (
            f", `'{missing[0]}': None` to hold it still or `'{missing[0]}': 0` to map it"
            if missing else "")  # fmt: skip
        return f"{where} is a dict with the keys {_listed(given)}, the {value}'s are " + (
            f"{_listed(held)}{said}"), mend + "."  # fmt: skip
    if lengths:
        kind, given, held = lengths.groups()
        return f"{where} is a {kind} of {given} where the {value} is one of {held}", ""
    if types:
        held = types.group(2).rpartition(".")[2]
        shown = "an array (a leaf)" if held == "PytreeLeaf" else f"a {held}"
        return f"{where} is a {types.group(1)} where the {value} is {shown}", ""
    if count and count.group(3):
        return f"`in_axes` is a dict, {count.group(3)}, not a tuple with an entry per argument", ""
    if count:
        entries = "entry" if count.group(1) == "1" else "entries"
        return f"`in_axes` has {count.group(1)} {entries} for {count.group(2)} arguments", ""
    return "", ""


def _axes_on_the_line(line: str, side: str) -> str:
    """What the line's `in_axes=` (or `out_axes=`) asks, where JAX gave no details."""
    axes = next(
        (k.value for c in calls_in(line) for k in c.keywords if k.arg == f"{side}_axes"), None
    )
    entries = list(enumerate(axes.elts)) if isinstance(axes, ast.Tuple) else []
    named = next(((i, e) for i, e in entries if isinstance(e, ast.Dict)), None)
    if isinstance(axes, ast.Dict):
        return (
            f"`{side}_axes={ast.unparse(axes)}` on this line is a dict, not a tuple with an "
            "entry per argument"
        )
    if named:
        keys = [ast.unparse(k).strip("'\"") for k in named[1].keys if k is not None]
        return (
            f"`{side}_axes[{named[0]}]` on this line is a dict naming {_listed(keys)}: the "
            "dict it maps must have these keys and no others"
        )
    given = f", `{side}_axes={ast.unparse(axes)}` on this line," if axes is not None else ""
    return f"the axes{given} do not have the structure of what they map"


def in_axes_structure(f: Failure) -> Diagnosis | None:
    """`jax.vmap`'s `in_axes` (or `out_axes`) whose structure is not the arguments' (a dict
    missing a key of the argument's dict, a tuple for a dict, a count off): JAX's details
    where it gives them, else the call on the line."""
    found = AXES_MISFIT.search(f.message) if f.is_a("ValueError", "TypeError") else None
    if found is None:
        return None
    side = found.group(1)
    path = AXES_PATH.search(f.message)
    where = f"`{side}_axes[{path.group(1)}]`" if path and path.group(1) else f"`{side}_axes`"
    value = "argument" if path and path.group(1) else "arguments" if side == "in" else "output"
    misfit, mend = _axes_misfit(f.message, where, value)
    if not misfit:  # no details from JAX: the axes the line gives
        misfit = _axes_on_the_line(f.source_line, side)
    what = "arguments" if side == "in" else "function's output"
    return Diagnosis(
        f"`jax.vmap`'s `{side}_axes` must have the structure of the {what}, or be a prefix "
        f"of it (one number for a whole dict): {misfit}.",
        AXES_FIX + mend
        if side == "in"
        else "give `out_axes` the structure of what the function returns (`out_axes=0` for "
        "all of it), or return what `out_axes` describes.",
    )


# A name that holds a gradient, as a learner names one (not JAX's `grad` called, nor an
# attribute): `grads`, `g`, `gradients`, `w_grad`, `grads_w`.
GRADIENT_NAME = r"(?<![\w.])(grads?|gradients?|g|\w+_grads?|grads?_\w+|g_\w+)\b(?!\s*\()"
# What says a tuple was used as an array or a dict: arithmetic, a key, a tree beside a dict.
TUPLE_AS_ONE = re.compile(
    r"for [^:]+: '\w+' and 'tuple'|for [^:]+: 'tuple' and|can't multiply sequence by non-int|"
    r"can only concatenate tuple|tuple indices must be integers or slices, not str|"
    r"full pytree has a subtree of different type\s*<class 'tuple'>"
)


def gradients_in_a_tuple(f: Failure) -> Diagnosis | None:
    """A tuple of gradients used as one array or dict (`w - lr * grads`, `grads["w"]`,
    `jax.tree.map(f, params, grads)`), the learner's line naming it as a gradient: what
    `jax.grad(f, argnums=(0, 1))` returns, one gradient per position."""
    found = TUPLE_AS_ONE.search(f.message) if f.is_a("TypeError", "ValueError") else None
    said = found.group(0) if found else ""
    keyed, tree = said.startswith("tuple indices"), "pytree" in said
    # A tree map's trees are its arguments after the function (`g` of its lambda is a leaf).
    trees = [
        ast.unparse(tree_argument)
        for call in (calls_in(f.source_line) if tree else [])
        if re.search(MAPS_OVER_TREES, ast.unparse(call.func) + "(")
        for tree_argument in call.args[1:]
    ]
    named = re.search(GRADIENT_NAME, " ".join(trees) if tree else f.source_line) if said else None
    if named is None:
        return None
    if keyed and not re.search(GRADIENT_NAME + r"\s*\[\s*['\"]", f.source_line):
        return None  # another tuple on the line was looked up by a key
    name = named.group(1)
    used = "a dict, by a key" if keyed else "a tree shaped like the params" if tree else (
        "one array")  # fmt: skip
    kind = "tuple (or list)" if said.startswith("can't multiply") else "tuple"
    here = " (this line's `argnums=` is a tuple)" if f.line_has(r"argnums\s*=\s*[(\[]") else ""
    return Diagnosis(
        f"`{name}` is a {kind}, used here as {used}: `jax.grad(f, argnums=(0, 1))` returns "
        f"one gradient per position, in a tuple{here} (even for `argnums=(0,)`), as "
        "`torch.autograd.grad(loss, [w, b])` returns one per input. Or it is "
        "`jax.value_and_grad`'s (value, gradient) pair, kept whole; or the gradient of a "
        "tuple (of layers, say), a tuple like it.",
        "unpack it: `g_w, g_b = jax.grad(loss, argnums=(0, 1))(w, b)` (`grads[0]['w']` for "
        "the first argument's dict), `value, grads = jax.value_and_grad(loss)(params)`, or "
        "differentiate one argument, `argnums=0`, whose gradient is shaped like it; for a "
        "tuple of params, step leaf by leaf: `jax.tree.map(lambda p, g: p - lr * g, params, "
        "grads)`.",
    )


def arithmetic_on_containers(f: Failure) -> Diagnosis | None:
    """Arithmetic on dicts, lists or tuples of arrays (`params - lr * grads`):
    a pytree has no arithmetic, a state_dict loop had."""
    found = ARITHMETIC_OPERANDS.search(f.message) if f.is_a("TypeError") else None
    if found is None:
        return None
    operands = [name for name in found.groups() if name]
    if operands and not set(operands) & set(CONTAINERS):
        return None
    if not operands and f.line_has(r"['\"]\s*\*"):  # `"ab" * 0.5`: a string, no container
        return None
    return Diagnosis(
        "arithmetic on a container of arrays (a dict, list or tuple, as `params - lr * "
        "grads` on dicts): Python's containers have no arithmetic, and JAX does not add it "
        "to them.",
        "apply it leaf by leaf: `jax.tree.map(lambda p, g: p - lr * g, params, grads)` (or "
        "`optax.apply_updates(params, updates)`).",
    )


def jit_member_on_a_function(f: Failure) -> Diagnosis | None:
    """A jitted function's member (`f.lower(x)`, `f.trace(x)`) asked of a
    function that is not jitted."""
    found = re.search(r"'function' object has no attribute '(\w+)'", f.message)
    if not (f.is_a("AttributeError") and found):
        return None
    member = found.group(1)
    if member not in library_api.jitted_only_members():
        return None
    return Diagnosis(
        f"`.{member}` belongs to a jitted function (what `jax.jit(f)` returns); this "
        "function is a plain Python one.",
        f"jit it first: `jax.jit(f).{member}(x)`.",
    )


OPTAX_FUNCTION_ARITY = re.compile(r"\b(init_fn|update_fn)\(\) (?:missing|takes)")


def optimizer_function_arguments(f: Failure) -> Diagnosis | None:
    """An Optax transformation's two functions called with other arguments
    than their signatures take (`opt.update(grads)`, `opt.init()`)."""
    found = OPTAX_FUNCTION_ARITY.search(f.message) if f.is_a("TypeError") else None
    if found is None:
        return None
    method = found.group(1).removesuffix("_fn")
    taken = library_api.optax_transformation_signature(method)
    return Diagnosis(
        f"`opt.{method}` called with other arguments than it takes: an Optax optimizer is a "
        f"pair of pure functions, `init{library_api.optax_transformation_signature('init')}` "
        f"and `update{library_api.optax_transformation_signature('update')}`; it keeps no "
        "state, where a torch optimizer keeps it inside.",
        "make the state once, `opt_state = opt.init(params)`, and hand it to every step: "
        f"`updates, opt_state = opt.update(grads, opt_state, params)` ({method}{taken}).",
    )


MISSING_NAME = re.compile(r"module '((jax|optax|equinox)(?:\.\w+)*)' has no attribute '(\w+)'")


def name_in_another_module(f: Failure) -> Diagnosis | None:
    """A JAX, Optax or Equinox name looked up in the wrong module (`jax.tree_map`,
    moved; `jnp.lax.scan`): the module it is in, found among the library's imported modules."""
    found = MISSING_NAME.search(f.message) if f.is_a("AttributeError") else None
    home = found and library_api.home_of(found.group(2), found.group(3))
    if not home:
        return None
    module, _, name = found.groups()
    return Diagnosis(
        f"`{module}.{name}` does not exist here: `{name}` is in `{home}`.",
        f"`{home}.{name}`.",
    )


def outermost_library_call(line: str) -> tuple[str, object] | None:
    """The JAX, Optax or Equinox function the line calls last, outside any other call
    (`jax.grad` in `jax.grad(f, 1.0)(x)`), as spelled, and the object; None when the
    outermost call is another's (`layer(jnp.ones(3))`: jnp.ones finished first)."""
    calls = calls_in(line)
    inner = {id(n) for c in calls for a in (*c.args, *c.keywords) for n in ast.walk(a)}
    for call in calls:
        if id(call) in inner:
            continue
        function = call.func
        while isinstance(function, ast.Call):  # `jax.grad(f)(x)`: grad's call
            function = function.func
        spelled = ast.unparse(function)
        resolved = library_api.called(f"{spelled}(", spelled.rpartition(".")[2])
        if resolved:
            return resolved
    return None


def library_call(f: Failure) -> Diagnosis | None:
    """No rule's evidence held, and the failing line calls JAX, Optax or Equinox (the
    function the error names, else the line's outermost call): what that function takes,
    as its signature says, with no guess at the cause."""
    if f.is_a("AssertionError", "Failed") or not f.source_line:
        return None
    named = re.match(r"(?:lax\.)?(\w+)", re.sub(r"^\w+: ", "", f.message))
    resolved = named and library_api.called(f.source_line, named.group(1))
    resolved = resolved or outermost_library_call(f.source_line)
    if not (resolved and library_api.signature(resolved[1])):
        return None
    spelled, function = resolved
    said = (f.message.splitlines()[0] if f.message else f.types[0]).rstrip(".")
    return Diagnosis(
        f"this line, which calls `{spelled}`, raised: {said}. No known PyTorch habit matches "
        "this error.",
        f"compare what the line passes with what it takes: {library_api.shown(spelled, function)}.",
    )
