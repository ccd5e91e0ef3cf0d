"""Grading a class: submissions per minute with --jobs 1 and --jobs 2, and the speedup;
then the class report's cost on 200 submissions' results (synthetic, no regrading).

Builds N submissions (default 40) of every exercise of the course, mixed as a real class
hands them in: a quarter all solved, a quarter untouched stubs, a quarter part-way (the
first exercises solved, the rest stubs), a quarter broken (each exercise one of the known
wrong answers in tests/mistakes/, one file that does not parse, one that calls
`sys.exit`). Grades them with `kata grade --jobs 1` and `--jobs 2`, the class's order
shuffled the same way for both, each on a fresh copy of the course's compilation cache
(what the course's own runs put there: a class's runs may read it, never add to it).
Usage: python benchmarks/grade_throughput.py [--submissions 40] [--report-only]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import REPO, machine_cpu_seconds

from kata.course import load_course
from kata.instructor import class_report, gradebook
from kata.supervisor.judge_process import grading_environment

REPORT_SUBMISSIONS = 200
REPORT_BUDGET_SECONDS = 2.0


def wrong_answers() -> dict[str, list[str]]:
    """Per exercise, the reference with each known wrong answer in it (tests/mistakes/)."""
    found = {}
    for path in sorted((REPO / "tests" / "mistakes").glob("*.py")):
        reference = (REPO / "solutions" / path.name).read_text()
        listed = runpy.run_path(str(path)).get("MISTAKES", [])
        found[path.stem] = [reference + "\n" + entry["code"] for entry in listed]
    return found


def make_class(root: Path, count: int) -> list[Path]:
    exercises = sorted(path.name for path in (REPO / "solutions").glob("*.py"))
    broken = wrong_answers()
    paths = []
    for n in range(count):
        folder = root / f"student{n:03d}"
        folder.mkdir(parents=True)
        kind = n % 4
        for index, name in enumerate(exercises):
            stem = name.removesuffix(".py")
            solved = (REPO / "solutions" / name).read_text()
            stub = (REPO / "exercises" / name).read_text()
            if kind == 0:
                text = solved
            elif kind == 1:
                text = stub
            elif kind == 2:
                text = solved if index < n % len(exercises) else stub
            elif index == n % len(exercises):
                text = "def broken(:\n"  # does not parse
            elif index == (n + 1) % len(exercises):
                text = "import sys\nsys.exit(3)\n"
            else:
                choices = broken.get(stem) or [stub]
                text = choices[n % len(choices)]
            (folder / name).write_text(text)
        paths.append(folder)
    random.Random(0).shuffle(paths)
    return paths


def grade_seconds(
    paths: list[Path], jobs: int, out: Path, cache: Path
) -> tuple[float, float | None]:
    """Wall seconds of `kata grade --jobs N` over `paths`, and the CPU seconds the machine
    spent meanwhile (None where it cannot tell)."""
    env = os.environ | {"JAX_COMPILATION_CACHE_DIR": str(cache)}
    cpu_before = machine_cpu_seconds()
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kata", "grade", *map(str, paths), "--out", str(out),
         "--jobs", str(jobs)],
        cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wall = time.perf_counter() - started
    cpu_after = machine_cpu_seconds()
    cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
    return wall, cpu


def course_cache_copy(into: Path) -> Path:
    """A copy of the compilation cache the course's own runs filled (empty if none yet)."""
    env = grading_environment(load_course(REPO).state_dir)
    cache = Path(env["JAX_COMPILATION_CACHE_DIR"])
    if cache.is_dir():
        shutil.copytree(cache, into)
    else:
        into.mkdir()
    return into


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
                "measurements": {"speedup": float(5 + (n * 7 + e) % 40)} if c == 3 else {},
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
    exercises = len(list((REPO / "solutions").glob("*.py")))
    with tempfile.TemporaryDirectory() as folder:
        paths = make_class(Path(folder) / "class", count)
        seconds, cores = {}, {}
        for jobs in (1, 2):
            cache = course_cache_copy(Path(folder) / f"cache{jobs}")
            taken, cpu = grade_seconds(paths, jobs, Path(folder) / f"g{jobs}.csv", cache)
            seconds[jobs], cores[jobs] = taken, cpu / taken if cpu is not None else None
    for jobs, taken in seconds.items():
        busy = f", {cores[jobs]:.2f} cores busy" if cores[jobs] is not None else ""
        print(
            f"--jobs {jobs}: {count} submissions × {exercises} exercises in {taken:.0f} s, "
            f"{count / taken * 60:.1f} submissions per minute{busy}"
        )
    print(f"speedup of --jobs 2 over --jobs 1: {seconds[1] / seconds[2]:.2f}×")
    if cores[1]:
        # One grading alone already keeps `cores[1]` cores busy (judge and learner's process
        # compute at once, JAX on threads of its own): with the same work, two jobs on this
        # machine's cores can be at most this much faster.
        most = (os.cpu_count() or 1) / max(cores[1], 1.0)
        print(f"the most --jobs 2 can gain here with the same work: {most:.2f}×")


if __name__ == "__main__":
    main()
