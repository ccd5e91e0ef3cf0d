"""Noticing a submission that rewrites the grader's own functions to forge its verdict.

The checks run in the same process as the learner's module, so a submission can replace
`numpy.allclose`, pytest's report machinery or a check's assertion helpers and pass every
check. Before the learner's module is imported, `Fingerprint.take` records the identity of
every function and class attribute of the modules a verdict depends on, and what each
Python function runs with (its code, defaults and closure); `changed` names what differs
afterwards, and the plugin fails the check with that name. This makes those
forgeries evident; it cannot stop code that edits the plugin's own data in memory, which
only a separate process can.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, is_
from types import CellType, FunctionType, ModuleType
from typing import Any

# The modules whose functions decide a verdict: NumPy and JAX compute the references,
# pytest and pluggy report the outcome, kata and the checks judge it. Their submodules
# are many (JAX has ~600); the public ones the checks call are enough, and keep the
# fingerprint cheap (measured: ~6,000 entries, about 2 ms to take and to compare).
WATCHED = (
    "numpy",
    "numpy.testing",
    "numpy.linalg",
    "jax",
    "jax.numpy",
    "jax.random",
    "jax.lax",
    "jax.tree",
    "jax.tree_util",
    "jax.monitoring",
    "pytest",
    "_pytest.reports",
    "_pytest.runner",
    "_pytest.python",
    "_pytest.outcomes",
    "pluggy",
    "pluggy._callers",
    "pluggy._hooks",
    "pluggy._manager",
)
WATCHED_PREFIXES = ("kata.", "test_")


def _watched_modules() -> list[tuple[str, ModuleType]]:
    return [
        (name, module)
        for name, module in list(sys.modules.items())
        if isinstance(module, ModuleType)
        and (name in WATCHED or name.startswith(WATCHED_PREFIXES))
        and not name.startswith("kata_learner_")
    ]


def _is_function_like(value: object) -> bool:
    return callable(value) or isinstance(value, (classmethod, staticmethod))


@dataclass(frozen=True)
class _Namespace:
    """A module's or class's attributes: the live mapping, and its functions as they were.

    Comparing against the live mapping needs no copy and no names until something differs
    (measured: ~4,000 entries taken in ~4 ms, compared in ~1 ms after every reply: 0.35 ms
    the names, the rest what each of ~1,400 Python functions runs with).
    """

    label: str
    live: Mapping[str, object]
    functions: dict[str, object]
    # Each Python function among them, and what it runs with (`_insides`), as it was.
    insides: list[tuple[str, FunctionType, tuple[object, ...]]]

    def changed(self) -> list[str]:
        replaced = [name for name, was in self.functions.items() if self.live.get(name) is not was]
        edited = [
            name
            for name, fn, (code, defaults, keywords, rest) in self.insides
            if fn.__code__ is not code
            or fn.__defaults__ is not defaults
            or fn.__kwdefaults__ is not keywords
            or (rest and not _same(_insides(fn)[3], rest))
        ]
        return [f"{self.label}.{name}" for name in sorted(set(replaced + edited))]


def _python_function(value: object) -> FunctionType | None:
    function = getattr(value, "__func__", value)  # classmethod, staticmethod
    return function if isinstance(function, FunctionType) else None


def _insides(function: FunctionType) -> tuple[object, object, object, tuple[object, ...]]:
    """What a Python function runs with besides its name, each of which can be replaced in
    place, the function object staying the same (`f.__code__ = g.__code__` made kata's own
    `observed` pass a check): its code, defaults, keyword defaults, and those defaults'
    values and what its closure's cells hold."""
    cells = []
    for cell in function.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            cells.append(None)
    keywords = function.__kwdefaults__
    values = tuple(keywords.values()) if keywords else ()
    return (function.__code__, function.__defaults__, keywords, (*values, *cells))


def _same(now: tuple[object, ...], was: tuple[object, ...]) -> bool:
    return len(now) == len(was) and all(a is b for a, b in zip(now, was, strict=True))


@dataclass(frozen=True)
class _Listeners:
    """JAX's monitoring listeners (kata.learner_side.compile_counts counts compilations with one): a
    list cleared, replaced or added to (a listener after kata's can empty its counts)."""

    lists: dict[str, tuple[list[object], tuple[object, ...]]]

    @classmethod
    def take(cls) -> _Listeners:
        from jax._src import monitoring

        names = [n for n in vars(monitoring) if n.startswith("_") and n.endswith("_listeners")]
        return cls({n: (getattr(monitoring, n), tuple(getattr(monitoring, n))) for n in names})

    def changed(self) -> list[str]:
        from jax._src import monitoring

        return [
            f"jax.monitoring.{name.strip('_')}"
            for name, (was, items) in self.lists.items()
            if getattr(monitoring, name, None) is not was or tuple(was) != items
        ]


_CODE, _DEFAULTS, _KEYWORDS = (
    attrgetter("__code__"),
    attrgetter("__defaults__"),
    attrgetter("__kwdefaults__"),
)
_CONTENTS = attrgetter("cell_contents")


@dataclass(frozen=True)
class _AllAtOnce:
    """Everything the namespaces compare, laid flat, for loops that run in C: whether
    all of it is as it was, in a third of the time (measured over ~4,900 names and ~1,800
    Python functions, 08's checks loaded: 1.5 ms of CPU for `_Namespace.changed` over all
    of them, 0.56 ms here; 1.6 and 0.6 ms on a TPU VM under gVisor). Every reply pays it,
    and where the CPU clocks do not tick the judge's wall clock tells a call that compiled
    nothing by how soon its reply came (kata.learner_side.compile_counts.
    FASTEST_COMPILATION_SECONDS). It only ever says "nothing changed": where anything may
    differ, the namespaces name what did, one by one."""

    # Each name bound, by the type of its namespace (a module's dict, a class's proxy),
    # whose own C `get` reads it: that namespace once per name, the names, what they held.
    bindings: tuple[
        tuple[Any, tuple[Mapping[str, object], ...], tuple[str, ...], tuple[object, ...]], ...
    ]
    functions: tuple[FunctionType, ...]
    codes: tuple[object, ...]
    defaults: tuple[object, ...]
    keywords: tuple[object, ...]
    # The functions' keyword defaults that are dicts, how many each held, and their values.
    keyword_dicts: tuple[dict[str, object], ...]
    keyword_counts: tuple[int, ...]
    keyword_values: tuple[object, ...]
    # The cells of their closures that were filled, what they held, and those that were not.
    cells: tuple[CellType, ...]
    contents: tuple[object, ...]
    empty_cells: tuple[CellType, ...]

    @classmethod
    def of(cls, namespaces: list[_Namespace]) -> _AllAtOnce:
        kinds: dict[type, list[tuple[Mapping[str, object], str, object]]] = {}
        for namespace in namespaces:
            for name, value in namespace.functions.items():
                live = namespace.live
                kinds.setdefault(type(live), []).append((live, name, value))
        bindings = tuple(
            (kind.get, *(tuple(column) for column in zip(*entries, strict=True)))
            for kind, entries in kinds.items()
        )
        insides = [entry for n in namespaces for entry in n.insides]
        keyword_dicts = tuple(d for _, _, (_, _, d, _) in insides if d is not None)
        cells, contents, empty = [], [], []
        for _, function, _ in insides:
            for cell in function.__closure__ or ():
                try:
                    contents.append(cell.cell_contents)
                    cells.append(cell)
                except ValueError:  # not filled yet
                    empty.append(cell)
        return cls(
            bindings,
            tuple(function for _, function, _ in insides),
            tuple(code for _, _, (code, _, _, _) in insides),
            tuple(defaults for _, _, (_, defaults, _, _) in insides),
            tuple(keywords for _, _, (_, _, keywords, _) in insides),
            keyword_dicts,
            tuple(map(len, keyword_dicts)),
            tuple(chain.from_iterable(d.values() for d in keyword_dicts)),
            tuple(cells),
            tuple(contents),
            tuple(empty),
        )

    def unchanged(self) -> bool:
        """Every name bound to what it was, and every function running with what it ran
        with: its code, defaults and keyword defaults (those dicts holding the same values,
        in order) and its closure's cells (those filled, what they held; the others, none)."""
        try:
            return (
                all(
                    all(map(is_, map(get, lives, names), bound))
                    for get, lives, names, bound in self.bindings
                )
                and all(map(is_, map(_CODE, self.functions), self.codes))
                and all(map(is_, map(_DEFAULTS, self.functions), self.defaults))
                and all(map(is_, map(_KEYWORDS, self.functions), self.keywords))
                and tuple(map(len, self.keyword_dicts)) == self.keyword_counts
                and all(
                    map(
                        is_,
                        chain.from_iterable(map(dict.values, self.keyword_dicts)),
                        self.keyword_values,
                    )
                )
                and all(map(is_, map(_CONTENTS, self.cells), self.contents))
                and not any(map(_filled, self.empty_cells))
            )
        except ValueError:  # a cell emptied since
            return False


def _filled(cell: CellType) -> bool:
    try:
        _ = cell.cell_contents  # an empty cell raises
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Fingerprint:
    # The objects themselves, not their ids: a replaced function kept alive here cannot
    # have its id reused by the one that replaced it.
    namespaces: list[_Namespace]
    listeners: _Listeners
    all_at_once: _AllAtOnce

    @classmethod
    def take(cls) -> Fingerprint:
        namespaces = []
        for name, module in _watched_modules():
            members = vars(module)
            namespaces.append(_namespace(name, members))
            for value in list(members.values()):
                if isinstance(value, type) and value.__module__ == module.__name__:
                    namespaces.append(_namespace(f"{name}.{value.__name__}", vars(value)))
        return cls(namespaces, _Listeners.take(), _AllAtOnce.of(namespaces))

    def changed(self) -> list[str]:
        """The watched names now bound to another object than when the fingerprint was
        taken, or gone; names added since (lazy imports) do not count."""
        listeners = self.listeners.changed()
        if self.all_at_once.unchanged():
            return sorted(listeners)
        names = [name for namespace in self.namespaces for name in namespace.changed()]
        return sorted(names + listeners)


def _namespace(label: str, members: Mapping[str, object]) -> _Namespace:
    functions = {k: v for k, v in list(members.items()) if _is_function_like(v)}
    python = [(k, f) for k, v in functions.items() if (f := _python_function(v)) is not None]
    return _Namespace(label, members, functions, [(k, f, _insides(f)) for k, f in python])
