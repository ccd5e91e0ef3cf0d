"""The versions kata runs on: the ranges its installed metadata declares, and whether what is
installed here falls in them.

The ranges are pyproject.toml's, read back from the installed distribution (one copy): a
JAX below the floor cannot load the checks (JAX 0.4.30 lacks `jax.tree_util.KeyPath`), and
grading on it would fail every learner's file for the course's fault. `kata doctor` names
each package outside its range, and the grading commands refuse to start on one.
"""

from __future__ import annotations

from dataclasses import dataclass

# The name kata is installed under (pyproject.toml).
DISTRIBUTION = "kata-jax"


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


class UnsupportedVersions(Exception):
    """Grading would run on packages outside the declared ranges (one line)."""


def require_supported() -> None:
    """Raise UnsupportedVersions, naming the first package outside its range and how many
    more there are, before any grading starts on them."""
    wrong = unsupported()
    if wrong:
        more = f" (and {len(wrong) - 1} more: `kata doctor` lists them)" if len(wrong) > 1 else ""
        raise UnsupportedVersions(f"cannot grade here: {wrong[0].problem()}{more}")
