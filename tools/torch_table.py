"""Fill in and measure the PyTorch → JAX table from JAX's own names.

    python tools/torch_table.py           # coverage of torch's documented surface
    python tools/torch_table.py --fill    # derive the rows for names without a hand-written one

Hand-written rows in src/kata/diagnosis/torch_to_jax.toml come first and are never changed. A
name of torch's surface (src/kata/diagnosis/torch_surface.json) without one gets a derived row
when JAX answers it by a rule, checked here against the installed JAX:
- a torch function that `jax.numpy` has under the same name: the same spelling;
- a torch function ending in `_copy` (a copy of a view op; JAX never aliases): its base's row;
- a Tensor method that JAX arrays have under the same name: the same spelling;
- a Tensor method that JAX arrays lack but `jax.numpy` has, or that has a function row:
  the function form;
- an in-place Tensor method (`NAME_`): the out-of-place form, its result assigned.
What no rule answers stays without a row, and is counted as uncovered.
"""

from __future__ import annotations

import argparse
import json

import jax.numpy as jnp

from kata.diagnosis import torch_to_jax
from kata.diagnosis.torch_to_jax import Row

ARRAY = jnp.zeros((2, 2))


def toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def derived_function(name: str) -> dict[str, object] | None:
    if hasattr(jnp, name):
        return {"jax": f"`jnp.{name}`", "same": True}
    base = name.removesuffix("_copy")
    row = torch_to_jax.lookup("function", base)
    spelling = row.jax if row else f"`jnp.{base}`" if hasattr(jnp, base) else ""
    if name.endswith("_copy") and spelling:
        return {
            "jax": spelling,
            "why": f"the copying form of `torch.{base}`: JAX never aliases, so every "
            "operation already returns a new array",
        }
    return None


def method_call(name: str) -> str | None:
    """How JAX calls a Tensor method's operation on `x`, if it can."""
    if hasattr(ARRAY, name):
        return f"x.{name}(...)"
    if hasattr(jnp, name):
        return f"jnp.{name}(x, ...)"
    return None


def derived_method(name: str, functions: dict[str, Row]) -> dict[str, object] | None:
    if hasattr(ARRAY, name):
        return {"jax": f"`x.{name}`", "same": True}
    if hasattr(jnp, name):
        return {
            "jax": f"`jnp.{name}(x, ...)`",
            "why": "JAX arrays have fewer methods than torch.Tensor: the function in `jnp` does it",
        }
    if name in functions:
        same_as_function = {"jax": functions[name].jax} if functions[name].jax else {}
        return same_as_function or {"none": functions[name].none}
    if name.endswith("_"):
        base = name.removesuffix("_")
        call = method_call(base)
        row = torch_to_jax.lookup("method", base) or functions.get(base)
        if call:
            return {"jax": f"`x = {call}`"}
        if row and row.jax.startswith("`"):
            code, rest = row.jax[1:].split("`", 1)
            return {"jax": f"`x = {code}`{rest}"}
        if row:
            return {"none": row.none}
    return None


def forget_the_table() -> None:
    """Drop what was read of the table file, which has just been rewritten."""
    for cached in (torch_to_jax.rows, torch_to_jax.table_sections, torch_to_jax.rows_by_error):
        cached.cache_clear()


def fill() -> int:
    """Derive the [derived.*] rows afresh from the hand-written ones; returns their count."""
    hand_written = torch_to_jax.TABLE.read_text(encoding="utf-8").split("\n[derived.")[0]
    torch_to_jax.TABLE.write_text(hand_written.rstrip() + "\n", encoding="utf-8")
    forget_the_table()
    listed = torch_to_jax.surface()
    functions = {
        name: row for (kind, name), row in torch_to_jax.rows().items() if kind == "function"
    }
    new: dict[str, list[str]] = {"function": [], "method": []}
    for name in listed["functions"]:
        if name not in functions and (fields := derived_function(name)):
            new["function"].append(name + " = " + inline_table(fields))
    for name in listed["methods"]:
        if torch_to_jax.lookup("method", name) is None and (
            fields := derived_method(name, functions)
        ):
            new["method"].append(name + " = " + inline_table(fields))
    text = torch_to_jax.TABLE.read_text(encoding="utf-8")
    for kind, lines in new.items():
        if lines:
            text += f"\n[derived.{kind}]\n" + "\n".join(lines) + "\n"
    torch_to_jax.TABLE.write_text(text, encoding="utf-8")
    forget_the_table()
    return sum(map(len, new.values()))


def inline_table(fields: dict[str, object]) -> str:
    shown = (
        f"{key} = {'true' if value is True else toml_string(str(value))}"
        for key, value in fields.items()
    )
    return "{ " + ", ".join(shown) + " }"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fill", action="store_true", help="derive the [derived.*] rows afresh")
    args = parser.parse_args()
    if args.fill:
        print(f"{fill()} derived rows added")
    rows = torch_to_jax.rows()
    derived = sum(row.derived for row in rows.values())
    print(f"{len(rows)} rows ({len(rows) - derived} written by hand, {derived} derived)")
    for kind, (covered, total) in torch_to_jax.coverage().items():
        print(f"torch {kind}s: {covered} of {total} have a row ({covered / total:.0%})")
    listed = torch_to_jax.surface()
    for kind, names in (("function", listed["functions"]), ("method", listed["methods"])):
        missing = [name for name in names if torch_to_jax.lookup(kind, name) is None]
        print(f"without a row ({kind}s):", " ".join(missing) or "none")


if __name__ == "__main__":
    main()
