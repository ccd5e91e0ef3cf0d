"""Gradescope's `run_autograder` on every reference solution, held to Gradescope's defaults.

Builds the bundle for the real course, uploads all the reference solutions as one
submission and runs `run_autograder` as Gradescope would, pinned to one core (`taskset -c
0`; Gradescope's default is half a vCPU, so its wall time can be up to twice the CPU time
shown). Reports wall and CPU time, the score, and the peak resident memory of the whole
process tree (sampled every 50 ms), against Gradescope's 768 MB container limit.
Usage: python benchmarks/gradescope_run.py
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from measure import REPO

GRADESCOPE_SECONDS = 180  # the bound this course keeps (Gradescope's own limit is 10 min)
GRADESCOPE_MEMORY_MB = 768
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def tree_rss_bytes(root: int) -> dict[int, int]:
    """Resident memory of `root` and of every process descending from it, by pid."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid], rss[pid] = int(stat[1]), int(stat[21]) * PAGE_BYTES
    found, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        found[pid] = rss.get(pid, 0)
        frontier += [child for child, parent in parents.items() if parent == pid]
    return found


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="kata-gradescope-") as folder:
        root = Path(folder) / "autograder"
        (root / "source").mkdir(parents=True)
        archive = Path(folder) / "autograder.zip"
        subprocess.run(
            [sys.executable, "-m", "kata", "--course", str(REPO), "gradescope-bundle", archive],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with zipfile.ZipFile(archive) as bundle:
            bundle.extractall(root / "source")
        upload = root / "submission"
        upload.mkdir()
        solutions = sorted((REPO / "solutions").glob("[0-9][0-9]_*.py"))
        for solution in solutions:
            shutil.copy(solution, upload)
        env = os.environ | {"AUTOGRADER_ROOT": str(root), "KATA_PYTHON": sys.executable}
        command = ["taskset", "-c", "0", "bash", str(root / "source" / "run_autograder")]
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        peak = largest = 0
        while process.poll() is None:
            tree = tree_rss_bytes(process.pid)
            peak, largest = max(peak, sum(tree.values())), max(largest, *tree.values())
            time.sleep(0.05)
        wall = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        results = json.loads((root / "results" / "results.json").read_text())
    cpu = usage.ru_utime + usage.ru_stime
    tests = results.get("tests", [])
    passed = sum(test.get("status") == "passed" for test in tests)
    print(f"run_autograder on {len(solutions)} reference solutions, one core (taskset -c 0):")
    print(f"  wall {wall:.1f} s, CPU {cpu:.1f} s (bound: {GRADESCOPE_SECONDS} s)")
    print(f"  score {results.get('score')}, {passed} of {len(tests)} checks passed")
    print(
        f"  peak resident memory of the process tree: {peak / 2**20:.0f} MiB "
        f"(Gradescope's default container limit: {GRADESCOPE_MEMORY_MB} MB; pages shared "
        f"between processes count once there, twice here)"
    )
    print(f"  largest process: {largest / 2**20:.0f} MiB")
    for test in tests:
        if "speed" in test.get("tags", []):
            print(f"  {test['name']}: {test.get('extra_data', {})}")


if __name__ == "__main__":
    main()
