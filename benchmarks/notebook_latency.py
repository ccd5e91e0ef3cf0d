"""A `%%kata 01` cell's latency in a Jupyter kernel against `kata check 01` from the shell.

Both grade the same file of a throwaway copy of the course on its warm grader, taking
turns round after round (medians of N after a warm-up round), so the difference is what
the notebook path adds: the kernel round trip, writing the cell to the file, rendering.
Measured (5 rounds, 2 shared cores at load ~13): the cell 1.61 s, `kata check` 4.71 s
(0.34×): the shell command pays a new Python and kata's imports on every run, the kernel
has them already; both ran on the warm grader (10 of 10 runs served).
Usage: python benchmarks/notebook_latency.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import start_new_kernel
from measure import REPO

sys.path.insert(0, str(REPO))
from kata.course import load_course  # noqa: E402
from kata.servers import warm  # noqa: E402
from kata.supervisor.judge_process import grading_environment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    os.environ.pop(warm.COLD_VARIABLE, None)
    with tempfile.TemporaryDirectory() as scratch:
        course = Path(scratch) / "course"
        course.mkdir()
        for part in ("course.toml", "exercises", "solutions", "checks"):
            copy = shutil.copytree if (REPO / part).is_dir() else shutil.copy
            copy(REPO / part, course / part)
        cell = "%%kata 01\n" + (course / "exercises" / "01_immutability.py").read_text()
        manager, client = start_new_kernel(kernel_name="python3", cwd=str(course))
        socket = warm.worker_socket(course, grading_environment(load_course(course).state_dir))
        try:
            client.execute_interactive("%load_ext kata", timeout=60, output_hook=lambda m: None)
            times: dict[str, list[float]] = {"%%kata cell": [], "kata check": []}
            for round_number in range(runs + 1):  # round 0 starts the warm grader: dropped
                started = time.perf_counter()
                client.execute_interactive(cell, timeout=300, output_hook=lambda m: None)
                notebook_seconds = time.perf_counter() - started
                started = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "kata", "check", "01"],
                    cwd=course,
                    capture_output=True,
                )
                shell_seconds = time.perf_counter() - started
                if round_number:
                    times["%%kata cell"].append(notebook_seconds)
                    times["kata check"].append(shell_seconds)
                else:
                    warm.wait_for_worker(socket)
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
            served = warm.stop_worker(socket)
    cell_median, shell_median = (statistics.median(v) for v in times.values())
    print(f"01_immutability stub, warm grader ({served} runs served), medians of {runs}:")
    print(f"  %%kata cell in a kernel: {cell_median:.2f} s")
    print(f"  kata check from a shell: {shell_median:.2f} s")
    print(f"  ratio cell/shell: {cell_median / shell_median:.2f}")


if __name__ == "__main__":
    main()
