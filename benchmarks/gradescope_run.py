"""Gradescope's `run_autograder` on one upload of the real course, held to Gradescope's defaults.

Builds the bundle for the real course, uploads all the reference solutions as one
submission (or, with --upload, the stubs, or the solutions with one broken, oversized or
leaking memory, or zipped) and runs `run_autograder` as Gradescope would, pinned to one
core (`taskset -c 0`). Reports wall and CPU time, the score, and the peak resident memory
of the whole process tree (sampled every 50 ms), against Gradescope's 768 MB container limit.

With `--gradescope-limits` (root, cgroup v1 or v2 with the cpu and memory controllers) the
run is also held to Gradescope's defaults as a container would be: half a CPU and 768 MB of
memory, counted the kernel's way (shared pages once, page cache included).
Also reports the peak of what kata itself caps (the processes' own memory). Run it with the
image's interpreter to measure there: PYTHONPATH=src python3.10 benchmarks/gradescope_run.py.
Usage: python benchmarks/gradescope_run.py [--gradescope-limits]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from measure import REPO

from kata.instructor.gradescope import RESIDENT_LIMIT_MIB
from kata.supervisor.memory import tree_held_bytes

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


GRADESCOPE_CPU_SHARE = 0.5
CGROUP_NAME = "kata-gradescope-run"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Cgroup:
    """Where a process joins (one procs file per hierarchy) and where memory is counted."""

    procs: tuple[Path, ...]
    memory: Path

    def join(self) -> None:
        for procs in self.procs:
            procs.write_text(str(os.getpid()))

    def peak_bytes(self) -> int:
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            if (self.memory / name).exists():
                return int((self.memory / name).read_text())
        return 0


@contextlib.contextmanager
def gradescope_cgroup() -> Iterator[Cgroup]:
    """A cgroup with Gradescope's default CPU and memory: v2 where its controllers are on,
    else v1's cpu and memory hierarchies."""
    memory_bytes = GRADESCOPE_MEMORY_MB * 10**6
    quota = int(CPU_PERIOD_US * GRADESCOPE_CPU_SHARE)
    controllers = CGROUP_ROOT / "cgroup.subtree_control"
    if controllers.exists() and {"cpu", "memory"} <= set(controllers.read_text().split()):
        group = CGROUP_ROOT / CGROUP_NAME
        group.mkdir(exist_ok=True)
        (group / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
        (group / "memory.max").write_text(str(memory_bytes))
        folders, cgroup = [group], Cgroup((group / "cgroup.procs",), group)
    else:
        cpu, memory = CGROUP_ROOT / "cpu" / CGROUP_NAME, CGROUP_ROOT / "memory" / CGROUP_NAME
        cpu.mkdir(exist_ok=True)
        memory.mkdir(exist_ok=True)
        (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(quota))
        (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
        folders = [cpu, memory]
        cgroup = Cgroup((cpu / "cgroup.procs", memory / "cgroup.procs"), memory)
    try:
        yield cgroup
    finally:
        for folder in folders:
            with contextlib.suppress(OSError):
                folder.rmdir()


# `set_first` grows a few MiB at a time, as a leak does, past kata's memory limit.
LEAKING_SET_FIRST = """

def set_first(x, value):
    held = []
    while True:
        held.append(bytearray(8 * 2**20))
"""


def upload_files(kind: str) -> dict[str, bytes]:
    """The files of one kind of upload: every reference solution (`full`), the stubs as
    git has them, one of them broken, over 1 MiB, leaking memory, or all in a .zip."""
    solutions = {p.name: p.read_bytes() for p in sorted((REPO / "solutions").glob("[0-9]*.py"))}
    if kind == "stub":
        return {
            name: subprocess.run(
                ["git", "show", f"HEAD:exercises/{name}"], cwd=REPO, capture_output=True, check=True
            ).stdout
            for name in solutions
        }
    if kind == "broken":
        return solutions | {"03_grad.py": solutions["03_grad.py"].replace(b"):", b")", 1)}
    if kind == "oversized":
        return solutions | {"02_jit.py": solutions["02_jit.py"] + b"#" * 2**20}
    if kind == "out_of_memory":
        leaking = solutions["01_immutability.py"] + LEAKING_SET_FIRST.encode()
        return solutions | {"01_immutability.py": leaking}
    if kind == "zipped":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, content in solutions.items():
                archive.writestr(f"homework/{name}", content)
        return {"homework.zip": buffer.getvalue()}
    return solutions


UPLOADS = ("full", "stub", "broken", "oversized", "zipped", "out_of_memory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gradescope-limits", action="store_true")
    parser.add_argument("--upload", choices=UPLOADS, default="full")
    options = parser.parse_args()
    if options.gradescope_limits:
        with gradescope_cgroup() as cgroup:
            run(cgroup, options.upload)
    else:
        run(None, options.upload)


def run(cgroup: Cgroup | None, kind: str = "full") -> None:
    """Grade one upload of `kind`, in `cgroup` where one is given."""
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
        for name, content in upload_files(kind).items():
            (upload / name).write_bytes(content)
        env = os.environ | {"AUTOGRADER_ROOT": str(root), "KATA_PYTHON": sys.executable}
        command = ["taskset", "-c", "0", "bash", str(root / "source" / "run_autograder")]
        started = time.perf_counter()
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, preexec_fn=cgroup and cgroup.join
        )
        peak = largest = own = 0
        while process.poll() is None:
            tree = tree_rss_bytes(process.pid)
            peak, largest = max(peak, sum(tree.values())), max(largest, *tree.values())
            own = max(own, tree_held_bytes(process.pid))  # by proportional share
            time.sleep(0.05)
        wall = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        results = json.loads((root / "results" / "results.json").read_text())
    cpu = usage.ru_utime + usage.ru_stime
    tests = results.get("tests", [])
    passed = sum(test.get("status") == "passed" for test in tests)
    print(f"run_autograder on the {kind} upload, on one core (taskset -c 0):")
    print(f"  wall {wall:.1f} s, CPU {cpu:.1f} s (bound: {GRADESCOPE_SECONDS} s)")
    print(f"  score {results.get('score')}, {passed} of {len(tests)} checks passed")
    print(f"  output: {results.get('output')!r}")
    print(
        f"  peak resident memory of the process tree: {peak / 2**20:.0f} MiB "
        f"(Gradescope's default container limit: {GRADESCOPE_MEMORY_MB} MB; pages shared "
        f"between processes count once there, twice here)"
    )
    print(f"  largest process: {largest / 2**20:.0f} MiB")
    print(
        f"  the processes' own memory (Pss_Anon + Pss_Shmem, what kata caps): "
        f"{own / 2**20:.0f} MiB (run_autograder's cap: {RESIDENT_LIMIT_MIB} MiB)"
    )
    if cgroup is not None:
        print(
            f"  held to Gradescope's defaults ({GRADESCOPE_CPU_SHARE} CPU, "
            f"{GRADESCOPE_MEMORY_MB} MB): the cgroup's memory peaked at "
            f"{cgroup.peak_bytes() / 10**6:.0f} MB"
        )
    for test in tests:
        if "speed" in test.get("tags", []):
            print(f"  {test['name']}: {test.get('extra_data', {})}")
    print("  what the student reads besides the passing tests:")
    for test in tests:
        if test.get("status") != "passed" and test.get("output"):
            first = test["output"].splitlines()[0]
            print(f"    {test['name']} ({test['score']}/{test['max_score']}): {first}")


if __name__ == "__main__":
    main()
