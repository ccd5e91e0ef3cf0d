"""`kata verify` on Colab's jax (0.7.2), the oldest jax the course promises to run on.

Makes a virtual environment (kept in a temporary folder), installs jax and jaxlib at the
version asked for and this checkout's kata beside them (not editable), and runs
`kata verify` on a copy of the course there: every stub fails, every solution passes.
It downloads jaxlib (~80 MB), so it is a script to run, not part of the test suite.
Measured: jax 0.7.2 with kata 0.1.0, the environment in 263 s, `kata verify` passed
(8 exercises, every stub fails each task, every solution passes) in 136 s.
Usage: python benchmarks/jax_compat.py [--jax 0.7.2]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import REPO

COURSE_PARTS = ("course.toml", "exercises", "solutions", "checks")


def run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    print("$", " ".join(str(c) for c in command), flush=True)
    return subprocess.run([str(c) for c in command], cwd=cwd, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jax", default="0.7.2", help="the jax and jaxlib version")
    version = parser.parse_args().jax
    with tempfile.TemporaryDirectory(prefix="kata-jax-compat-") as scratch:
        venv, course = Path(scratch) / "venv", Path(scratch) / "course"
        started = time.monotonic()
        run(sys.executable, "-m", "venv", venv)
        python = venv / "bin" / "python"
        # jax pinned in the same resolve as kata, so kata's own bounds must admit it.
        installed = run(
            python, "-m", "pip", "install", "-q", f"jax=={version}", f"jaxlib=={version}", REPO
        )
        if installed.returncode != 0:
            print(f"kata cannot be installed beside jax {version}")
            return 1
        print(f"environment ready in {time.monotonic() - started:.0f} s")
        run(
            python,
            "-c",
            "import jax, kata; print('jax', jax.__version__, 'kata', kata.__version__)",
        )
        course.mkdir()
        for part in COURSE_PARTS:
            copy = shutil.copytree if (REPO / part).is_dir() else shutil.copy
            copy(REPO / part, course / part)
        started = time.monotonic()
        verified = run(venv / "bin" / "kata", "verify", cwd=course)
        print(f"kata verify on jax {version}: exit {verified.returncode} "
              f"in {time.monotonic() - started:.0f} s")  # fmt: skip
        return verified.returncode


if __name__ == "__main__":
    sys.exit(main())
