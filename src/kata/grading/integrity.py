"""Noticing a submission that rewrites the grader's own functions to forge its verdict.

The checks run in the same process as the learner's module, so a submission can replace
`numpy.allclose`, pytest's report machinery or a check's assertion helpers and pass every
check. Before the learner's module is imported, `Fingerprint.take` records the identity of
every function and class attribute of the modules a verdict depends on; `changed` names
what differs afterwards, and the plugin fails the check with that name. This makes those
forgeries evident; it cannot stop code that edits the plugin's own data in memory, which
only a separate process can.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import ModuleType

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


def _entries(module_name: str, module: ModuleType) -> dict[str, object]:
    found = {}
    for name, value in list(vars(module).items()):
        if callable(value):
            found[f"{module_name}.{name}"] = value
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attribute, member in list(vars(value).items()):
                if callable(member) or isinstance(member, (classmethod, staticmethod)):
                    found[f"{module_name}.{name}.{attribute}"] = member
    return found


@dataclass(frozen=True)
class Fingerprint:
    # The objects themselves, not their ids: a replaced function kept alive here cannot
    # have its id reused by the one that replaced it.
    identities: dict[str, object]

    @classmethod
    def take(cls) -> Fingerprint:
        identities: dict[str, object] = {}
        for name, module in _watched_modules():
            identities.update(_entries(name, module))
        return cls(identities)

    def changed(self) -> list[str]:
        """The watched names now bound to another object than when the fingerprint was
        taken, or gone; names added since (lazy imports) do not count."""
        now = Fingerprint.take().identities
        return sorted(name for name, was in self.identities.items() if now.get(name) is not was)
