"""Results dropped where the learner expected a change in place, found in the learner's file.

PyTorch changes things in place: `model.eval()` flips a flag, `optimizer.step()` moves the
parameters, `x[i] = v` writes into the tensor. Their JAX counterparts return the changed
value and leave their arguments as they were (an `eqx.Module` is a frozen dataclass, a JAX
array never changes), so a call written as a statement, its result dropped, changes
nothing: `eqx.nn.inference_mode(model)` alone leaves `model` training, and the learner
meets it later, as a wrong value or as dropout asking for a key.

`dropped_calls` reads the learner's file (never runs it) for such statements, in a
function. `explain` turns a failure into a diagnosis on that evidence only: a check's own
verdict on a function that holds one (what the check saw can come from it), or an error
whose words are what a dropped call of that kind leaves behind (a dropout, still training,
asking for a key).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kata.diagnosis.diagnose import Diagnosis, Failure, diagnose

LAX_LOOPS = frozenset({"fori_loop", "while_loop", "scan"})
# `x.at[i].set(v)`'s methods: each returns a new array.
AT_METHODS = frozenset({"set", "add", "subtract", "multiply", "mul", "divide", "power",
                        "min", "max", "apply"})  # fmt: skip
# Modules every function of which returns a value and changes nothing (no `np.`: NumPy
# has in-place functions, `np.copyto`, `np.random.shuffle`).
# Not `jax.tree`: `jax.tree.map(lambda x: print(x.shape), params)` is called for its prints.
PURE_MODULES = ("jnp", "jax.numpy", "jax.nn", "jax.random", "jax.lax", "lax")
PURE_FUNCTIONS = frozenset({"device_put", "astype", "clip"})
# Their functions that write somewhere: called for that alone.
WRITES = frozenset({"save", "savez", "savez_compressed", "savetxt"})

WHY = {
    "mode": (
        "it returns a new model with dropout off and leaves `{target}` as it was: an "
        "eqx.Module never changes in place, unlike torch's `model.eval()`, which flips a "
        "flag in the model itself, so `{target}` still trains"
    ),
    "tree_at": (
        "it returns a new pytree with that part replaced and leaves `{target}` as it was: an "
        "eqx.Module never changes in place, as setting an nn.Module's attribute does"
    ),
    "apply_updates": (
        "it returns the new parameters and leaves `{target}` as it was, where torch's "
        "`optimizer.step()` moves them in place"
    ),
    "optimizer_update": (
        "it returns `(updates, new_state)` and changes neither the parameters nor the state, "
        "where torch's `optimizer.step()` moves the parameters and keeps its state inside"
    ),
    "at": (
        "it returns a new array and leaves `{target}` as it was: JAX arrays never change in "
        "place, as `x[i] = v` changes a tensor"
    ),
    "loop": "it returns the loop's final carry and changes nothing in place",
    "pure": (
        "it returns a new value and leaves its arguments as they were: JAX has no in-place "
        "operations (torch's `x.clamp_()`, `x.add_()` write into the tensor)"
    ),
}
# What each kind of dropped call leaves behind, in an error's words: the evidence on which
# an error (not a check's verdict) is put down to it.
SHOWS_AS = {"mode": ("dropout requires a key",), "tree_at": ("dropout requires a key",)}


@dataclass(frozen=True)
class DroppedCall:
    function: str  # the top-level function or class it sits in
    line: int
    call: str  # as written, shortened
    kind: str  # a key of WHY
    target: str  # what it leaves as it was, and what to keep its result in

    def __str__(self) -> str:
        return f"`{self.function}` drops the result of `{self.call}` (line {self.line})"

    def fix(self) -> str:
        if self.kind == "optimizer_update":
            return f"keep what it returns: `updates, opt_state = {self.call}`"
        return f"keep what it returns: `{self.target} = {self.call}` (or return it)"


def _dotted(node: ast.expr) -> str:
    """`eqx.nn.inference_mode` for the function a call names; "" for others."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return ""


def _is_at_update(func: ast.expr) -> bool:
    """`x.at[i].set`: a method of AT_METHODS on a subscript of an `.at`."""
    return (
        isinstance(func, ast.Attribute)
        and func.attr in AT_METHODS
        and isinstance(func.value, ast.Subscript)
        and isinstance(func.value.value, ast.Attribute)
        and func.value.value.attr == "at"
    )


def _kind(call: ast.Call) -> str | None:
    """Which kind of value-returning call `call` is (a key of WHY), or None."""
    if _is_at_update(call.func):
        return "at"
    name = _dotted(call.func)
    last = name.rpartition(".")[2] or getattr(call.func, "attr", "")
    if last in ("inference_mode", "tree_inference"):
        return "mode"
    if last in ("tree_at", "apply_updates") or (last in LAX_LOOPS and "." in name):
        return {"tree_at": "tree_at", "apply_updates": "apply_updates"}.get(last, "loop")
    # An optimizer's update takes the gradients and the state; a dict's update, one mapping.
    if last == "update" and isinstance(call.func, ast.Attribute) and len(call.args) >= 2:
        return "optimizer_update"
    pure_module = name.startswith(tuple(m + "." for m in PURE_MODULES))
    if (pure_module and last not in WRITES) or last in PURE_FUNCTIONS:
        return "pure"
    return None


def _target(call: ast.Call, kind: str) -> str:
    """The argument the call leaves as it was: `x` of `x.at[i].set(v)`, the model of
    `eqx.tree_at(where, model, v)`, else the first argument."""
    if kind == "at":
        node = call.func.value.value.value  # x of x.at[i].set
    elif kind == "tree_at" and len(call.args) >= 2:
        node = call.args[1]
    elif kind == "loop" and len(call.args) >= 4:
        node = call.args[3]  # fori_loop(lower, upper, body, init)
    elif kind == "loop" and len(call.args) >= 3:
        node = call.args[2]  # while_loop(cond, body, init)
    elif kind == "loop" and len(call.args) >= 2:
        node = call.args[1]  # scan(f, init, xs)
    else:
        node = call.args[0] if call.args else call.func
    return ast.unparse(node)


def _shortened(call: ast.Call) -> str:
    """The call as written, or, where that is long, its function with `(...)`."""
    text = ast.unparse(call)
    return text if len(text) <= 72 else f"{ast.unparse(call.func)}(...)"


def dropped_calls(source: str) -> list[DroppedCall]:
    """Each call in a function of `source` whose value-returning result is dropped (a
    statement of its own), in line order; none for a file that does not parse. A
    module-level statement is left alone: a notebook's or a script's line shows a value."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for outer in tree.body:
        if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(outer):
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
                continue
            kind = _kind(node.value)
            if kind:
                target = _target(node.value, kind)
                found.append(
                    DroppedCall(outer.name, node.lineno, _shortened(node.value), kind, target)
                )
    return sorted(found, key=lambda dropped: dropped.line)


def _named_in(message: str, name: str) -> bool:
    """Whether a check's message names the function: `evaluation_mode(model)`,
    `jax.jit(power_iteration)(...)`."""
    return re.search(rf"(?<![\w.]){re.escape(name)}\s*[()]", message) is not None


def _function_lines(source: str, name: str) -> set[str]:
    """The stripped lines of the top-level function or class `name` in `source`."""
    tree = ast.parse(source)
    found = [n for n in tree.body if getattr(n, "name", None) == name]
    lines = source.splitlines()[found[-1].lineno - 1 : found[-1].end_lineno] if found else []
    return {line.strip() for line in lines}


def _said(lead: str, seen: list[DroppedCall]) -> tuple[str, str]:
    """The cause and fix that the first of `seen` gives, after `lead`."""
    first, others = seen[0], len(seen) - 1
    more = f" (and {others} more such line{'s' if others > 1 else ''})" if others else ""
    why = WHY[first.kind].format(target=first.target)
    return f"{lead}{first}{more}: {why}", first.fix()


def explain(failure: Failure, source: str | None, finding: str | None = None) -> Diagnosis | None:
    """The diagnosis of a failure a dropped result explains: a check's verdict (`finding`)
    whose message names a function that drops one, or an error whose words a dropped call
    of its kind leaves behind (SHOWS_AS). Where that call's function is not in the error's
    traceback, the error's own diagnosis fits as well, and both are said."""
    dropped = dropped_calls(source) if source else []
    if finding is not None:
        seen = [d for d in dropped if _named_in(failure.message, d.function)]
        if not seen:
            return None
        cause, fix = _said("what the check saw can come from a result your code drops: ", seen)
        return Diagnosis(cause + ".", fix + ".", rule="dropped_result")
    seen = [d for d in dropped if d.kind in SHOWS_AS and failure.says(*SHOWS_AS[d.kind])]
    if not seen:
        return None
    cause, fix = _said("", seen)
    traced = {line.strip() for line in (*failure.learner_lines, failure.source_line)}
    other = None if traced & _function_lines(source, seen[0].function) else diagnose(failure)
    if other is None:
        return Diagnosis(cause + ".", fix + ".", rule="dropped_result")
    return Diagnosis(
        f"two causes fit. Your {cause}; or else {other.cause[0].lower()}{other.cause[1:]}",
        f"{fix}; otherwise, {other.fix}",
        rule="dropped_result",
    )
