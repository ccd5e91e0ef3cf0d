"""Robustness of the course's timed checks: no false failures, no false passes, under load.

For every check marked `speed`, and for 10_debugging's check of `time_call`, runs it N
times (default 30) on the reference solution and on the answers from tests/mistakes/ that
only the timing tells apart (eager code; timing that forgets to wait, to warm up, or
returns a total; other right ways to time), with other processes keeping both cores busy,
and reports passes, the spread of measured ratios and the cost of a check.
Usage: python benchmarks/speed_checks.py [--runs 30] [--busy 2] [--exercise 07_train_step]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import REPO, cores_busy

# The answers of tests/mistakes/ each timed check runs against besides the reference: for
# the speed checks the same code never compiled, and the slowest right ones (a jit built
# anew in every call, ~100 µs of Python a call more); for time_call other right ways too.
TIMED_VARIANTS = {
    "02_jit": ("fast_fn is the eager slow_fn under another name",
               "fast_fn is a plain function that forgot jax.jit",
               "a plain function calling jax.jit(slow_fn); lax.cond; static_argnames"),
    "07_train_step": ("no jit at all: the step runs op by op, like PyTorch eager",
                      "step as a plain function calling jax.jit(_sgd_step) on every call"),
    "08_gotchas": ("fit without jit: the loop runs eagerly",
                   "fit calling jax.jit(_plain_step) in each step, losses as Python floats"),
    "10_debugging": ("time.time() around one call: no warm-up, no wait",
                     "warmed up, but never waits for the result",
                     "waits, but the mean of 3 calls includes the compiling one",
                     "the total of 10 calls, not the time of one",
                     "time_call calls fn 3 times, waited, and returns a fixed time",
                     "time_call: the minimum of 7 waited calls after a warm-up",
                     "time_call: the median of 5 waited calls, the compiling one among them",
                     "time_call: exactly 3 waited calls on time.monotonic, no warm-up, the median"),
}  # fmt: skip
SPEED_EXERCISES = tuple(TIMED_VARIANTS)
# How pytest picks each exercise's timed check: the `speed` marker, or time_call's by name.
SELECTION = {"10_debugging": ("-k", "time_call")}
# time_call's check notes "ratio 1.02;" (learner's time over the careful one).
TIME_RATIO = re.compile(r"ratio (\d+(?:\.\d+)?(?:e[+-]?\d+)?);")


def variants(exercise: str) -> dict[str, str]:
    """The reference, and the answers its timed check is run against."""
    reference = (REPO / "solutions" / f"{exercise}.py").read_text()
    found = {"reference": reference}
    listed = runpy.run_path(str(REPO / "tests" / "mistakes" / f"{exercise}.py"))
    for entry in listed.get("MISTAKES", []) + listed.get("CORRECT", []):
        if entry["name"] in TIMED_VARIANTS[exercise]:
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
            # As the grader runs checks: compiled programs persist across runs.
            JAX_COMPILATION_CACHE_DIR=str(Path(folder) / "jax-cache"),
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
            JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                f"checks/test_{exercise}.py",
                "-p",
                "repeat_plugin",
                # One process, without the suite's own options (pytest-xdist's workers).
                "-o",
                "addopts=-p no:cacheprovider",
                "-q",
                *SELECTION.get(exercise, ("-m", "speed")),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        if not log.exists():
            raise SystemExit(f"{exercise}: the checks ran no timed check\n{done.stdout[-2000:]}")
        return [json.loads(line) for line in log.read_text().splitlines()]


def ratio(record: dict) -> float | None:
    if record["speedup"] is not None:
        return record["speedup"]
    for note in record["notes"]:
        if found := TIME_RATIO.search(note):
            return float(found.group(1))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--exercise", action="append", choices=SPEED_EXERCISES)
    parser.add_argument("--busy", type=int, default=2, help="cores kept busy meanwhile")
    args = parser.parse_args()
    print(f"{args.runs} runs each, with {args.busy} other processes keeping a core busy each")
    print(
        f"{'check':<44} {'variant':<52} {'passed':>7} {'ratio min/median/max':>22} {'s/check':>8}"
    )
    with cores_busy(args.busy):
        for exercise in args.exercise or SPEED_EXERCISES:
            for name, code in variants(exercise).items():
                records = run_variant(exercise, code, args.runs)
                for check in sorted({r["check"] for r in records}):
                    mine = [r for r in records if r["check"] == check]
                    ratios = sorted(r for r in map(ratio, mine) if r is not None)
                    spread = (
                        f"{ratios[0]:.3g}/{statistics.median(ratios):.3g}/{ratios[-1]:.3g}"
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
