"""Robustness of the course's speed checks: no false failures, no false passes, under load.

For every check marked `speed`, runs it N times (default 30) on the reference solution and
on its eager wrong answers from tests/mistakes/, with a second process keeping
one core busy, and reports passes, the spread of measured ratios and the cost of a check.
Usage: python benchmarks/speed_checks.py [--runs 30] [--exercise 07_train_step]
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import REPO, one_core_busy

from kata.instructor.formats import SPEEDUP

# The eager wrong answers of tests/mistakes/ that each speed check must fail: the same
# code, never compiled.
EAGER_VARIANTS = {
    "02_jit": ("fast_fn is the eager slow_fn under another name",
               "fast_fn is a plain function that forgot jax.jit"),
    "07_train_step": ("no jit at all: the step runs op by op, like PyTorch eager",),
    "08_gotchas": ("fit without jit: the loop runs eagerly",),
}  # fmt: skip
SPEED_EXERCISES = tuple(EAGER_VARIANTS)


def variants(exercise: str) -> dict[str, str]:
    """The reference, and its eager wrong answers."""
    reference = (REPO / "solutions" / f"{exercise}.py").read_text()
    found = {"reference": reference}
    listed = runpy.run_path(str(REPO / "tests" / "mistakes" / f"{exercise}.py"))
    for entry in listed.get("MISTAKES", []):
        if entry["name"] in EAGER_VARIANTS[exercise]:
            found[entry["name"]] = reference + "\n" + entry["code"]
    return found


def run_variant(exercise: str, code: str, runs: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / f"{exercise}.py").write_text(code)
        log = Path(folder) / "log.jsonl"
        env = dict(
            os.environ,
            KATA_SOURCE=folder,
            KATA_REPEAT=str(runs),
            KATA_REPEAT_LOG=str(log),
            PYTHONPATH=str(Path(__file__).parent),
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                f"checks/test_{exercise}.py",
                "-p",
                "repeat_plugin",
                "-p",
                "no:cacheprovider",
                "-q",
                "-m",
                "speed",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def ratio(record: dict) -> float | None:
    for note in record["notes"]:
        if found := SPEEDUP.search(note):
            return float(found.group(1))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--exercise", action="append", choices=SPEED_EXERCISES)
    args = parser.parse_args()
    print(f"{args.runs} runs each, with a second process keeping one core busy")
    print(
        f"{'check':<44} {'variant':<52} {'passed':>7} {'ratio min/median/max':>22} {'s/check':>8}"
    )
    with one_core_busy():
        for exercise in args.exercise or SPEED_EXERCISES:
            for name, code in variants(exercise).items():
                records = run_variant(exercise, code, args.runs)
                for check in sorted({r["check"] for r in records}):
                    mine = [r for r in records if r["check"] == check]
                    ratios = sorted(r for r in map(ratio, mine) if r is not None)
                    spread = (
                        f"{ratios[0]:.1f}/{statistics.median(ratios):.1f}/{ratios[-1]:.1f}"
                        if ratios
                        else "-"
                    )
                    cost = statistics.median(r["seconds"] for r in mine) if mine else float("nan")
                    passed = sum(r["passed"] for r in mine)
                    print(
                        f"{exercise}::{check:<32} {name[:52]:<52} {passed:>3}/{len(mine):<3} "
                        f"{spread:>22} {cost:8.2f}"
                    )


if __name__ == "__main__":
    main()
