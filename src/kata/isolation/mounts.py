"""What a run sees of the file system: the mounts made in its mount namespace.

/proc shows only the run (`mount_proc`); /tmp, /var/tmp and /run are emptied but for what
the run uses, /dev holds only the harmless few nodes and any accelerator's, /sys/fs/cgroup
only the run's own cgroup; the scratch and /dev/shm are capped tmpfs; the reference
solutions are covered; every Unix socket with a path outside the run is covered by
/dev/null; every other mount is read-only (`mount_run`). kata.isolation.container makes
them inside the run, before any learner code exists.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from kata.isolation import confinement
from kata.isolation.cgroups import CGROUP_ROOT
from kata.isolation.libc import LIBC, check

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
# Flags a remount must keep (the kernel locks them on mounts a user namespace inherits);
# statvfs reports them with the same values.
MS_KEPT = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096
# Folders every user shares, emptied in a run: what the run needs there is put back.
COVERED = ("/tmp", "/var/tmp", "/run")
# The kernel's settings in /proc (sysctls, IRQ affinities, SysRq), read-only in a run as
# Docker has them: their mode alone lets the global root write them, no capability needed,
# and kata as root makes the run's root the host's.
KERNEL_SETTINGS = ("sys", "sysrq-trigger", "irq", "bus", "fs")
# A run's /dev (bound in from the host's, as bubblewrap's --dev does) holds these, any
# accelerator's nodes and the usual links; not the disks, /dev/kmsg, the consoles, /dev/kvm,
# the host's ptys and POSIX queues. A read-only mount stops no write to a device, and with
# kata as root a run's owner rights would open them (the raw disk holds the answers too).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEVICE_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    assert LIBC is not None
    result = LIBC.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    check(result, f"mount {target}")


def mount_proc() -> None:
    """Nothing mounted here reaches the outside; /proc shows only the run, none of the
    kernel's own files only its owner may read (`_mask_owner_only_files`), and none of its
    settings to write (KERNEL_SETTINGS)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mask_owner_only_files("/proc")
    for name in KERNEL_SETTINGS:
        with contextlib.suppress(OSError):
            _mount(f"/proc/{name}", f"/proc/{name}", None, MS_BIND | MS_REC)
            _read_only(f"/proc/{name}")


def _mask_owner_only_files(folder: str) -> None:
    """Cover each file at the top of `folder` that others may neither read nor write with
    /dev/null: as kata runs as root, a run's root is the host's, and the owner's rights
    alone read /proc/slabinfo, /proc/timer_list, /proc/kcore and the like (Docker masks
    such files the same way). A file the kernel adds later is covered on the next run;
    what a run's own processes own (/proc/PID) stays theirs."""
    for entry in os.scandir(folder):
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and not entry.stat().st_mode & 0o006:
                _mount("/dev/null", entry.path, None, MS_BIND)


def mount_run(
    *,
    scratch: str | None,
    scratch_bytes: int,
    read_only: tuple[str, ...],
    hidden: tuple[str, ...],
    visible: tuple[str, ...],
    writable: tuple[str, ...],
    cgroup: tuple[str, ...],
    sockets_outside: tuple[str, ...],
) -> None:
    """In the run's mount namespace (while it still has the capabilities): the shared
    temporary folders emptied, a /dev of its own, no cgroup but its own, the capped scratch,
    /dev/shm, hidden answers, and every other mount read-only, the course and submission
    among them.

    The folders are a kata.isolation.container Spec's; `cgroup` is the run's cgroup's
    folders, and `sockets_outside` the Unix sockets its parent's network namespace lists
    (`path_sockets`)."""
    put_back = [*visible, *read_only, *confinement.installation_paths()]
    made = [scratch] if scratch else []
    for folder in COVERED:
        _cover(folder, [p for p in put_back if p != scratch], made)
    _cover("/dev", _devices(), ["/dev/shm"], DEVICE_LINKS)
    for folder in confinement.SYSTEM_HIDDEN:  # as Landlock hides them, for where it is off
        _cover(folder, [])
    if cgroup:
        _cover(str(CGROUP_ROOT), list(cgroup))
    if scratch:
        size = f"size={scratch_bytes},mode=0700"
        in_scratch = os.getcwd() == scratch
        _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, size)
        if in_scratch:  # the folder it is in now is the one underneath
            os.chdir(scratch)
        with contextlib.suppress(OSError):
            _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, size)
    for path in read_only:
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _read_only(path)
    for path in hidden:
        if os.path.isdir(path):
            flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
            _mount("tmpfs", path, "tmpfs", flags, "size=4k,mode=000")
    for path in sockets_outside:
        _mask_socket(path)
    writable_folders = [p for p in (scratch, *writable) if p and os.path.isdir(p)]
    _read_only_but([*writable_folders, "/dev/shm"] if scratch else writable_folders)


def path_sockets() -> list[str]:
    """The paths the Unix sockets of this network namespace are bound to (/proc/net/unix:
    its last field, where it starts with "/"; "@" is an abstract name)."""
    paths = []
    with contextlib.suppress(OSError), open("/proc/net/unix", errors="replace") as lines:
        next(lines, None)
        for line in lines:
            fields = line.rstrip("\n").split(None, 7)
            if len(fields) == 8 and fields[7].startswith("/"):
                paths.append(fields[7])
    return paths


def _mask_socket(path: str) -> None:
    """Cover a Unix socket outside the run with /dev/null: a socket with a path is reached
    through the file system whatever the network namespace, Landlock governs no connect()
    to one, and a read-only mount refuses none (an agent's socket in a home folder, a
    database's under /var/lib). One in a folder the run has emptied is gone already."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.stat(path).st_mode):
            _mount("/dev/null", path, None, MS_BIND)


def _read_only_but(writable: list[str]) -> None:
    """Every mount read-only but the run's /proc and the folders in `writable` (each bound
    onto itself first, a mount of its own). Landlock keeps a run from writing files, not
    from changing the metadata of those its user owns (as root, the system's): their mode,
    times and extended attributes, which a read-only mount refuses (EROFS). No run raises
    its own caps in cgroupfs either."""
    points = set(_mount_points_under("/"))
    for path in writable:
        if path not in points:
            _mount(path, path, None, MS_BIND | MS_REC)
    for point in _mount_points_under("/"):
        if not _within(point, "/proc") and not any(_within(point, w) for w in writable):
            with contextlib.suppress(OSError):  # one under a hidden folder is out of reach
                _read_only(point)


def _read_only(point: str) -> None:
    kept = os.statvfs(point).f_flag & MS_KEPT  # flags the parent namespace locked on
    _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def _cover(
    folder: str, visible: list[str], made: Iterable[str] = (), links: dict[str, str] | None = None
) -> None:
    """Mount an empty, read-only tmpfs on `folder`, then put back the paths in `visible`
    that lie in it (bound through descriptors opened before), the empty folders `made` (mount
    points: the scratch, /dev/shm) and the symbolic `links` (name in `folder`: target).
    What else was there (other users' files, Unix sockets with a path: the warm grader's,
    a desktop's, a container runtime's; the host's devices; other runs' cgroups) is out of
    the run's reach."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return
    inside = sorted({os.path.realpath(p) for p in visible if _within(os.path.realpath(p), folder)})
    held = {}
    for path in inside:
        with contextlib.suppress(OSError):
            held[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        for path in made:
            if _within(path, folder):
                os.makedirs(path, exist_ok=True)
        for name, target in (links or {}).items():
            os.symlink(target, os.path.join(folder, name))
        for path, fd in held.items():
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                Path(path).touch()
        _mount(None, folder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        for path, fd in held.items():
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
    finally:
        for fd in held.values():
            os.close(fd)


def _devices() -> list[str]:
    """The device nodes a run finds in its /dev: DEVICES and any accelerator's."""
    accelerators = confinement.accelerator_paths()[0]
    return [f"/dev/{name}" for name in DEVICES] + [d for d in accelerators if d != "/dev/shm"]


def _mount_points_under(folder: str) -> list[str]:
    """The mount points at or below `folder`, from /proc/self/mountinfo (which writes a
    space, a tab, a newline and a backslash in a path as octal escapes)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as lines:
        points = [_MOUNTINFO_ESCAPE.sub(_unescaped, line.split()[4]) for line in lines]
    return [p for p in points if _within(p, folder)]


_MOUNTINFO_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescaped(match: re.Match) -> str:
    return chr(int(match.group(1), 8))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
