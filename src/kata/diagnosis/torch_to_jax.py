"""The PyTorch → JAX translation table (`torch_to_jax.toml`) and its lookups.

One table, three readers: the diagnosis (a torch spelling that JAX rejects gets the row's
advice), `kata rules` and the notebook's `%kata rules` (the searchable cheat sheet). Its
rows cover torch's documented surface, listed in `torch_surface.json` by
`tools/torch_surface.py`; `coverage()` says how much of it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kata.course import tomllib

TABLE = Path(__file__).with_name("torch_to_jax.toml")
SURFACE = Path(__file__).with_name("torch_surface.json")
KINDS = ("function", "method", "keyword")


@dataclass(frozen=True)
class Row:
    """How JAX spells one torch function, Tensor method or keyword argument."""

    kind: str  # "function" (torch.NAME), "method" (Tensor.NAME) or "keyword" (NAME=)
    name: str
    jax: str = ""  # JAX's spelling (markdown), empty where there is none
    none: str = ""  # why JAX has no spelling, and what to do instead
    same: bool = False  # JAX takes torch's spelling: typing it raises nothing
    note: str = ""  # what differs where the spelling is the same
    why: str = ""  # more of the cause, for the diagnosis
    concrete: bool = False  # a concrete array has the name, the tracers of transformations not
    typed: str = ""  # what a PyTorch user types (`x` an array), where its error is not plain
    error: str = ""  # a fragment of the JAX error `typed` raises
    line: str = ""  # a pattern the learner's line must match for `error` to count
    derived: bool = False  # under [derived.*]: filled in from JAX's names by tools/torch_table.py

    @property
    def torch(self) -> str:
        """The row's name as PyTorch writes it: `torch.cat`, `x.view()`, `x.grad`, `dim=`."""
        if self.kind == "function":
            return f"torch.{self.name}"
        if self.kind == "method":
            return f"x.{self.name}" + ("" if self.name in attributes() else "()")
        return f"{self.name}="

    @property
    def advice(self) -> str:
        """JAX's spelling, or why there is none."""
        return self.jax or f"no JAX equivalent: {self.none}"


@cache
def rows() -> dict[tuple[str, str], Row]:
    """Every row, by (kind, name)."""
    data = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    derived = data.get("derived", {})
    return {
        (kind, name): Row(kind, name, **fields, derived=table is derived)
        for table in (data, derived)
        for kind in KINDS
        for name, fields in table.get(kind, {}).items()
    }


# A diagnosis needs one row or a few, and parsing all 1,000 rows costs ~35 ms (more than
# the rest of a verdict's diagnosis); each row is one line, so a lookup parses only its own.
ROW_LINE = re.compile(r"^(\w+) = (\{.*\})$", re.MULTILINE)
SECTION = re.compile(r"^\[([\w.]+)\]$", re.MULTILINE)


@cache
def table_sections() -> dict[str, str]:
    """The table's text by section name (`function`, `derived.method`, ...)."""
    text = TABLE.read_text(encoding="utf-8")
    headers = list(SECTION.finditer(text))
    ends = [h.start() for h in headers[1:]] + [len(text)]
    return {h.group(1): text[h.end() : end] for h, end in zip(headers, ends, strict=True)}


def _row(kind: str, section: str, line: re.Match[str]) -> Row:
    fields = tomllib.loads(f"row = {line.group(2)}")["row"]
    return Row(kind, line.group(1), **fields, derived=section.startswith("derived."))


def lookup(kind: str, name: str) -> Row | None:
    """The row for a torch name of that kind, parsing only its line."""
    for section in (kind, f"derived.{kind}"):
        text = table_sections().get(section, "")
        found = re.search(rf"^({re.escape(name)}) = (\{{.*\}})$", text, re.MULTILINE)
        if found:
            return _row(kind, section, found)
    return None


@cache
def rows_by_error() -> tuple[Row, ...]:
    """Rows whose error does not name them: matched by a fragment of the message."""
    candidates = (
        _row(section.removeprefix("derived."), section, line)
        for section, text in table_sections().items()
        for line in ROW_LINE.finditer(text)
        if " error = " in line.group(2)
    )
    return tuple(row for row in candidates if row.error)


def matches_error(row: Row, message: str, source_line: str) -> bool:
    return row.error in message and (not row.line or re.search(row.line, source_line) is not None)


@dataclass(frozen=True)
class SheetRow:
    """One of the course's cheat-sheet rows (course.toml's [[course.mapping]]), shown as a
    table row is."""

    torch: str
    advice: str
    note: str = ""


# How well a name matches a search: the term itself, then names starting with it, then
# names holding it, then rows whose JAX side or notes mention it (`kata rules to` finds
# `x.to()` before `x.clone()`, whose JAX side says "nothing to protect").
EXACT, PREFIX, INSIDE, MENTIONED = range(4)
# The identifiers in a cheat-sheet row's PyTorch side (`loss.backward(); p.grad`).
IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*")


def _needle(term: str) -> str:
    return term.lower().strip().removeprefix("torch.").removeprefix("x.").strip("().=")


def _rank(needle: str, names: set[str], texts: tuple[str, ...]) -> int | None:
    if needle in names:
        return EXACT
    if any(name.startswith(needle) for name in names):
        return PREFIX
    if any(needle in name for name in names):
        return INSIDE
    if any(needle in text.lower() for text in texts):
        return MENTIONED
    return None


def _sheet_names(pytorch: str) -> set[str]:
    """A sheet row's names as a search term is read: `x.clone()` is `clone`, and a dotted
    name is also its last part (`nn.Module` is `module` too)."""
    names = {_needle(word) for word in IDENTIFIER.findall(pytorch)}
    return names | {name.rpartition(".")[2] for name in names}


def _ranked(term: str, mapping: tuple[tuple[str, str], ...]) -> list[tuple[int, Row | SheetRow]]:
    needle = _needle(term)
    if not needle:
        return []
    # A term spelled as a keyword (`mode=`, as the diagnosis of `jax.jit(f, mode=...)`
    # offers it) is one: torch's keywords alone, not `torch.mode`, the statistic.
    keyword = term.strip().endswith("=")
    found: list[tuple[int, int, str, str, Row | SheetRow]] = []
    for order, (torch, jax) in enumerate(mapping):
        if keyword and f"{needle}=" not in torch.lower():
            continue
        rank = _rank(needle, _sheet_names(torch), (jax,))
        if rank is not None:  # at one rank, the course's own rows first, in its order
            found.append((rank, 0, "", f"{order:04d}", SheetRow(torch, jax)))
    for row in rows().values():
        if keyword and row.kind != "keyword":
            continue
        rank = _rank(needle, {row.name.lower()}, (row.jax, row.none, row.note))
        if rank is not None:
            found.append((rank, 1, row.kind, row.name, row))
    return [(rank, row) for rank, _, _, _, row in sorted(found, key=lambda f: f[:4])]


def search(term: str) -> list[Row]:
    """The table's rows for `term` (case-insensitive): its exact name first, then names
    starting with it, names holding it, then rows whose JAX spelling or notes mention it;
    keywords alone for a term that ends in `=`."""
    return [row for _, row in _ranked(term, ()) if isinstance(row, Row)]


def translations(mapping: tuple[tuple[str, str], ...], term: str) -> list[Row | SheetRow]:
    """What `kata rules TERM` shows: the table's rows and the course's cheat-sheet rows
    (what the table of torch's functions and Tensor methods has no row for,
    `model.eval()`, `nn.Dropout`, …) in one order, the closest names first."""
    return [row for _, row in _ranked(term, mapping)]


@cache
def attributes() -> frozenset[str]:
    """The Tensor members torch reads without a call (`x.grad`, `x.shape`); torch's
    documentation lists `data` and `grad_fn` with no page of their own."""
    return frozenset(surface()["attributes"]) | {"data", "grad_fn"}


@cache
def surface() -> dict[str, list[str]]:
    """torch's documented functions and Tensor methods (torch_surface.json)."""
    return json.loads(SURFACE.read_text(encoding="utf-8"))


def coverage() -> dict[str, tuple[int, int]]:
    """For functions and methods: (names of torch's surface with a row, names in it)."""
    listed = surface()
    return {
        kind: (sum(lookup(kind, name) is not None for name in names), len(names))
        for kind, names in (("function", listed["functions"]), ("method", listed["methods"]))
    }
