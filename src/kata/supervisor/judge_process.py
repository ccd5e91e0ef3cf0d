"""The judge's process as the supervisor sees it: a cold one, `python -m kata.judge.start`
running pytest in a new process, or a warm run's.

A run of the warm grader (kata.servers.warm) looks the same to the runner: it can poll one,
kill it (its whole process group), and read its exit code and its capped output.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Protocol

from kata.grading_platform import grading_platform
from kata.handoffs.environment import CHIP_FD_VARIABLE, EVENTS_KEY_FD_VARIABLE
from kata.handoffs.output_collector import OutputCollector
from kata.handoffs.run_request import RunRequest
from kata.isolation.limits import scrub_environment
from kata.versions import compilation_cache_reloads_correctly

# How long a stopped cold run's supervisor gets to end what the run started.
SUPERVISOR_STOP_SECONDS = 2.0


def grading_environment(state_dir: Path) -> dict[str, str]:
    """The environment every grading process starts with (KATA_SOURCE comes per run): on
    the platform this run grades on (kata.grading_platform), so that no two of kata's
    processes ask for one chip."""
    env = scrub_environment(dict(os.environ)) | grading_platform().environment()
    env.update(
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        # Only the plugins grading needs: a learner's own pytest plugins (randomly,
        # xdist, ...) must not change how checks run, and skipping them starts faster.
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    for options in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):  # for the learner's own pytest runs
        env.pop(options, None)
    # Compiled programs persist across runs, so a re-check recompiles only what the
    # learner changed. A cache hit still counts as a compilation for the checks. On a
    # jaxlib that reads them back wrong, every run compiles afresh.
    if not compilation_cache_reloads_correctly():
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        return env
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(state_dir / "jax-cache"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    return env


class ChecksProcess(Protocol):
    pid: int

    def wait(self, seconds: float) -> int | None:
        """The exit code once the run has ended, waiting at most `seconds`; else None."""
        ...

    def kill(self) -> None: ...

    def finish(self) -> int | None: ...

    def output_text(self) -> str: ...


class ColdProcess:
    """The `request`ed run's judge started anew: pytest in a new process group, in its own
    container, writing its events to `events_fd` (kata.handoffs.events_pipe), with
    `host_devices` CPU devices (kata.judge.start.judge_host_devices)."""

    def __init__(
        self,
        request: RunRequest,
        events_fd: int,
        host_devices: int = 0,
        chip_fd: int | None = None,
    ) -> None:
        judge = ["--memory", str(request.memory or 0), "--container", json.dumps(request.container)]
        judge += ["--host-devices", str(host_devices)]
        if request.confine is not None:
            judge += ["--confine", json.dumps(request.confine)]
        # The events' key goes through a pipe, never the command line or the environment,
        # which the learner's process could read (kata.handoffs.seal).
        key_read, key_write = os.pipe()
        chip = {} if chip_fd is None else {CHIP_FD_VARIABLE: str(chip_fd)}
        os.write(key_write, request.events_key.encode())
        os.close(key_write)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kata.judge.start", *judge, "--", *request.args],
                cwd=request.cwd,
                env=request.env | {EVENTS_KEY_FD_VARIABLE: str(key_read)} | chip,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=[key_read, events_fd, *([] if chip_fd is None else [chip_fd])],
            )
        finally:
            os.close(key_read)
        self.pid = self.process.pid
        assert self.process.stdout is not None
        self.output = OutputCollector(self.process.stdout, request.output_limit)
        self.output.start()

    def wait(self, seconds: float) -> int | None:
        try:
            return self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        # The sandbox's supervisor ends the run and all it started, detached or not; the
        # group kill is for a supervisor that is gone or stuck.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=SUPERVISOR_STOP_SECONDS)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.process.kill()
        self.process.wait()

    def finish(self) -> int | None:
        self.process.wait()
        self.output.join(timeout=5)
        return self.process.returncode

    def output_text(self) -> str:
        return self.output.text()
