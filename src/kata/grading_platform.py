"""Which platform grading runs on: one decision per run, made in the trusted supervisor and
handed, as JAX_PLATFORMS, to every process kata starts (the judge, the learner's process,
the warm worker and its forks) by kata.supervisor.judge_process.grading_environment.

Every grading run has two processes that import JAX, the judge and the learner's process,
and a chip admits one: libtpu locks /tmp/libtpu_lockfile for the life of the process that
opens the TPU, and any second opener is refused ("Unable to initialize backend 'tpu'",
with no fall back to the CPU); each process that opens a GPU reserves 75% of its memory
(../shared/accelerators.md, measured on a TPU v5e). So every one of them runs on the CPU,
and a long-lived process of kata's, the chip holder (kata.servers.chip_holder), opens the
chip and times the speed checks there; where another program holds the chip, kata grades
on the CPU alone and says so in one line, naming who holds it where the system tells. A user's own
JAX_PLATFORMS is respected, and said too where it names an accelerator.

Its own module, importing nothing of the grading engine, so the data model (kata.results)
carries the decision with every Grading.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import itertools
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kata.accelerators import installed_accelerator, runtime_installed

PLATFORMS_VARIABLE = "JAX_PLATFORMS"
# The chip each accelerator name JAX_PLATFORMS takes stands for ("gpu" is JAX's alias for
# whichever of CUDA and ROCm is there).
CHIP_OF_PLATFORM = {"tpu": "TPU", "cuda": "GPU", "rocm": "GPU", "gpu": "GPU"}
# A chip's device nodes, under /dev: there where the chip is, and open in the process
# that holds it. libtpu opens /dev/accel* (/dev/vfio/N on newer TPU VMs), CUDA
# /dev/nvidiaN, ROCm /dev/kfd. (A machine image may carry JAX's CUDA plugin and no GPU:
# there the CPU is JAX's own choice too, and nothing is said.)
CHIP_NODES = {"TPU": ("accel*", "vfio/[0-9]*"), "GPU": ("nvidia[0-9]*", "kfd")}


@dataclass(frozen=True)
class System:
    """Where the system tells about chips: libtpu's lock file (xla/stream_executor/tpu/
    tpu_initialize_util.cc, TryAcquireTpuLock: a POSIX record lock, lockf F_TLOCK, on the
    whole file, held until the process exits; the file stays behind after it, so only the
    lock says whether the chip is held), /proc and /dev."""

    lock_file: Path = Path("/tmp/libtpu_lockfile")
    proc: Path = Path("/proc")
    dev: Path = Path("/dev")

    def chip_present(self, chip: str) -> bool:
        return any(any(self.dev.glob(pattern)) for pattern in CHIP_NODES[chip])


SYSTEM = System()


@dataclass(frozen=True)
class ChipHolder:
    """A process that holds the machine's chip: its pid and command (where the system
    tells), or, where only the lock file's owner shows, no pid."""

    pid: int | None
    command: str = ""

    def __str__(self) -> str:
        if self.pid is None:  # another user's, or in another pid namespace
            return "a process this one cannot see"
        who = "this process" if self.pid == os.getpid() else "process"
        return f"{who} {self.pid}" + (f" ({self.command})" if self.command else "")


@dataclass(frozen=True)
class GradingPlatform:
    """Where every process of a run computes. `platform`: the JAX_PLATFORMS they all get
    (None: JAX's own choice, left alone); `reason`: the one line that says why, where the
    learner would not expect it ("" where there is nothing to say); `holder`: the process
    that holds the chip, where one does."""

    platform: str | None
    reason: str = ""
    holder: ChipHolder | None = None
    # The chip ("TPU", "GPU") that kata's chip holder times the speed checks on, where it
    # may (kata.servers.chip_holder): free, or held by that holder already.
    chip: str | None = None

    def environment(self) -> dict[str, str]:
        """What every process kata starts gets in its environment."""
        return {PLATFORMS_VARIABLE: self.platform} if self.platform else {}

    def as_dict(self) -> dict[str, object]:
        holder = self.holder
        return {
            "platform": self.platform or "default",
            "reason": self.reason,
            "holder": None if holder is None else {"pid": holder.pid, "command": holder.command},
            "timed_on": self.chip,
        }


def missing_chip(environ: Mapping[str, str], system: System) -> str:
    """Why the user's JAX_PLATFORMS in `environ` cannot work on this machine, in one line: it
    names a chip whose runtime is not installed or whose device is not there, so every
    process of a run would fail as JAX starts ("Unable to initialize backend 'tpu'", on
    every check of a right answer). "" where it can, or names no chip."""
    chosen = environ.get(PLATFORMS_VARIABLE, "").strip()
    for name in chosen.lower().split(","):
        chip = CHIP_OF_PLATFORM.get(name.strip())
        if chip is None:
            continue
        if not runtime_installed(chip):
            lacks = f"JAX's {chip} runtime is not installed"
        elif not system.chip_present(chip):
            lacks = f"this machine has no {chip} (none in {system.dev})"
        else:
            continue
        return (
            f"{PLATFORMS_VARIABLE}={chosen} asks for a {chip}, and {lacks}: unset "
            f"{PLATFORMS_VARIABLE} (kata then grades on the CPU and times on a chip where "
            f"there is one), or set {PLATFORMS_VARIABLE}=cpu"
        )
    return ""


def choose_platform(environ: Mapping[str, str], system: System) -> GradingPlatform:
    """The platform a run grades on, from the user's JAX_PLATFORMS in `environ`, the
    accelerator runtime installed, whether its chip is there and who holds it (`system`)."""
    chosen = environ.get(PLATFORMS_VARIABLE, "").strip()
    if chosen:
        if set(chosen.lower().split(",")) <= {"cpu"}:
            return GradingPlatform(chosen)
        return GradingPlatform(
            chosen,
            f"graded with {PLATFORMS_VARIABLE}={chosen}, as set: the judge and your code's "
            "process each open it, which a TPU refuses and a GPU's memory may not hold; "
            "unset it to grade on the CPU",
        )
    chip = installed_accelerator()
    if chip is None:
        return GradingPlatform(None)
    if not system.chip_present(chip):
        return GradingPlatform("cpu")
    holder = chip_holder(chip, system)
    if holder is not None and not katas_own(holder, system):
        return GradingPlatform("cpu", f"graded on the CPU: the {chip} is held by {holder}", holder)
    return GradingPlatform(
        "cpu", f"graded on the CPU, the speed checks timed on the {chip}", holder, chip=chip
    )


@functools.cache
def grading_platform() -> GradingPlatform:
    """This run's decision, made once (kata's processes are started with it)."""
    return choose_platform(os.environ, SYSTEM)


def take_on(platform: GradingPlatform) -> None:
    """Put this process on `platform` before JAX starts its backend, as the processes kata
    starts are (JAX reads JAX_PLATFORMS as it is imported; it may be already)."""
    if platform.platform:
        import jax

        os.environ.update(platform.environment())
        jax.config.update("jax_platforms", platform.platform)


def opens_an_accelerator(environ: Mapping[str, str]) -> bool:
    """Whether a process started with `environ` would open an accelerator as JAX starts."""
    chosen = environ.get(PLATFORMS_VARIABLE, "").strip()
    if chosen:
        return not set(chosen.lower().split(",")) <= {"cpu"}
    return installed_accelerator() is not None


def chip_holder(chip: str, system: System) -> ChipHolder | None:
    """The process that holds the `chip` ("TPU" or "GPU"), where one does and the system
    tells: libtpu's lock names any other holder; else this process or one it runs under
    with the chip's device open (a notebook's kernel: a lock never conflicts with its own
    holder's). A GPU takes no lock, so for a GPU every process /proc shows is read too (a
    notebook or script beside kata), kata's own chip holder named only where no other
    process holds it."""
    if chip == "TPU":
        locked = lock_holder(system)
        if locked is not None:
            return locked
    nodes = tuple(str(system.dev / pattern) for pattern in CHIP_NODES[chip])
    found = device_holders(nodes, system.proc, every_process=chip == "GPU")
    holders = list(dict.fromkeys(found))
    others = [holder for holder in holders if not katas_own(holder, system)]
    return next(iter(others or holders), None)


def lock_holder(system: System) -> ChipHolder | None:
    """Who holds a lockf lock on `lock_file`, asked without taking it (F_GETLK): a second
    opener that took it even for a moment would be refused the chip meanwhile. A file
    this user cannot open belongs to another's libtpu, which refuses this user too."""
    try:
        import fcntl  # POSIX only; where there is none there is no libtpu either

        fd = os.open(system.lock_file, os.O_RDONLY)
    except (ImportError, FileNotFoundError):
        return None
    except PermissionError:
        return ChipHolder(None)
    try:
        # struct flock on Linux: l_type, l_whence (short), l_start, l_len (off_t), l_pid.
        asked = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, asked)
    except OSError:
        return None
    finally:
        os.close(fd)
    kind, _, _, _, pid = struct.unpack("@hhqqi4x", answer)
    if kind == fcntl.F_UNLCK:
        return None
    # A holder in another pid namespace shows as 0: known to hold it, not by number.
    return ChipHolder(pid, command_of(pid, system.proc)) if pid > 0 else ChipHolder(None)


def device_holders(
    nodes: tuple[str, ...], proc: Path, every_process: bool = False
) -> Iterator[ChipHolder]:
    """This process and those it runs under, nearest first, that have a device matching one
    of `nodes` (glob patterns) open, as far as /proc shows (none where there is none); with
    `every_process`, then every other process /proc shows. Reading all of /proc took
    0.2-0.3 s of every run here (201 processes, a load of 20 on 2 cores), these six 15-55
    ms: only a machine with a GPU, where no lock names a holder, pays for it."""
    pids = lineage(proc)
    if every_process:
        pids = itertools.chain(pids, _every_pid(proc))
    for pid in pids:
        if _has_open(proc / str(pid) / "fd", nodes):
            yield ChipHolder(pid, command_of(pid, proc))


def _every_pid(proc: Path) -> Iterator[int]:
    with contextlib.suppress(OSError):
        for entry in os.scandir(proc):
            if entry.name.isdigit():
                yield int(entry.name)


def lineage(proc: Path) -> Iterator[int]:
    """This process's pid, then its parent's, up to the first process /proc shows."""
    entry, seen = "self", set()
    while True:
        try:
            stat = (proc / entry / "stat").read_text(encoding="utf-8", errors="replace")
            # "PID (COMMAND) STATE PPID ...": the command may hold spaces and parentheses.
            pid, parent = int(stat.split(" ", 1)[0]), int(stat.rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            return
        if pid in seen:
            return
        seen.add(pid)
        yield pid
        if parent <= 0:
            return
        entry = str(parent)


def _has_open(fd_folder: Path, nodes: tuple[str, ...]) -> bool:
    with contextlib.suppress(OSError):
        for link in os.scandir(fd_folder):
            with contextlib.suppress(OSError):
                target = os.readlink(link.path)
                if any(fnmatch.fnmatchcase(target, node) for node in nodes):
                    return True
    return False


def katas_own(holder: ChipHolder, system: System) -> bool:
    """Whether `holder` is kata's chip holder (kata.servers.chip_holder), by its command line."""
    if holder.pid is None:
        return False
    try:
        arguments = (system.proc / str(holder.pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kata.servers.chip_holder" in arguments


def command_of(pid: int, proc: Path) -> str:
    """Process `pid`'s command name, "" where the system does not tell."""
    try:
        return (proc / str(pid) / "comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
