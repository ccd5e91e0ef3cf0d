"""The judge's start: a run's container, then the run's recipe, then pytest.

`python -m kata.judge.start --memory BYTES [--confine JSON] [--container JSON]
[--host-devices N] -- <pytest arguments>` builds the run's container (kata.isolation.container,
JSON its Spec) and forks into it: the parent stays behind as a small supervisor that waits
until nothing of the run is left, and the child becomes the judge by taking the steps of
`RECIPE`, the same a warm spare takes (kata.servers.worker): it forks the starter of the
learner's processes, settles the container, gives the starter the run's settings, caps its
own address space (a memory bomb raises MemoryError instead of waiting for the cgroup's OOM
kill) with no core dumps, confines itself (kata.isolation.confinement) to the paths JSON
names, takes the events' key last, and runs pytest. The environment a run gets holds only the
variables `kata.isolation.limits.scrub_environment` passes on, none secret-looking.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from kata.handoffs.environment import (
    CHIP_FD_VARIABLE,
    EVENTS_KEY_FD_VARIABLE,
    EVENTS_KEY_VARIABLE,
    LEARNER_CONFINED_VARIABLE,
    LEARNER_PID_VARIABLE,
    LEARNER_SOCKET_VARIABLE,
)
from kata.handoffs.events_pipe import OPTION_PREFIX
from kata.handoffs.seal import key_from_pipe
from kata.handoffs.starter_requests import Prepare
from kata.isolation import confinement, container
from kata.isolation.limits import apply_limits, confine_run, follow_compilation_cache
from kata.quick_exit import end_now

T = TypeVar("T")


def keep_the_run_folder_off_the_path() -> None:
    """Import nothing from the run's working folder (its scratch), which the learner's
    process may write: a module planted there under the name of one the judge imports
    later would run as the judge. `python -m` puts it first on the path; the checks'
    folder, which pytest adds, is read-only."""
    here = os.getcwd()
    sys.path[:] = [entry for entry in sys.path if entry and os.path.abspath(entry) != here]


def preload_grading_modules() -> None:
    """Import everything a run imports, so that a confined run need not.

    Landlock checks every path lookup, and imports are thousands of them: importing these
    after confining cost a cold run of 01 ~0.1 s more than unconfined (3.7-4.9%, median of
    20). JAX's backend is not started: a warm worker leaves that to its spare.
    """
    import importlib

    import _pytest.config
    import jax  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import pytest_timeout  # noqa: F401

    # pytest imports its built-in plugins as it configures each run; import them now.
    for name in _pytest.config.default_plugins:
        importlib.import_module(f"_pytest.{name}")

    # The checks' own helpers, by name: grading runs the checks, it does not use them.
    for name in ("expect", "fixtures", "learner_calls", "speed"):
        importlib.import_module(f"kata.checking.{name}")
    import kata.isolation.integrity  # noqa: F401
    import kata.judge.pytest_plugin  # noqa: F401
    import kata.learner_side.compile_counts  # noqa: F401
    import kata.learner_side.learner_process  # noqa: F401

    set_up_lapack()
    confinement.grading_policy([], [])  # what every run's policy shares, found once


def set_up_lapack() -> None:
    """Set up JAX's CPU LAPACK kernels now, as the first exported program the judge runs
    would: 125 ms of every run's first `ex.f.jit()(...)`. Before JAX 0.6 a program sets
    them up only as it is lowered, never as it runs deserialized, so a judge that ran a
    learner's exported SVD without this crashed (SIGSEGV: the kernels not set up).

    jaxlib takes the kernels from two of SciPy's Cython modules, `scipy.linalg.cython_blas`
    and `cython_lapack`. Importing them the usual way runs `scipy.linalg`'s `__init__`,
    which imports 73 more modules of SciPy: 86 ms of a cold run's start, where the two
    alone under a bare package take 8 ms (median of 3 each, 2026-12-06; a cold `kata check`
    of a solved 01 took 1.22 s instead of 1.29 s, and 1.01 s of CPU instead of 1.16, median
    of 9 pairs). The bare package is forgotten once they are in, so that a later
    `import scipy.linalg` gets all of it; a jaxlib that reads more of it gets the usual
    import."""
    import importlib

    linalg = importlib.import_module("jax._src.lax.linalg")
    before_0_6 = getattr(getattr(linalg, "lapack", None), "_lapack", None)  # jaxlib's own
    initialize = getattr(linalg, "initialize_lapack", getattr(before_0_6, "initialize", None))
    if initialize is None:
        return
    if "scipy.linalg" in sys.modules:
        initialize()
        return
    try:
        with _without_its_init("scipy.linalg"):
            for name in ("cython_blas", "cython_lapack"):
                importlib.import_module(f"scipy.linalg.{name}")
            initialize()
    except Exception:  # noqa: BLE001 — it reads more than the two: the usual import
        initialize()


@contextlib.contextmanager
def _without_its_init(package: str) -> Iterator[None]:
    """`package`'s submodules importable in the block without running its `__init__`:
    the package is a bare module there, and forgotten after."""
    import importlib
    import importlib.util

    parent_name, _, child = package.rpartition(".")
    parent = importlib.import_module(parent_name)
    spec = importlib.util.find_spec(package)
    sys.modules[package] = bare = importlib.util.module_from_spec(spec)
    try:
        yield
    finally:
        del sys.modules[package]
        if vars(parent).get(child) is bare:  # (getattr would import it: SciPy loads lazily)
            delattr(parent, child)


def judge_host_devices(count: int) -> None:
    """Give the judge `count` CPU devices beside its own backend (a course's most
    `host_devices`), to compile and run the programs a learner's process on as many hands
    over. Only once the starter of learner's processes is forked, which must not inherit
    it: other exercises' processes keep the machine's devices."""
    if count:
        from kata.learner_side.learner_process import use_host_devices

        use_host_devices(count, cpu_only=False)


def hand_to_judge(connection: socket.socket, pid: int, confined: bool) -> None:
    """Leave the learner's process where the judge (kata.checking.learner_connection) finds it:
    in the environment of the pytest this process runs next."""

    connection.set_inheritable(True)
    os.environ[LEARNER_SOCKET_VARIABLE] = str(connection.detach())
    os.environ[LEARNER_PID_VARIABLE] = str(pid)
    if confined:
        os.environ[LEARNER_CONFINED_VARIABLE] = "1"


def supervise(spec: container.Spec, keep_fds: list[int]) -> None:
    """Build the run's container (kata.isolation.container) and return inside it, as the
    run's judge-to-be. The process that called stays outside, running no learner code,
    waits until nothing of the run is left, and exits as the judge did. A SIGTERM (from the
    grader stopping the run) ends the judge and, with it, the rest."""
    if not hasattr(os, "fork"):
        return
    supervisor = container.enter(spec, keep_fds)
    if supervisor is None:
        return
    signal.signal(signal.SIGTERM, lambda *_: supervisor.kill())
    container.exit_as(supervisor.wait())


def handed_descriptors(pytest_args: list[str], handed: dict[str, str]) -> list[int]:
    """The descriptors a cold run was handed: the events pipe (named in pytest's arguments)
    and those `handed` names (the events' key pipe, the chip holder's connection)."""
    found = [int(a.removeprefix(OPTION_PREFIX)) for a in pytest_args if a.startswith(OPTION_PREFIX)]
    return found + [int(fd) for fd in handed.values() if fd]


# The run's recipe ------------------------------------------------------------------------


@dataclass
class RunSettings:
    """What the front-end decided for one run (kata.supervisor.runner), as its judge gets
    them: on a cold judge's command line, in a warm spare's request (kata.servers.worker)."""

    memory: int | None
    confine: dict[str, Any] | None  # the run's Landlock paths; None runs unconfined
    container: container.Spec
    cwd: str
    env: dict[str, str]
    # Where the run times on a chip: the judge's connection to the chip holder.
    chip_fd: int | None = None


@dataclass
class JudgeToBe:
    """The process that becomes a run's judge, as the recipe's steps leave it: inside the
    run's container, before pytest starts."""

    host_devices: int  # the course's most: CPU devices beside the judge's backend
    warm_up: Callable[[], None] | None = None  # run in the first learner's process
    settings: RunSettings | None = None
    learner: tuple[socket.socket, int] | None = None  # the starter: its socket, its pid
    # The key that seals the judge's events: a warm run's comes in its request, a cold
    # one's on a pipe (kata.handoffs.seal).
    events_key: str | None = None
    events_key_fd: int | None = None


def start_the_starter(judge: JudgeToBe) -> None:
    """Fork the starter of learner's processes (kata.learner_side.learner_process), which
    forks the first one at once, before any of the run's settings are known."""
    from kata.learner_side.learner_process import start_beside

    judge.learner = start_beside(confined=False, warm_up=judge.warm_up)


def give_the_judge_its_host_devices(judge: JudgeToBe) -> None:
    judge_host_devices(judge.host_devices)


def settle_the_container(judge: JudgeToBe) -> None:
    """The run's mounts, then no capability left (kata.isolation.container.settle)."""
    container.settle(the(judge.settings).container)


def give_the_starter_the_run(judge: JudgeToBe) -> None:
    """The starter and the learner's process it forked ahead take the run's folder,
    environment, limits and confinement (kata.learner_side.learner_process.prepare)."""
    settings = the(judge.settings)
    run = Prepare(
        cwd=settings.cwd, env=settings.env, memory=settings.memory, confine=settings.confine
    )
    from kata.learner_side.learner_process import prepare_beside

    prepare_beside(the(judge.learner)[0], run)


def cap_the_judges_memory(judge: JudgeToBe) -> None:
    apply_limits(the(judge.settings).memory)


def confine_the_judge(judge: JudgeToBe) -> None:
    """Landlock to the run's paths, in a domain beside the learner's processes' (which it
    must be able to stop), not around them."""
    confine_run(the(judge.settings).confine, signals_scoped=False)


def enter_the_run_folder(judge: JudgeToBe) -> None:
    """The run's working folder and environment, importing nothing from that folder."""
    settings = the(judge.settings)
    os.chdir(settings.cwd)
    os.environ.clear()
    os.environ.update(settings.env)
    keep_the_run_folder_off_the_path()
    if settings.chip_fd is not None:
        os.environ[CHIP_FD_VARIABLE] = str(settings.chip_fd)


def follow_the_judges_cache(judge: JudgeToBe) -> None:
    follow_compilation_cache(judge=True)  # the learner's processes keep the run's own


def take_the_events_key(judge: JudgeToBe) -> None:
    """Only now, with every process of the learner's code forked without it."""
    if judge.events_key_fd is not None:
        judge.events_key = key_from_pipe(judge.events_key_fd)
    if judge.events_key is not None:
        os.environ[EVENTS_KEY_VARIABLE] = judge.events_key


def hand_the_learner_to_the_judge(judge: JudgeToBe) -> None:
    connection, pid = the(judge.learner)
    hand_to_judge(connection, pid, confined=the(judge.settings).confine is not None)


# Every run, cold or warm, takes these steps in this order. A warm spare takes the first
# part while the learner edits, and the rest once the run's request brings its settings.
BEFORE_THE_RUN = (start_the_starter, give_the_judge_its_host_devices)
FOR_THE_RUN = (
    settle_the_container,
    give_the_starter_the_run,
    cap_the_judges_memory,
    confine_the_judge,
    enter_the_run_folder,
    follow_the_judges_cache,
    take_the_events_key,
    hand_the_learner_to_the_judge,
)
RECIPE = BEFORE_THE_RUN + FOR_THE_RUN


def take(steps: tuple[Callable[[JudgeToBe], None], ...], judge: JudgeToBe) -> None:
    for step in steps:
        step(judge)


def the(value: T | None) -> T:
    """A value an earlier step of the recipe set."""
    assert value is not None, "a step of the run's recipe taken out of its order"
    return value


def main(argv: list[str]) -> int:
    separator = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m kata.judge.start")
    parser.add_argument("--memory", type=int, default=0)
    parser.add_argument("--confine", type=json.loads, default=None, metavar="JSON")
    parser.add_argument("--container", type=json.loads, default={}, metavar="JSON")
    parser.add_argument("--host-devices", type=int, default=0)
    options = parser.parse_args(argv[:separator])
    pytest_args = argv[separator + 1 :]
    # Learner files are loaded by path, in pytest; `python -m` put the run's folder first.
    keep_the_run_folder_off_the_path()
    handed = {name: os.environ.pop(name, "") for name in (EVENTS_KEY_FD_VARIABLE, CHIP_FD_VARIABLE)}
    spec = container.Spec.of(options.container)
    supervise(spec, handed_descriptors(pytest_args, handed))
    preload_grading_modules()
    settings = RunSettings(
        memory=options.memory or None,
        confine=options.confine,
        container=spec,
        cwd=os.getcwd(),
        env=dict(os.environ),
        chip_fd=int(handed[CHIP_FD_VARIABLE]) if handed[CHIP_FD_VARIABLE] else None,
    )
    key_fd = int(handed[EVENTS_KEY_FD_VARIABLE]) if handed[EVENTS_KEY_FD_VARIABLE] else None
    take(RECIPE, JudgeToBe(options.host_devices, settings=settings, events_key_fd=key_fd))
    import pytest

    return int(pytest.main(pytest_args))


if __name__ == "__main__":
    # Once pytest returns, the run's events and output are written (kata.quick_exit).
    end_now(main(sys.argv[1:]))
