"""Small helpers the benchmarks share: timing whole commands, and keeping a core busy."""

from __future__ import annotations

import multiprocessing
import os
import statistics
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def time_command(command: Sequence[str], cwd: Path = REPO) -> float:
    """Wall seconds of one run of a command (its exit code does not matter)."""
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def interleaved_medians(commands: dict[str, Sequence[str]], rounds: int) -> dict[str, float]:
    """Median wall time of each command, run in turn round after round, after a warm-up."""
    for command in commands.values():
        time_command(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            times[name].append(time_command(command))
    return {name: statistics.median(values) for name, values in times.items()}


def machine_cpu_seconds() -> float | None:
    """CPU seconds every process on the machine has spent so far, all cores together
    (Linux's /proc/stat; None elsewhere): the difference across a command is what it kept
    busy, its grandchildren in other PID namespaces included, which its own rusage misses."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(field) for field in fields]
    busy = sum(ticks) - ticks[3] - ticks[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def _spin(stop: multiprocessing.synchronize.Event) -> None:
    while not stop.is_set():
        sum(range(10_000))


@contextmanager
def cores_busy(cores: int = 1) -> Iterator[None]:
    """Other processes keep `cores` cores busy, as other programs on a shared machine would."""
    stop = multiprocessing.Event()
    spinners = [
        multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(cores)
    ]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join(timeout=5)
