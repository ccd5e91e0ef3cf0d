"""Grading a class: submissions per minute with --jobs 1 and --jobs 2, and the speedup;
then the class report's cost on 200 submissions' results (synthetic, no regrading).

Builds N synthetic submissions (default 40) of all 8 exercises — a mix of reference
solutions and stubs, as a real class hands in — and grades them with `kata grade`.
Usage: python benchmarks/grade_throughput.py [--submissions 40] [--report-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import REPO

from kata.instructor import class_report, gradebook

REPORT_SUBMISSIONS = 200
REPORT_BUDGET_SECONDS = 2.0


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


def synthetic_entry(n: int) -> dict:
    """A gradebook entry shaped like the real course's: 8 exercises of 4 checks, some
    failing with a diagnosis and a long message, timed checks with a speedup."""
    exercises = {}
    for e in range(8):
        checks = []
        for c in range(4):
            passed = (n + e + c) % 3 != 0
            checks.append({
                "name": f"check {c} of exercise {e}", "task": f"task{c % 2}",
                "outcome": "passed" if passed else "failed",
                "score": 0.25 if passed else 0.0, "max": 0.25, "speed": c == 3,
                "speedup": float(5 + (n * 7 + e) % 40) if c == 3 else None,
                "diagnosis": None if passed else f"diagnosis {(n + c) % 12} <of> a mistake",
                "message": "" if passed else "AssertionError: " + "x" * 500,
            })  # fmt: skip
        score = sum(c["score"] for c in checks)
        exercises[f"0{e + 1}_ex"] = {"score": score, "max": 1.0, "concept": "c", "note": None,
                                     "checks": checks}  # fmt: skip
    total = sum(e["score"] for e in exercises.values())
    return {"submission": f"student{n:03d}", "total": total, "max": 8.0, "seconds": 60.0,
            "notes": [], "exercises": exercises}  # fmt: skip


def report_seconds(count: int) -> float:
    """The class numbers, the HTML page and the JSON gradebook for `count` submissions."""
    entries = [synthetic_entry(n) for n in range(count)]
    started = time.perf_counter()
    page = class_report.render_html(class_report.class_numbers(entries))
    document = json.dumps(gradebook.gradebook_document(entries))
    taken = time.perf_counter() - started
    assert page and document
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=40)
    parser.add_argument("--report-only", action="store_true", help="Only time the report.")
    arguments = parser.parse_args()
    taken = report_seconds(REPORT_SUBMISSIONS)
    verdict = "within" if taken < REPORT_BUDGET_SECONDS else "OVER"
    print(
        f"class report of {REPORT_SUBMISSIONS} submissions: {taken * 1000:.0f} ms "
        f"({verdict} the {REPORT_BUDGET_SECONDS:g} s budget)"
    )
    if arguments.report_only:
        sys.exit(0 if taken < REPORT_BUDGET_SECONDS else 1)
    count = arguments.submissions
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
