"""What JAX, Optax and Equinox's own functions take, read from the installed libraries.

The diagnosis of a call that handed one of them something else (a torch keyword, a value
where a function goes) names what the function really takes: its signature, as
`inspect` reads it in this process. Modules already imported are read: the grader imports
JAX itself, and a check imports Optax where its exercise uses it; Equinox, which no check
imports, is imported when a failing line names it.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
import sys
from functools import cache
from typing import Any

LIBRARIES = ("jax", "optax", "equinox")
# The names a learner's code gives these modules (`import jax.numpy as jnp`). Not `np`,
# `numpy` or `random`: NumPy's and Python's own modules answer to those as often.
ALIASES = {
    "jnp": "jax.numpy", "lax": "jax.lax", "jr": "jax.random", "jrandom": "jax.random",
    "eqx": "equinox", "jtu": "jax.tree_util", "tree_util": "jax.tree_util",
    "jsp": "jax.scipy",
}  # fmt: skip
# A bare name is JAX's only as JAX's transformations are imported bare (`from jax import
# vmap`), and never Python's own (`sum`, `max`): a learner's `split` or `norm` is no
# `jax.lax.split` or `jnp.linalg.norm`.
BARE_HOMES = ("jax",)
# Not a method: nothing before the name but the modules it is looked up in.
DOTTED_CALL = r"(?<![\w.)\]])((?:[A-Za-z_]\w*\.)*{name})\s*\("


def _module(name: str) -> Any | None:
    name = ALIASES.get(name, name)
    if name.split(".")[0] not in LIBRARIES:
        return None
    if name.split(".")[0] == "equinox" and "equinox" not in sys.modules:
        # The judge never imports Equinox (16's checks read the learner's model over the
        # wire), so a call the learner's line makes into it is read by importing it here,
        # once, when a failure names it: 1.3 s with both cores busy.
        try:
            importlib.import_module("equinox")
        except ImportError:
            return None
    return sys.modules.get(name)


def _attribute_path(root: Any, path: list[str]) -> Any | None:
    for part in path:
        root = getattr(root, part, None)
        if root is None:
            return None
    return root


def called(line: str, name: str) -> tuple[str, Any] | None:
    """The JAX, Optax or Equinox function `name` that `line` calls (`jax.vmap(`,
    `optax.adam(`, `vmap(` imported bare), as the line spells it, and the object."""
    for match in re.finditer(DOTTED_CALL.format(name=re.escape(name)), line):
        parts = match.group(1).split(".")
        for cut in range(len(parts) - 1, 0, -1):  # the longest module prefix first
            module = _module(".".join(parts[:cut]))
            found = module and _attribute_path(module, parts[cut:])
            if found is not None:
                return match.group(1), found
        if len(parts) == 1 and not hasattr(builtins, name):
            for home in BARE_HOMES:
                found = getattr(sys.modules.get(home), name, None)
                if callable(found):
                    return name, found
    return None


def resolve(path: str) -> Any | None:
    """The object a dotted path names (`jax.lax.while_loop`), looked up from its library's
    module as imported (or importable: Equinox), or None."""
    root, *parts = path.split(".")
    module = _module(root)
    return module and _attribute_path(module, parts)


def signature(function: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def keywords(function: Any) -> list[str]:
    """The names `function` takes as keywords (none past `**kwargs`)."""
    found = signature(function)
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if found is None:
        return []
    return [p.name for p in found.parameters.values() if p.kind in kinds and p.name != "self"]


def shown(spelled: str, function: Any) -> str:
    """`jax.vmap(fun, in_axes=0, out_axes=0, ...)`: the call as its signature reads,
    without the annotations, which would bury the names."""
    found = signature(function)
    if found is None:
        return f"`{spelled}`"
    plain = found.replace(
        parameters=[
            p.replace(annotation=inspect.Parameter.empty)
            for p in found.parameters.values()
            if p.name != "self"
        ],
        return_annotation=inspect.Signature.empty,
    )
    return f"`{spelled}{plain}`"


def method_of_class(qualified: str) -> Any | None:
    """`_IndexUpdateRef.set` (as a TypeError names a method): the method, found in the
    imported modules of JAX, Optax and Equinox."""
    owner, _, method = qualified.rpartition(".")
    if not owner:
        return None
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in LIBRARIES and isinstance(getattr(module, owner, None), type):
            return getattr(getattr(module, owner), method, None)
    return None


@cache
def transforms_taking_argnums() -> tuple[str, ...]:
    """JAX's transformations whose second place is `argnums` (`jax.hessian(f, argnums)`)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return ("grad", "value_and_grad", "jacfwd", "jacrev", "jacobian", "hessian")
    return tuple(
        name
        for name in dir(jax)
        if callable(getattr(jax, name, None))
        and (found := signature(getattr(jax, name)))
        and list(found.parameters)[1:2] == ["argnums"]
    )


@cache
def jitted_only_members() -> frozenset[str]:
    """What a jitted function has that a plain one lacks (`lower`, `trace`, `eval_shape`)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return frozenset({"lower", "trace", "eval_shape", "clear_cache"})

    def plain(x: Any) -> Any:
        return x

    jitted = jax.jit(plain)  # nothing is traced: only the wrapper's members are read
    return frozenset(n for n in dir(jitted) if not n.startswith("_")) - set(dir(plain))


@cache
def optax_state_fields() -> frozenset[str]:
    """The fields of Optax's optimizer states (`mu`, `nu`, `count`, `inner_state`...)."""
    optax = sys.modules.get("optax")
    if optax is None:
        return frozenset({"mu", "nu", "count", "inner_state", "trace", "hyperparams"})
    return frozenset(
        field
        for value in vars(optax).values()
        if isinstance(value, type) and issubclass(value, tuple)
        for field in getattr(value, "_fields", ())
    )


@cache
def array_members() -> frozenset[str]:
    """What a JAX array has: a name a container lacks where an array was meant."""
    jax = sys.modules.get("jax")
    if jax is None:
        return frozenset({"shape", "dtype", "ndim", "size", "T", "reshape", "astype"})
    return frozenset(n for n in dir(jax.Array) if not n.startswith("_"))


def optax_transformation_signature(method: str) -> str:
    """`(updates, state, params=None)`: an Optax transformation's `init` or `update` as its
    signature reads (Optax's own, where it is imported)."""
    optax = sys.modules.get("optax")
    found = signature(getattr(optax.identity(), method)) if optax else None
    if found is None:
        return "(params)" if method == "init" else "(updates, state, params=None)"
    return str(
        found.replace(
            parameters=[
                p.replace(annotation=inspect.Parameter.empty) for p in found.parameters.values()
            ],
            return_annotation=inspect.Signature.empty,
        )
    )


@cache
def home_of(root: str, name: str) -> str | None:
    """Where an imported module of `root` (jax, optax, equinox) keeps `name`
    (`jax.tree_util` for `tree_map`), the shortest such path."""
    homes = sorted(
        module_name
        for module_name, module in list(sys.modules.items())
        if (module_name == root or module_name.startswith(root + "."))
        and not any(part.startswith("_") for part in module_name.split("."))
        and callable(getattr(module, name, None))
    )
    return min(homes, key=len) if homes else None
