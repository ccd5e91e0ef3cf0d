"""Telling a run that ran out of memory from one killed for another reason.

Two limits can end a run for memory. kata's own (`Limits.resident_bytes`): the parent
measures what the run's processes hold and stops the run past it, with a message. And the
machine's: a container's memory cgroup (Gradescope's 768 MB), whose OOM killer sends
SIGKILL, which by itself says nothing of why. The kernel counts those kills per cgroup
(`oom_kill` in cgroup v2's memory.events, v1's memory.oom_control), so a SIGKILL while
the counter of a cgroup this process is in went up is an out-of-memory death, and that
cgroup's limit is the one it met.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# cgroup v1 writes "no limit" as the largest page-aligned 64-bit number.
NO_LIMIT_ABOVE = 2**62


@dataclass(frozen=True)
class MemoryCgroup:
    """One memory cgroup: where its OOM kills are counted and what its limit is."""

    folder: Path
    events: str  # the file holding the `oom_kill` count
    limit: str  # the file holding the limit

    def oom_kills(self) -> int:
        with contextlib.suppress(OSError, ValueError):
            for line in (self.folder / self.events).read_text().splitlines():
                name, _, count = line.partition(" ")
                if name == "oom_kill":
                    return int(count)
        return 0

    def limit_bytes(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            text = (self.folder / self.limit).read_text().strip()
            if text != "max" and int(text) < NO_LIMIT_ABOVE:
                return int(text)
        return None


def memory_cgroups(proc_cgroup: Path = Path("/proc/self/cgroup")) -> list[MemoryCgroup]:
    """The memory cgroups this process is in, innermost first, up to the mount's root (a
    container sees its own cgroup at the root, whatever /proc says its path is)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return []
    found: list[MemoryCgroup] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and (CGROUP_ROOT / "cgroup.controllers").exists():
            mount, events, limit = CGROUP_ROOT, "memory.events", "memory.max"
        elif "memory" in controllers.split(","):
            mount, events, limit = (
                CGROUP_ROOT / "memory",
                "memory.oom_control",
                "memory.limit_in_bytes",
            )
        else:
            continue
        folder = mount / path.lstrip("/")
        chain = [folder, *folder.parents] if folder.is_relative_to(mount) else [mount]
        for candidate in chain:
            if (candidate / events).exists():
                found.append(MemoryCgroup(candidate, events, limit))
            if candidate == mount:
                break
    return found


class OomWitness:
    """The OOM-kill counts of this process's memory cgroups when a run starts."""

    def __init__(self) -> None:
        self.cgroups = memory_cgroups()
        self.before = [cgroup.oom_kills() for cgroup in self.cgroups]

    def limit_met(self) -> int | None:
        """The limit, in bytes, of the innermost limited cgroup whose OOM killer has killed
        since the run started; None if none has (or its limit is unknown: 0)."""
        for cgroup, before in zip(self.cgroups, self.before, strict=True):
            if cgroup.oom_kills() > before:
                return cgroup.limit_bytes() or 0
        return None


def tree_held_bytes(root: int, limit: int = 0) -> int:
    """Memory that `root` and its descendants hold of their own: anonymous and shared
    memory pages, not the files mapped (Python's and JAX's libraries, shared by every
    process of a run and counted once by the kernel).

    Read cheaply first (RssAnon + RssShmem, 0.02 ms a process), where a page that processes
    share since a fork counts in each; where that passes `limit`, read again by proportional
    share (Pss_Anon + Pss_Shmem: each shared page split among those sharing it, so counted
    once, as a container's cgroup counts it; 1.2 ms for a 440 MiB process). Counted twice,
    a run's forked learner's process and its starter took the reference solutions of 04, 05,
    07, 08, 12 and 16 past Gradescope's 560 MiB and failed 7 of their 189 checks."""
    tree = _tree(root)
    held = sum(_own_bytes(pid, ("RssAnon:", "RssShmem:"), "status") for pid in tree)
    if held <= limit:
        return held
    return sum(_own_bytes(pid, ("Pss_Anon:", "Pss_Shmem:"), "smaps_rollup") for pid in tree)


def _tree(root: int) -> list[int]:
    """`root` and every process that descends from it."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry.name}/stat").read_text().rpartition(")")[2].split()
                parents[int(entry.name)] = int(stat[1])
    tree, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        tree.append(pid)
        frontier += [child for child, parent in parents.items() if parent == pid]
    return tree


def _own_bytes(pid: int, fields: tuple[str, str], file: str) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(fields):
                total += int(line.split()[1]) * 1024
    return total


def mebibytes(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"
