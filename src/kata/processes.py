"""The child processes that run checks: a cold `python -m pytest`, or a run of the warm worker.

Both look the same to the runner: it can poll one, kill it (its whole process group), and
read its exit code and its capped output. The warm worker itself is in kata.worker.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Protocol

from kata.sandbox import scrub_environment

WORKER_START_SECONDS = 60.0
WORKER_REPLY_SECONDS = 10.0


class OutputCollector(threading.Thread):
    """Drains a pipe, keeping the first `limit` bytes, so a flood never fills memory."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit = stream, limit
        self.kept = bytearray()
        self.total = 0

    def run(self) -> None:
        while chunk := self.stream.read(65536):
            self.total += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def text(self) -> str:
        shown = self.kept.decode("utf-8", errors="replace")
        if self.total > len(self.kept):
            shown += (
                f"\n… output truncated: {self.total:,} bytes printed, "
                f"the first {len(self.kept):,} shown"
            )
        return shown


def grading_environment(state_dir: Path) -> dict[str, str]:
    """The environment every grading process starts with (KATA_SOURCE comes per run)."""
    env = scrub_environment(dict(os.environ))
    env.update(
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        # Only the plugins grading needs: a learner's own pytest plugins (randomly,
        # xdist, ...) must not change how checks run, and skipping them starts faster.
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    # Compiled programs persist across runs, so a re-check recompiles only what the
    # learner changed. A cache hit still counts as a compilation for the checks.
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(state_dir / "jax-cache"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    return env


class ChecksProcess(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def finish(self) -> int | None: ...

    def output_text(self) -> str: ...


class ColdProcess:
    """pytest in a new process group, under the sandbox's limits."""

    def __init__(
        self, args: list[str], cwd: str, env: dict[str, str], output_limit: int, memory: int
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kata.sandbox", "--memory", str(memory), "--", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.process.pid
        assert self.process.stdout is not None
        self.output = OutputCollector(self.process.stdout, output_limit)
        self.output.start()

    def poll(self) -> int | None:
        return self.process.poll()

    def kill(self) -> None:
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


class WorkerUnavailable(Exception):
    """The warm worker did not take the run; grade cold instead."""


class WarmProcess:
    """One run on the warm worker: the same pytest arguments, in a pre-started process."""

    def __init__(
        self,
        connection: socket.socket,
        args: list[str],
        cwd: str,
        env: dict[str, str],
        output_limit: int,
        memory: int,
        seconds: float,
    ) -> None:
        self.connection = connection
        self.stream = connection.makefile("rw", encoding="utf-8")
        self.reply: dict | None = None
        request = {
            "args": args,
            "cwd": cwd,
            "env": env,
            "output_limit": output_limit,
            "memory": memory,
            "seconds": seconds,
        }
        try:
            self.stream.write(json.dumps(request) + "\n")
            self.stream.flush()
            self.pid = int(self._read_line(WORKER_REPLY_SECONDS)["pid"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            connection.close()
            raise WorkerUnavailable(str(error)) from error

    def _read_line(self, seconds: float | None) -> dict:
        ready, _, _ = select.select([self.connection], [], [], seconds)
        if not ready:
            raise TimeoutError("no reply from the warm grader")
        line = self.stream.readline()
        if not line:
            raise ConnectionError("the warm grader went away")
        return json.loads(line)

    def poll(self) -> int | None:
        if self.reply is None:
            try:
                self.reply = self._read_line(0)
            except TimeoutError:
                return None
            except (OSError, ValueError):
                self.reply = {"exit": None, "output": ""}
        return self.reply.get("exit")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.finish()

    def finish(self) -> int | None:
        if self.reply is None:
            try:
                self.reply = self._read_line(WORKER_REPLY_SECONDS)
            except (OSError, ValueError):
                self.reply = {"exit": None, "output": ""}
        self.connection.close()
        return self.reply.get("exit")

    def output_text(self) -> str:
        return (self.reply or {}).get("output", "")


# Finding, starting and reaching the warm worker ------------------------------------


def worker_supported() -> bool:
    return hasattr(os, "fork") and hasattr(socket, "AF_UNIX")


def worker_socket(course_root: Path) -> Path:
    """Where a course's worker listens: in a folder only this user may enter."""
    folder = Path(tempfile.gettempdir()) / f"kata-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    digest = hashlib.sha256(str(course_root.resolve()).encode()).hexdigest()[:16]
    return folder / f"{digest}.sock"


def connect_worker(path: Path) -> socket.socket | None:
    """A connection to the worker listening at `path`, or None if none does."""
    if not worker_supported() or not path.exists():
        return None
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(path))
    except OSError:
        client.close()
        return None
    return client


def worker_running(path: Path) -> bool:
    probe = connect_worker(path)
    if probe is None:
        return False
    probe.close()
    return True


def start_worker(path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a warm worker and wait until it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kata.worker", str(path)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + WORKER_START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        if worker_running(path):
            return process
        time.sleep(0.05)
    process.kill()
    raise WorkerUnavailable("the warm grader did not start")


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
