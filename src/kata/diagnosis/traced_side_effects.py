"""Side effects inside `jax.jit`, found in the learner's source and explained in PyTorch terms.

In PyTorch a step that appends its loss to a list, prints, or counts its calls does so on
every call. Under `jax.jit` the function's Python runs once, while JAX traces it on
placeholders (tracers), and every later call runs the compiled program alone: the list got
one placeholder, the print printed a tracer once, the count stopped at 1. The learner meets
this later, as a leaked tracer (UnexpectedTracerError) or an empty list to stack.

`jitted_side_effects` reads the learner's file (never runs it) for such statements: a
mutation of a name the jitted function does not own, a `print`, a `global` it assigns.
`explain` turns a failure into a diagnosis only with that evidence or with JAX's own word
for a leak: an empty list alone has many causes, and is then left to kata.diagnosis.diagnose.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kata import findings
from kata.diagnosis.diagnose import Diagnosis, Failure

# Methods that grow a list or dict in place: on a name the function does not own, a side
# effect that runs once, while tracing. Not `update` or `add`, which Optax's `opt.update`
# and `x.at[i].add` spell too; and never on an imported name (`jnp.insert`).
MUTATING_METHODS = frozenset({"append", "extend", "insert", "appendleft", "setdefault"})
# Where JAX says the leaked value was made: "created on line /…/07_train_step.py:31:11 (loss)".
LEAK_ORIGIN = re.compile(r"created on line (?:\S*/)?([^/\s]+\.py):(\d+)(?::\d+)? \(([\w.<>]+)\)")
# Which function JAX was tracing when a traced value was made concrete: "The error occurred
# while tracing the function step at /…/07_train_step.py:9 for jit."
TRACED_FUNCTION = re.compile(r"while tracing the function (\w+)")
# JAX's errors for a traced value made concrete (a number, a bool, a NumPy array).
CONCRETE = (
    "ConcretizationTypeError",
    "TracerBoolConversionError",
    "TracerIntegerConversionError",
    "TracerArrayConversionError",
)
# How JAX says a stack or concatenation got no arrays (jnp.stack([]), jnp.concatenate([])).
NO_ARRAYS = ("need at least one array to",)
# What a check sees of state kept by a side effect inside jit: a count stuck at 1 or a log
# that stopped growing gives other values, and a second call carries on differently.
STATE_FINDINGS = (findings.WRONG_VALUE, findings.YOUR_INPUT, findings.CALLS_DISAGREE)

WHY_ONCE = (
    "In PyTorch a step that appends, prints or counts does so on every call. Under `jax.jit` "
    "your Python runs once, while JAX traces the function on placeholders (tracers) that "
    "stand for any call's arrays; every later call runs the compiled program and skips your "
    "Python, so an append, a `print` or a `count += 1` inside happens once, at the first "
    "call, and what it stored is a placeholder, never a number"
)
FIX = (
    "return every value you need from the jitted function (`return new_params, loss`) and "
    "append, count or print it after the call, outside jit; to print from inside the "
    'compiled program on every call, `jax.debug.print("loss={}", loss)`.'
)


@dataclass(frozen=True)
class SideEffect:
    function: str  # the jitted function it sits in
    line: int
    what: str  # "appends to `loss_log`", "prints", "assigns the global `calls`"

    def __str__(self) -> str:
        return f"`{self.function}` {self.what} (line {self.line})"


def _is_jit(node: ast.expr) -> bool:
    """Whether an expression names jit: `jax.jit`, `jit`, `eqx.filter_jit`, and either
    called with options (`partial(jax.jit, static_argnums=1)`, `jax.jit(...)`)."""
    if isinstance(node, ast.Call):
        return _is_jit(node.func) or any(_is_jit(arg) for arg in node.args[:1])
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in ("jit", "filter_jit", "pjit")


def _jitted_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The functions jitted where they are defined (`@jax.jit`) or by a call of jit on
    their name (`fast = jax.jit(step)`): of a name defined twice, the later definition,
    the one Python keeps."""
    last = {}
    for node in sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), key=lambda n: n.lineno
    ):
        last[node.name] = node
    called = {
        node.args[0].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _is_jit(node.func) and node.args
        if isinstance(node.args[0], ast.Name)
    }
    return [
        function
        for name, function in last.items()
        if name in called or any(_is_jit(d) for d in function.decorator_list)
    ]


def _assigned(scope: ast.AST) -> set[str]:
    """Every name an assignment, loop or `with` in `scope` binds."""
    found = set()
    for node in ast.walk(scope):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.comprehension)
            else [item.optional_vars for item in node.items if item.optional_vars]
            if isinstance(node, ast.With)
            else []
        )
        for target in targets:
            found |= _bound_by(target)
    return found


def _bound_by(target: ast.expr) -> set[str]:
    """The names an assignment target binds: `a` and `b` of `a, *b = ...`, none of
    `log[i] = ...` or `self.x = ...`, which write into an object and bind nothing."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return {name for element in target.elts for name in _bound_by(element)}
    if isinstance(target, ast.Starred):
        return _bound_by(target.value)
    return set()


def _imported(tree: ast.Module) -> set[str]:
    return {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }


def _declared(function: ast.FunctionDef) -> set[str]:
    """The names `global` or `nonlocal` hands the function from outside."""
    return {
        name
        for node in ast.walk(function)
        if isinstance(node, ast.Global | ast.Nonlocal)
        for name in node.names
    }


def _owned(function: ast.FunctionDef) -> set[str]:
    """Names the function (or a function inside it) binds itself, parameters included:
    under jit even an argument is a container JAX rebuilt for the call, so changing what
    they hold is no side effect."""
    owned = _assigned(function)
    for node in ast.walk(function):
        if isinstance(node, ast.FunctionDef | ast.Lambda):
            given = node.args
            owned |= {a.arg for a in (*given.posonlyargs, *given.args, *given.kwonlyargs)}
            owned |= {a.arg for a in (given.vararg, given.kwarg) if a is not None}
    return owned - _declared(function)


def _root(node: ast.expr) -> str | None:
    """The name an attribute or subscript chain starts from (`self` of `self.log[0]`)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _effects_of(function: ast.FunctionDef, outside: set[str]) -> list[SideEffect]:
    """The side effects in `function` on names in `outside` (bound elsewhere in its file)."""
    declared = _declared(function)
    outside = (outside | declared) - _owned(function)
    found = []
    for node in ast.walk(function):
        what = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "print":
                what = "prints"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in MUTATING_METHODS and _root(node.func.value) in outside:
                what = f"calls `{ast.unparse(node.func)}`"
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                root = _root(target)
                if isinstance(target, ast.Name) and target.id in declared:
                    what = f"assigns `{target.id}`, a name outside it"
                elif not isinstance(target, ast.Name) and root in outside:
                    what = f"writes into `{ast.unparse(target)}`"
        if what:
            found.append(SideEffect(function.name, node.lineno, what))
    return found


def jitted_side_effects(source: str) -> list[SideEffect]:
    """Each side effect in a jitted function of `source`, in line order; none for a file
    that does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    functions = _jitted_functions(tree)
    # A name bound anywhere in the file but an import: a module-level list, or one an
    # enclosing function made and the jitted function closes over.
    outside = _assigned(tree) - _imported(tree)
    effects = {effect for function in functions for effect in _effects_of(function, outside)}
    return sorted(effects, key=lambda effect: effect.line)


def _stored_then_used_outside(
    failure: Failure, source: str | None, effects: list[SideEffect]
) -> list[SideEffect]:
    """The side effects that stored a traced value where JAX's error names the function it
    was tracing and the failing line is not in it: `float(log[0])` after the call, where
    `float(x)` inside the jitted function is a conversion under jit (none)."""
    traced = TRACED_FUNCTION.search(failure.message)
    if not (source and traced and failure.is_a(*CONCRETE)):
        return []
    stored = [e for e in effects if e.function == traced[1] and e.what != "prints"]
    inside = _lines_of(source, traced[1])
    return [] if failure.source_line.strip() in inside else stored


def _lines_of(source: str, name: str) -> set[str]:
    """The stripped lines of the last function called `name` in `source`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    if not found:
        return set()
    lines = source.splitlines()[found[-1].lineno - 1 : found[-1].end_lineno]
    return {line.strip() for line in lines}


def explain(failure: Failure, source: str | None, finding: str | None = None) -> Diagnosis | None:
    """The diagnosis of a failure that a side effect inside jit explains: a leaked tracer
    (JAX's own word); no arrays to stack where the file's jitted code mutates a list; or a
    check's wrong value or disagreeing calls (`finding`) where its jitted code keeps state
    outside (a count, a list), told as what can cause it, since other bugs give the same."""
    effects = jitted_side_effects(source) if source else []
    seen = f" In your file, {'; '.join(map(str, effects[:3]))}." if effects else ""
    origin = LEAK_ORIGIN.search(failure.message)
    if origin and not effects:
        seen = f" JAX says it was made at line {origin[2]} of {origin[1]}, in `{origin[3]}`."
    if failure.is_a("UnexpectedTracerError"):
        return Diagnosis(
            "a leaked tracer: a placeholder from a traced call was kept outside it (a list, a "
            f"global, `self.…`) and used after tracing ended. {WHY_ONCE}.{seen}",
            FIX,
            rule="traced_side_effect",
        )
    stored = _stored_then_used_outside(failure, source, effects)
    if stored:
        return Diagnosis(
            f"a traced value stored outside the function JAX was tracing, and made a number "
            f"after that trace ended: {stored[0]}, and your line `{failure.source_line.strip()}` "
            f"reads what it stored, outside `{stored[0].function}`. JAX names "
            f"`{stored[0].function}` as the function being traced: what was stored is still its "
            f"placeholder (a tracer), not a number. {WHY_ONCE}.",
            FIX,
            rule="traced_side_effect",
        )
    appends = [effect for effect in effects if effect.what.startswith("calls")]
    if failure.says(*NO_ARRAYS) and appends:
        return Diagnosis(
            f"the list given to stack or concatenate is empty, and {appends[0]} while it "
            f"is traced. {WHY_ONCE}: after the first call the list gets nothing more.",
            FIX,
            rule="traced_side_effect",
        )
    kept = [effect for effect in effects if effect.what != "prints"]
    if finding in STATE_FINDINGS and kept:
        return Diagnosis(
            f"what the check saw can come from state your jitted code keeps outside it: "
            f"{'; '.join(map(str, kept[:3]))}. {WHY_ONCE}: a count kept this way stops at "
            "1, and a list holds one placeholder.",
            FIX,
            rule="traced_side_effect",
        )
    return None
