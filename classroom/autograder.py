#!/usr/bin/env python3
"""Classroom 50 autograder for the kata course.

Set-up (docs/instructors.md, "Classroom 50"): unzip the archive of `kata gradescope-bundle` into
CLASSROOM/autograders/ASSIGNMENT/ next to this file, so the engine, the course's checks
and the pinned requirements travel with the autograder and never with the student's
repository. Classroom 50's runner calls this script with the student's checkout as the
working folder; it grades the NN_name.py files found there (exercises/ first) and writes
./result.json in the `classroom50/result/v1` schema (each exercise a test, with what
`kata check` says of it as its message) and ./release-body.md, the body of the release the
runner publishes for the submission: the points, `kata check`'s verdict and its
explanation of every exercise not yet passing. Exit 0 whenever it graded (the score is in
result.json); anything else is an infrastructure error for the runner.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT = Path("result.json")
RELEASE_BODY = Path("release-body.md")


def install_requirements() -> None:
    """The bundle's pinned, CPU-only requirements, unless this Python has them already."""
    if all(importlib.util.find_spec(name) for name in ("jax", "click", "pytest_timeout")):
        return
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "-r", str(HERE / "requirements.txt")]
    subprocess.run(pip, check=True)


def main() -> int:
    if not (HERE / "engine" / "kata").is_dir() or not (HERE / "course").is_dir():
        print(
            "::error::the kata bundle is missing: unzip `kata gradescope-bundle`'s archive "
            f"into {HERE}",
            file=sys.stderr,
        )
        return 1
    install_requirements()
    env = {**os.environ, "PYTHONPATH": str(HERE / "engine"), "KATA_COLD": "1"}
    student = Path.cwd() / "exercises"
    RELEASE_BODY.unlink(missing_ok=True)  # kata appends to it, as to a CI job summary
    with tempfile.TemporaryDirectory(prefix="kata-") as scratch:
        files = Path(scratch) / "files"
        kata = [sys.executable, "-m"]
        unpack = [
            "kata.instructor.gradescope",
            "unpack",
            str(HERE / "course"),
            str(student),
            str(files),
        ]
        subprocess.run(kata + unpack, env=env, check=True)
        check = ["kata", "--course", str(HERE / "course"), "check", "--cold", "--dir", str(files)]
        report = ["--format", "classroom50", "--out", str(RESULT), "--summary", str(RELEASE_BODY)]
        graded = subprocess.run(kata + check + report, env=env)
    return 0 if graded.returncode in (0, 1) and RESULT.is_file() else 1


if __name__ == "__main__":
    sys.exit(main())
