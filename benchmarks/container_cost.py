"""What a run's container (kata.isolation.container) costs: set-up and tear-down per run.

Side by side, interleaved so the machine's load falls on both alike, N times (default 30):
- **bare**: what a run without a container does: fork the judge, it exits, wait for it;
- **container**: `enter` with a run's Spec (a cgroup with memory and process caps; user,
  PID, IPC, network and mount namespaces; /tmp, /var/tmp and /run emptied but for what the
  run uses; a tmpfs scratch; the submission and checks read-only; the solutions hidden),
  the judge's `settle` (mounts, capabilities dropped), then `Supervisor.wait` (the PID
  namespace emptied, the cgroup removed).
Each in a forked child of this process: a process with threads cannot enter a user
namespace. Medians, first round dropped. With `--cold N`, also N cold checks of 01's
reference each way (`KATA_CONTAINER_WITHOUT=all` for none): what a learner waits.
Usage: python benchmarks/container_cost.py [--runs 30] [--cold 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from measure import REPO

sys.path.insert(0, str(REPO))
from kata.isolation import confinement, container  # noqa: E402


def one_run(spec: container.Spec | None) -> float:
    """Seconds from building the run (or a bare fork) to knowing that nothing of it is left."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # single-threaded, as the sandbox and the warm worker's spare are
        os.close(read)
        started = time.perf_counter()
        if spec is None:
            judge = os.fork()
            if judge == 0:
                os._exit(0)
            os.waitpid(judge, 0)
        else:
            supervisor = container.enter(spec)
            if supervisor is None:
                container.settle(spec)
                os._exit(0)
            supervisor.wait()
        os.write(write, str(time.perf_counter() - started).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        seconds = float(pipe.read())
    os.waitpid(child, 0)
    return seconds


def set_up_and_tear_down(runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        spec = container.Spec(
            memory_bytes=6 * 2**30,
            scratch=scratch,
            read_only=(str(REPO / "exercises"), str(REPO / "checks")),
            hidden=(str(REPO / "solutions"),),
            visible=(str(REPO / "exercises"), str(REPO / "checks"), scratch),
        )
        timings: dict[str, list[float]] = {"bare": [], "container": []}
        for _ in range(runs + 1):
            timings["bare"].append(one_run(None))
            timings["container"].append(one_run(spec))
    return {name: statistics.median(values[1:]) for name, values in timings.items()}


def cold_checks(runs: int) -> dict[str, float]:
    command = [sys.executable, "-m", "kata", "check", "01", "--solutions", "--cold"]
    timings: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(runs + 1):
        for name, without in (("without", "all"), ("with", "")):
            env = os.environ | {container.WITHOUT_VARIABLE: without}
            started = time.perf_counter()
            subprocess.run(command, cwd=REPO, env=env, capture_output=True, check=True)
            timings[name].append(time.perf_counter() - started)
    return {name: statistics.median(values[1:]) for name, values in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cold", type=int, default=0)
    options = parser.parse_args()
    confinement.grading_policy([], [])
    print(f"layers: {container.describe()}")
    medians = set_up_and_tear_down(options.runs)
    contained, bare = medians["container"] * 1e3, medians["bare"] * 1e3
    print(
        f"set-up + tear-down, median of {options.runs}: container {contained:.1f} ms, "
        f"bare fork {bare:.1f} ms: +{contained - bare:.1f} ms per run"
    )
    if options.cold:
        cold = cold_checks(options.cold)
        print(
            f"cold `kata check 01 --solutions`, median of {options.cold}: "
            f"{cold['with']:.2f} s with the container, {cold['without']:.2f} s without"
        )


if __name__ == "__main__":
    main()
