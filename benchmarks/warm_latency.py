"""Re-check latency after a save, warm grader against cold, as a learner sees it.

Part 1, the library: grading the stubs and the reference solutions of 01_immutability and
07_train_step with and without the warm worker, median of N (default 20), with the
checks' own compute (the sum of their durations) shown so the grader's overhead can be
read off.
Part 2, `kata watch` as a learner runs it: save the file, then time until "checking…"
appears and until the verdict, warm (the default) and with --cold.
Usage: python benchmarks/warm_latency.py [--runs 20]
"""

from __future__ import annotations

import argparse
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from measure import REPO

sys.path.insert(0, str(REPO))
from kata.course import load_course  # noqa: E402
from kata.servers import warm as warm_grading  # noqa: E402
from kata.supervisor.judge_process import grading_environment  # noqa: E402
from kata.supervisor.runner import grade  # noqa: E402
from tests.conftest import clone_course  # noqa: E402


def library_latency(exercise_id: str, folder_name: str, runs: int) -> None:
    course = load_course(REPO)
    exercise = [course.resolve(exercise_id)]
    with tempfile.TemporaryDirectory() as scratch:
        socket_path = Path(scratch) / "w.sock"
        env = grading_environment(course.state_dir)
        warm_grading.start_worker(socket_path, course.root, env)
        warm_grading.wait_for_worker(socket_path)
        grader = warm_grading.WarmGrader(socket_path, course.root, env)
        try:
            timings: dict[str, list[float]] = {"cold": [], "warm": []}
            compute: dict[str, list[float]] = {"cold": [], "warm": []}
            for _ in range(runs + 1):  # the first round warms caches and is dropped
                for kind, on in (("cold", None), ("warm", grader)):
                    time.sleep(0.3)  # a learner's pause between saves: the spare gets ready
                    started = time.perf_counter()
                    result = grade(course, exercise, course.root / folder_name, warm=on)
                    timings[kind].append(time.perf_counter() - started)
                    compute[kind].append(sum(c.duration for c in result.results[0].checks))
        finally:
            warm_grading.stop_worker(socket_path)
    cold, warm = (statistics.median(timings[k][1:]) for k in ("cold", "warm"))
    checks = statistics.median(compute["warm"][1:])
    print(
        f"  {exercise_id} ({folder_name}): cold {cold:.2f} s, warm {warm:.2f} s "
        f"({cold / warm:.1f}× faster); the checks' own compute {checks:.2f} s, "
        f"so warm overhead {warm - checks:.2f} s"
    )


def watch_latency(exercise_id: str, runs: int, cold: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        course = clone_course(REPO, Path(folder) / "course")
        for earlier in sorted((course / "solutions").glob("*.py")):
            if earlier.stem < exercise_id:
                shutil.copy(earlier, course / "exercises" / earlier.name)
        target = course / "exercises" / f"{exercise_id}.py"
        stub = target.read_text()
        lines: queue.Queue[tuple[float, str]] = queue.Queue()
        watch = subprocess.Popen(
            [sys.executable, "-m", "kata", "watch", *(["--cold"] if cold else [])],
            cwd=course,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
        )

        def read() -> None:
            for line in watch.stdout:
                lines.put((time.perf_counter(), line))

        threading.Thread(target=read, daemon=True).start()

        def wait_for(text: str) -> float:
            while True:
                stamp, line = lines.get(timeout=300)
                if text in line:
                    return stamp

        try:
            wait_for("checks passed")
            time.sleep(2)
            to_checking, to_verdict = [], []
            for run in range(runs):
                saved = time.perf_counter()
                target.write_text(stub + f"\n# save {run}\n")
                to_checking.append(wait_for("checking") - saved)
                to_verdict.append(wait_for("checks passed") - saved)
                time.sleep(1.0)  # the learner reads the verdict
        finally:
            watch.terminate()
            watch.wait()
    kind = "cold" if cold else "warm"
    print(
        f"  kata watch {kind}, {exercise_id}: 'checking…' after "
        f"{statistics.median(to_checking) * 1000:.0f} ms, verdict after "
        f"{statistics.median(to_verdict):.2f} s (median of {runs})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    print(f"Grading the stub and the reference solution, median of {runs}:")
    for exercise in ("01_immutability", "07_train_step"):
        for folder_name in ("exercises", "solutions"):
            library_latency(exercise, folder_name, runs)
    print("Saving the stub in a running `kata watch`:")
    for exercise in ("01_immutability", "07_train_step"):
        for cold in (False, True):
            watch_latency(exercise, runs, cold)


if __name__ == "__main__":
    main()
