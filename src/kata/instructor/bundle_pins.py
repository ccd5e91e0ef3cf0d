"""The Gradescope bundle's pins: every package kata runs on, for each Python it may meet.

An autograder image's Python is whatever its base image has: Ubuntu 22.04 (Gradescope's
default) has 3.10, 24.04 has 3.12. `setup.sh` installs into a virtual environment of that
Python, from the package index alone, so `requirements.txt` pins the whole set of
packages (numpy, scipy, ml_dtypes and jaxlib are binary wheels) for each of them. The
table, bundle_pins.toml beside this file (its one home), is pip's own resolution of kata's
dependencies by each interpreter:

    python -m kata.instructor.bundle_pins /path/to/python3.10 /path/to/python3.12 ...

writes it again (it resolves with `pip install --dry-run --report`, installing nothing),
with JAX capped at the release installed where it runs, the one the course is tested on.
The highest JAX for Python 3.10 is 0.6.2 (jaxlib has no newer 3.10 wheels; every reference
solution passes on it, and the Gradescope test grades uploads on it). ml_dtypes stays
below 0.7 where 0.7 slows `import jax` (pyproject.toml).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from kata.course import tomllib
from kata.versions import kata_requirements

PINS_FILE = Path(__file__).with_name("bundle_pins.toml")
PINS: dict[str, tuple[str, ...]] = {
    python: tuple(pins) for python, pins in tomllib.loads(PINS_FILE.read_text()).items()
}


def resolve(python: str, requirements: list[str]) -> tuple[str, tuple[str, ...]]:
    """The Python version of interpreter `python` and pip's pins for `requirements` there."""
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    report = subprocess.run(
        [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        + ["--only-binary=:all:", "--report", "-", *requirements],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = json.loads(report)["install"]
    pins = sorted(
        (f"{item['metadata']['name']}=={item['metadata']['version']}" for item in installed),
        key=str.lower,
    )
    return version, tuple(pins)


def requirements_text(pins: dict[str, tuple[str, ...]], fallback: list[str]) -> str:
    """requirements.txt: each Python's pins under its own marker, and kata's own ranges
    (`fallback`) for a Python newer than any in the table."""
    lines = ["# Pinned per Python version (kata.instructor.bundle_pins); installed by setup.sh."]
    for version, pinned in sorted(pins.items(), key=lambda item: _version_key(item[0])):
        lines += [f'{pin}; python_version == "{version}"' for pin in pinned]
    newest = max(pins, key=_version_key)
    for requirement in fallback:
        spec, _, marker = requirement.partition(";")
        newer = f'python_version > "{newest}"'
        lines.append(f"{spec.strip()}; {newer}" + (f" and ({marker.strip()})" if marker else ""))
    return "\n".join(lines) + "\n"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def tested_caps() -> list[str]:
    """No JAX newer than the one installed here, which the course was tested with: pip
    would otherwise pin a release no check has run on (jax 0.12 for Python 3.12)."""
    from importlib.metadata import version

    return [f"{name}<={version(name)}" for name in ("jax", "jaxlib")]


def pins_text(pins: dict[str, tuple[str, ...]]) -> str:
    """bundle_pins.toml: each Python's pins as a list under its version."""
    lines = [
        "# The Gradescope bundle's pins, per Python: pip's own resolution of kata's",
        "# dependencies by each interpreter. Written by `python -m kata.instructor.bundle_pins",
        "# PYTHON...`; read by kata.instructor.bundle_pins (its docstring says how and why).",
        "",
    ]
    for version, pinned in pins.items():
        lines += [f'"{version}" = [', *(f'    "{pin}",' for pin in pinned), "]"]
    return "\n".join(lines) + "\n"


def main(pythons: list[str]) -> None:
    requirements = kata_requirements() + tested_caps()
    pins = dict(resolve(python, requirements) for python in pythons)
    PINS_FILE.write_text(pins_text(pins))
    print(f"wrote {PINS_FILE}: pins for Python {', '.join(pins)}")


if __name__ == "__main__":
    main(sys.argv[1:])
