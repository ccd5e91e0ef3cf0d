"""A run's cgroup: the memory cap and process cap its processes share, and the killing of
what is left of it where there is no PID namespace to do it at once.

cgroup v2 where memory and pids are delegated to this user (as by `systemd-run --user
--scope -p Delegate=yes`), v1's memory and pids controllers as root. The supervisor makes
the run's cgroup with its own rights before it enters the run's namespaces
(kata.isolation.container's `enter`), and removes it once the run is empty.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "kata-run-"
# Under cgroup v2 a group hands controllers to its children only while it holds no process
# itself: in a delegated group kata's own processes move into this leaf beside the runs'.
SUPERVISORS_LEAF = "kata-supervisors"
CAPPED = ("memory", "pids")
# Shared, where this user may: each run an equal share of the CPU wherever runs contend for
# it (v1's cpu.shares and v2's cpu.weight, at their defaults, weigh each run's group as one),
# so that one submission's spinning threads in `kata grade --jobs N` take their own run's
# share, not a neighbour's (its speed checks, its 60 s a check). Measured here (v1, 2 busy
# cores): one process beside 6 spinning ones got 0.07 of a core; each side in a group of
# its own, 0.38.
SHARED = ("cpu",)
# A run's processes and threads together (XLA starts a thread pool per core); a fork
# bomb stops here.
PROCESS_CAP = max(1024, 32 * (os.cpu_count() or 1))


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per v1 controller, and "" for the v2 hierarchy."""
    found = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = path.lstrip("/")
    return found


def _v2_root() -> Path | None:
    for candidate in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        if (candidate / "cgroup.controllers").is_file():
            return candidate
    return None


def cgroup_parents(claim: bool = False) -> tuple[str, dict[str, Path]] | None:
    """("v2" or "v1", {controller: folder a run's cgroup is made in}), or None where this
    user may not make one: v2 where memory and pids are delegated to it (as by `systemd-run
    --user --scope -p Delegate=yes`), v1 as root. With `claim`, a delegated v2 group that does
    not yet hand memory and pids to its children is made to (`claim_v2_group`)."""
    own = _own_cgroups()
    root = _v2_root()
    if root is not None and "" in own:
        group = root / own[""]
        if group.name == SUPERVISORS_LEAF:  # claimed by an earlier run of this process tree
            group = group.parent
        if _delegated_v2(group) and (not claim or claim_v2_group(group)):
            if claim:
                _share_v2(group)
            return "v2", {"": group}
    parents = {c: CGROUP_ROOT / c / own.get(c, "") for c in CAPPED}
    if all(_writable_v1(parent) for parent in parents.values()):
        shared = {c: CGROUP_ROOT / c / own.get(c, "") for c in SHARED}
        return "v1", parents | {c: p for c, p in shared.items() if _writable_v1(p)}
    return None


def _writable_v1(parent: Path) -> bool:
    return (parent / "cgroup.procs").is_file() and os.access(parent, os.W_OK)


def _share_v2(group: Path) -> None:
    """Hand SHARED to `group`'s children where it has them to hand (after `claim_v2_group`,
    it holds no process); a group that cannot goes on without."""
    wanted = set(SHARED) & _controllers(group, "cgroup.controllers")
    missing = wanted - _controllers(group, "cgroup.subtree_control")
    with contextlib.suppress(OSError):
        if missing:
            (group / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))


def _controllers(group: Path, listing: str) -> set[str]:
    with contextlib.suppress(OSError):
        return set((group / listing).read_text().split())
    return set()


def _delegated_v2(group: Path) -> bool:
    """This user may make capped cgroups under `group`: it writes there and memory and pids
    are, or may be, handed to its children."""
    capped = set(CAPPED)
    return os.access(group, os.W_OK) and capped <= _controllers(group, "cgroup.controllers")


def claim_v2_group(group: Path) -> bool:
    """Make `group` hand memory and pids to its children. v2 allows that only while the
    group holds no process, so its processes (this user's, in a delegated group: kata and
    its children) move into a leaf of their own first, as systemd's delegation expects."""
    if set(CAPPED) <= _controllers(group, "cgroup.subtree_control"):
        return True
    enable = " ".join(f"+{c}" for c in CAPPED)
    # The root group, or an empty one, takes it at once; no process is moved needlessly.
    with contextlib.suppress(OSError):
        (group / "cgroup.subtree_control").write_text(enable)
        return True
    leaf = group / SUPERVISORS_LEAF
    try:
        leaf.mkdir(exist_ok=True)
        for _ in range(100):  # a process forked meanwhile appears in the next reading
            left = (group / "cgroup.procs").read_text().split()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    (leaf / "cgroup.procs").write_text(pid)
        (group / "cgroup.subtree_control").write_text(enable)
    except OSError:
        return False
    return True


@dataclass
class Cgroup:
    """A run's cgroup: its folder per hierarchy, made by the supervisor with its own rights."""

    kind: str
    folders: list[Path]
    procs: list[int] = field(default_factory=list)  # cgroup.procs, opened before unshare
    # The folders above, opened before unshare too: through them the supervisor removes
    # the run's cgroup, which its mount namespace has read-only.
    parents: list[int] = field(default_factory=list)

    @classmethod
    def make(cls, name: str, memory_bytes: int | None) -> Cgroup | None:
        found = cgroup_parents(claim=True)
        if found is None:
            return None
        kind, parents = found
        folders = [parent / name for parent in parents.values()]
        for folder in folders:
            _sweep_leftovers(folder.parent)
            folder.mkdir()
        group = cls(kind, folders)
        group.cap(memory_bytes, PROCESS_CAP)
        # Opened now, with this process's own rights: a write checks the opener's.
        group.procs = [os.open(f / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for f in folders]
        group.parents = [os.open(f.parent, os.O_RDONLY | os.O_DIRECTORY) for f in folders]
        return group

    def cap(self, memory_bytes: int | None, processes: int) -> None:
        memory = str(memory_bytes) if memory_bytes else "max" if self.kind == "v2" else "-1"
        settings = {"pids.max": str(processes)}
        settings |= (
            {"memory.max": memory, "memory.swap.max": "0"}
            if self.kind == "v2"
            else {"memory.limit_in_bytes": memory, "memory.memsw.limit_in_bytes": memory}
        )
        for folder in self.folders:
            for name, value in settings.items():
                if (folder / name).exists():
                    (folder / name).write_text(value)

    def add(self, pid: int) -> None:
        for procs in self.procs:
            os.write(procs, str(pid).encode())

    def kill_all(self) -> None:
        """Kill every process in the cgroup until none is left (where the PID namespace,
        which does it at once, is missing)."""
        kill_file = self.folders[0] / "cgroup.kill"
        if kill_file.exists():
            kill_file.write_text("1")
            return
        for _ in range(1000):  # each round kills all there are; a fork bomb is capped
            pids = {int(p) for f in self.folders for p in (f / "cgroup.procs").read_text().split()}
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        for procs in self.procs:
            os.close(procs)
        for folder, parent in zip(self.folders, self.parents, strict=True):
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(folder.name, dir_fd=parent)
            os.close(parent)
        self.procs, self.parents = [], []


def _sweep_leftovers(parent: Path) -> None:
    """Remove the cgroups of runs whose supervisor was killed before it could (empty ones:
    rmdir refuses the others)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            owner = entry.name.removeprefix(CGROUP_PREFIX).partition("-")[0]
            if entry.name.startswith(CGROUP_PREFIX) and not _alive(int(owner or 0)):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


def memory_cap_of(supervisor_pid: int, memory_bytes: int | None) -> None:
    """Set the memory cap of the run that `supervisor_pid` supervises (a warm run learns its
    cap only with its request); nothing where that run has no cgroup."""
    found = cgroup_parents()
    if found is None:
        return
    kind, parents = found
    for parent in parents.values():
        for folder in parent.glob(f"{CGROUP_PREFIX}{supervisor_pid}-*"):
            Cgroup(kind, [folder]).cap(memory_bytes, PROCESS_CAP)


def cgroup_advice() -> str:
    """Where runs get no cgroup: how an instructor gives them one."""
    root = _v2_root()
    if root is not None and set(CAPPED) <= _controllers(root, "cgroup.controllers"):
        return (
            "for a memory cap, run kata in a cgroup delegated to you: "
            "systemd-run --user --scope -p Delegate=yes kata grade …"
        )
    return (
        "for a memory cap, run kata grade as root (memory and pids are cgroup v1's here, "
        "which delegates to no user)"
    )
