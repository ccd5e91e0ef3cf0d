"""The versions kata runs on: the ranges its installed metadata declares, and whether what is
installed here falls in them.

The ranges are pyproject.toml's, read back from the installed distribution (one copy): a
JAX below the floor cannot run the checks (JAX 0.4.30 lacks names they use, as
`jax.tree_util.KeyPath`, new in 0.4.33), and grading on it would fail every learner's file
for the course's fault. `kata doctor` names each package outside its range, and the grading
commands refuse to start on one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# The name kata is installed under (pyproject.toml).
DISTRIBUTION = "kata-jax"
# In the course's state folder: the environment last found in range.
VERIFIED_FILE = "versions-in-range"


def kata_requirements() -> list[str]:
    """kata's own dependencies, as its installed metadata lists them (no extras); none
    where kata runs from a folder on the path (the Gradescope bundle's engine), whose
    packages are pinned by the bundle instead."""
    from importlib.metadata import PackageNotFoundError, requires  # slow; only needed here

    try:
        listed = requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        listed = []
    return [r for r in listed if "extra ==" not in r]


@dataclass(frozen=True)
class Installed:
    """One of kata's dependencies: the range kata declares and the version installed here
    (None: not installed)."""

    name: str
    declared: str
    version: str | None

    @property
    def supported(self) -> bool:
        from packaging.specifiers import SpecifierSet

        return self.version is not None and SpecifierSet(self.declared).contains(
            self.version, prereleases=True
        )

    def problem(self) -> str:
        """What is wrong, in one line, with the command that puts it right."""
        wanted = f"{self.name}{self.declared}"
        if self.version is None:
            return f"{self.name} is not installed; kata needs {wanted}: pip install '{wanted}'"
        return (
            f"{self.name} {self.version} is outside the range this kata supports "
            f"({wanted}): pip install '{wanted}'"
        )


def dependencies() -> list[Installed]:
    """Each of kata's dependencies that applies to this Python, with its installed version."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement

    found = []
    for text in kata_requirements():
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            installed: str | None = version(requirement.name)
        except PackageNotFoundError:
            installed = None
        found.append(Installed(requirement.name, str(requirement.specifier), installed))
    return found


def unsupported() -> list[Installed]:
    """kata's dependencies installed here outside the ranges it declares (or missing)."""
    return [d for d in dependencies() if not d.supported]


# jaxlib before 0.6.0 (0.5.3 is kata's floor) reloads XLA:CPU programs from JAX's persistent
# compilation cache wrong: a fori_loop whose count is traced runs no turn at all, so a correct
# 09 failed three checks the second time it was graded. Measured: 0.5.3 wrong; 0.6.0, 0.6.2,
# 0.7.0 and 0.10.2 right (tests/test_floor.py grades 09 twice there).
CACHE_RELOADS_CORRECTLY_FROM = (0, 6, 0)
_JAXLIB_VERSION = re.compile(r'^_version = "(\d+)\.(\d+)\.(\d+)', re.MULTILINE)


@functools.cache
def jaxlib_version() -> tuple[int, ...] | None:
    """jaxlib's release, read from its version.py without importing it (JAX takes a second
    to import); None where jaxlib is not installed."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    try:
        found = _JAXLIB_VERSION.search((folder / "version.py").read_text(encoding="utf-8"))
    except OSError:
        return None
    return tuple(int(part) for part in found.groups()) if found else None


def compilation_cache_reloads_correctly(version: tuple[int, ...] | None = None) -> bool:
    """Whether the installed jaxlib (or `version`) runs what it reads back from JAX's
    persistent compilation cache as it compiled it."""
    version = version or jaxlib_version()
    return version is None or version >= CACHE_RELOADS_CORRECTLY_FROM


class UnsupportedVersions(Exception):
    """Grading would run on packages outside the declared ranges (one line)."""


def require_supported(state_dir: Path | None = None) -> None:
    """Raise UnsupportedVersions, naming the first package outside its range and how many
    more there are, before any grading starts on them.

    With `state_dir` (the course's), an environment found in range is remembered there
    until a folder Python imports from changes: reading the metadata and importing
    `packaging` cost ~33 ms of CPU, a tenth of a warm re-check.
    """
    remembered = state_dir / VERIFIED_FILE if state_dir is not None else None
    fingerprint = _environment_fingerprint()
    with contextlib.suppress(OSError):
        if remembered is not None and remembered.read_text() == fingerprint:
            return
    wrong = unsupported()
    if wrong:
        more = f" (and {len(wrong) - 1} more: `kata doctor` lists them)" if len(wrong) > 1 else ""
        raise UnsupportedVersions(f"cannot grade here: {wrong[0].problem()}{more}")
    with contextlib.suppress(OSError):
        if remembered is not None:
            remembered.parent.mkdir(parents=True, exist_ok=True)
            remembered.write_text(fingerprint)


def _environment_fingerprint() -> str:
    """What changes when a package is installed, upgraded or removed: the interpreter, and
    each folder on the import path with its modification time (installing or removing a
    package adds or removes a `*.dist-info` folder in it)."""
    parts = [sys.executable]
    for entry in filter(None, sys.path):
        try:
            parts.append(f"{entry}\t{os.stat(entry).st_mtime_ns}")
        except OSError:
            parts.append(entry)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
