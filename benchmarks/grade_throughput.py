"""Grading a class: submissions per minute with --jobs 1 and --jobs 2, and the speedup.

Builds N synthetic submissions (default 40) of all 8 exercises — a mix of reference
solutions and stubs, as a real class hands in — and grades them with `kata grade`.
Usage: python benchmarks/grade_throughput.py [--submissions 40]
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


def make_class(root: Path, count: int) -> list[Path]:
    paths = []
    exercises = sorted((REPO / "solutions").glob("*.py"))
    for n in range(count):
        folder = root / f"student{n:03d}"
        folder.mkdir(parents=True)
        for index, solution in enumerate(exercises):
            # Student n has solved the first (n % 9) exercises and left the rest as stubs.
            source = solution if index < n % 9 else REPO / "exercises" / solution.name
            shutil.copy(source, folder / solution.name)
        paths.append(folder)
    return paths


def grade_seconds(paths: list[Path], jobs: int, out: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kata", "grade", *map(str, paths), "--out", str(out),
         "--jobs", str(jobs)],
        cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=40)
    count = parser.parse_args().submissions
    with tempfile.TemporaryDirectory() as folder:
        paths = make_class(Path(folder) / "class", count)
        seconds = {
            jobs: grade_seconds(paths, jobs, Path(folder) / f"g{jobs}.csv") for jobs in (1, 2)
        }
    for jobs, taken in seconds.items():
        print(
            f"--jobs {jobs}: {count} submissions × 8 exercises in {taken:.0f} s, "
            f"{count / taken * 60:.1f} submissions per minute"
        )
    print(f"speedup of --jobs 2 over --jobs 1: {seconds[1] / seconds[2]:.2f}×")


if __name__ == "__main__":
    main()
