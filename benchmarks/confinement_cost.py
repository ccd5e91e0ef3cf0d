"""What confining learner code costs per graded run, warm and cold, in one run.

Grades 01_immutability's reference solution N times (default 20) each way: confined
(Landlock rules, file-size cap) and unconfined (`Limits(confined=False)`), interleaved so
the machine's load falls on both alike, on the warm worker and cold; medians, with the
first round dropped. Also times the confinement call itself (building the policy and
restricting a process), in forked children, since a restriction cannot be undone.
Usage: python benchmarks/confinement_cost.py [--runs 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from measure import REPO

sys.path.insert(0, str(REPO))
from kata.course import load_course  # noqa: E402
from kata.isolation import confinement
from kata.results import DEFAULT_LIMITS  # noqa: E402
from kata.servers import warm  # noqa: E402
from kata.supervisor.judge_process import grading_environment  # noqa: E402
from kata.supervisor.runner import grade  # noqa: E402


def confine_call_seconds(runs: int) -> float:
    """Median time of policy + restriction in a fresh child, as a warm run pays it."""
    confinement.grading_policy([], [])  # the worker finds what every policy shares once
    timings = []
    for _ in range(runs):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            started = time.perf_counter()
            confinement.confine(confinement.grading_policy([str(REPO)], [tempfile.gettempdir()]))
            os.write(write, str(time.perf_counter() - started).encode())
            os._exit(0)
        os.close(write)
        timings.append(float(os.read(read, 64)))
        os.close(read)
        os.waitpid(pid, 0)
    return statistics.median(timings)


def graded_run_seconds(runs: int) -> dict[str, float]:
    course = load_course(REPO)
    exercise = [course.resolve("01")]
    limits = {True: DEFAULT_LIMITS, False: dataclasses.replace(DEFAULT_LIMITS, confined=False)}
    timings: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        socket_path = Path(scratch) / "w.sock"
        env = grading_environment(course.state_dir)
        warm.start_worker(socket_path, course.root, env)
        assert warm.wait_for_worker(socket_path)
        try:
            for _ in range(runs + 1):
                grader = warm.WarmGrader(socket_path, course.root, env)
                for mode, on in (("warm", grader), ("cold", None)):
                    for confined in (True, False):
                        time.sleep(0.3)  # the spare gets ready, as between a learner's saves
                        started = time.perf_counter()
                        result = grade(
                            course, exercise, course.solutions_dir, limits[confined], warm=on
                        )
                        key = f"{mode} {'confined' if confined else 'unconfined'}"
                        timings.setdefault(key, []).append(time.perf_counter() - started)
                        assert result.passed, key
        finally:
            warm.stop_worker(socket_path)
    return {key: statistics.median(values[1:]) for key, values in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    print(f"confinement here: {confinement.describe()}")
    print(f"  the confine call itself: {confine_call_seconds(runs) * 1e3:.2f} ms (median)")
    medians = graded_run_seconds(runs)
    for mode in ("warm", "cold"):
        confined, unconfined = medians[f"{mode} confined"], medians[f"{mode} unconfined"]
        print(
            f"  {mode}: confined {confined * 1e3:.0f} ms, unconfined {unconfined * 1e3:.0f} ms: "
            f"{(confined - unconfined) * 1e3:+.1f} ms "
            f"({(confined / unconfined - 1) * 100:+.1f}%), median of {runs}"
        )


if __name__ == "__main__":
    main()
