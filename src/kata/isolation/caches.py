"""Whose grading runs share a JAX compilation cache, and how much any cache may hold.

A cache entry is a whole compiled program, run unchecked by whoever asks for its key, so
a cache is shared only by runs of one owner's code:

- runs of the course's own `exercises/` (the learner's `kata check`, `watch`, notebook)
  share the course's cache (`.kata/jax-cache`), which their learner's processes write;
- runs of the course's `solutions/` (`kata verify`, `kata check --solutions`) share one of
  their own (`reference_cache`);
- a run of any other folder (`kata grade`'s submissions, `kata check --dir`, Gradescope)
  gets none, its judge none either: it compiles afresh (a cold check of 01 took 9.4 s
  instead of 5.6 s without a cache: median of 3, on a busy 2-core machine), and no cache
  another run wrote, a student's or the instructor's solved `exercises/`, is named to it
  or visible to it.

Each run's judge compiles into a cache beside its learner's (`judge_cache`), which the
learner's process can neither read nor write (kata.learner_side.learner_process). Every cache
the course keeps is hidden from runs that do not own it: Landlock leaves it out of what
they may read and the run's mount namespace covers it, so with either layer a run cannot
even list it (with neither, a process of the grader's own user reads what that user can:
`kata grade` refuses to run there unless told `--unconfined`).

What a run adds to a cache is the learner's to choose (a fresh 64 MB constant per import
made a 67 MB judge's entry per program), so the grader stops a run that makes one hold
more than `RUN_CACHE_BYTES`, and after every run trims each cache the run could write to
`CACHE_BYTES`, least recently written first (`trim`). JAX's own bound
(`jax_compilation_cache_max_size`) cannot do it: it needs the `filelock` package, which
JAX does not require, and file locks, which a run's seccomp filter refuses.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass

# The variable naming the cache a process compiles into (JAX's own).
CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
# Set (to anything but "" or "0") by a grader whose every folder graded is trusted, kata's
# own test suite: runs of any folder then read the course's cache, as its wrong answers
# share all but a function or two with the solved course compiled there (a whole course's
# stubs graded in 48 s with it empty, 21 s with it full). Runs of `exercises/` alone write it.
SHARE_WITH_EVERY_SOURCE_VARIABLE = "KATA_CACHE_SHARED_WITH_EVERY_FOLDER"

# What any one cache may hold once a run ends: a solved course's whole cache is 3 MB
# (447 entries; its judge's 1 MB), so a learner's course keeps ~20 solved courses'
# programs before the oldest go, and a run that makes big programs keeps at most this.
CACHE_BYTES = 64 * 2**20
# What one may hold while a run adds to it: the grader stops a run past it (every 2 s,
# kata.supervisor.runner), then trims the cache to CACHE_BYTES.
RUN_CACHE_BYTES = 2 * CACHE_BYTES


def reference_cache(shared: str) -> str:
    """Where the runs of a course's reference solutions keep their compiled programs."""
    return shared.rstrip("/") + "-reference"


def judge_cache(cache: str) -> str:
    """Where a run's judge keeps the programs it compiles, beside `cache`, the one the run's
    learner's processes use: a judge must never run a compiled program that a learner's
    process could have written (the cache's entries are not checked against their keys)."""
    return cache.rstrip("/") + "-judge"


@dataclass(frozen=True)
class RunCaches:
    """The compilation caches of one run: `learner`, its learner's processes' (None: none,
    nor its judge's), which they may write where `learner_writes`; `judge`, its judge's;
    `hidden`, the course's caches it may not see at all."""

    learner: str | None
    learner_writes: bool
    judge: str | None
    hidden: tuple[str, ...]

    def written(self) -> list[str]:
        """The caches the run may add to, each to be trimmed once it ends."""
        return [c for c in (self.learner if self.learner_writes else None, self.judge) if c]


def caches_of_run(shared: str | None, own_exercises: bool, reference: bool) -> RunCaches:
    """The caches of a run grading the course's `own_exercises`, its `reference` solutions,
    or (neither) any other folder, where the course's runs share `shared` (None: none)."""
    if not shared:
        return RunCaches(None, False, None, ())
    everyone = (shared, judge_cache(shared), reference_cache(shared))
    everyone += (judge_cache(reference_cache(shared)),)
    if reference:
        learner = reference_cache(shared)
    elif own_exercises or _shared_with_every_folder():
        learner = shared
    else:
        return RunCaches(None, False, None, everyone)
    judge = judge_cache(learner)
    hidden = tuple(c for c in everyone if c not in (learner, judge))
    return RunCaches(learner, own_exercises or reference, judge, hidden)


def _shared_with_every_folder() -> bool:
    return os.environ.get(SHARE_WITH_EVERY_SOURCE_VARIABLE, "0") not in ("", "0")


def trim(cache: str, limit: int = CACHE_BYTES) -> None:
    """Delete `cache`'s least recently written entries until what they hold on disk is
    within `limit` bytes. JAX keeps each entry as a file directly in the cache; anything
    else there (a folder, a link: a learner's process writes its own course's cache as it
    likes) goes first. A run reading an entry as it goes compiles the program afresh (JAX
    reads a missing entry as a miss)."""
    entries = []
    with contextlib.suppress(OSError), os.scandir(cache) as found:  # OSError: no cache yet
        for entry in found:
            with contextlib.suppress(OSError):  # deleted meanwhile
                status = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(status.st_mode):
                    entries.append((status.st_mtime_ns, status.st_blocks * 512, entry.path))
                elif stat.S_ISDIR(status.st_mode):
                    _remove_folder(entry.path)
                else:
                    os.unlink(entry.path)
    held = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if held <= limit:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        held -= size


def _remove_folder(path: str) -> None:
    """Remove a folder and all below it, never following a link (shutil's descriptor-based
    walk), as far as it can: one nested past Python's recursion limit stays."""
    with contextlib.suppress(RecursionError):
        shutil.rmtree(path, ignore_errors=True)
