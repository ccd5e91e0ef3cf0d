"""The warm grader: a process that has imported JAX and pytest, forking a fresh child per run.

A cold check pays for a new Python, `import jax`, pytest's start-up and JAX's backend
before the first line of learner code runs. The worker pays once: it imports everything
but never runs JAX itself, then keeps one *spare* child forked from that clean state with
its backend already started. A grading request goes to the spare, which runs pytest and
exits; a new spare is forked once the run is over, while the learner is editing.

Isolation is the cold grader's: every run is a process of its own, forked from a parent
that never ran learner code or compiled anything, so no imported module, jit cache, JAX
config or RNG state passes from one run to the next. A run that hangs or crashes takes
only its own child down; the client kills it by process group, as it would a cold run.

Protocol, one connection per run over a Unix socket in a private folder:
request  {"args": [...pytest arguments], "cwd": ..., "env": {...}, "output_limit": N, "seconds": S}
replies  {"pid": P}, then {"exit": code, "output": "..."} when the run ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from kata.processes import OutputCollector
from kata.sandbox import apply_limits

# A worker nobody has used for this long exits by itself; so does one whose parent died.
IDLE_EXIT_SECONDS = 3600.0
PARENT_CHECK_SECONDS = 1.0


# The server side -------------------------------------------------------------------


def _preload() -> None:
    """Everything a run imports, imported once; JAX's backend is left for the spare."""
    import importlib

    import _pytest.config
    import jax  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import pytest_timeout  # noqa: F401

    # pytest imports its built-in plugins as it configures each run; import them now.
    for name in _pytest.config.default_plugins:
        importlib.import_module(f"_pytest.{name}")

    import kata.fixtures  # noqa: F401
    import kata.probes  # noqa: F401
    import kata.pytest_plugin  # noqa: F401
    import kata.timing  # noqa: F401


class _Spare:
    """A forked child with JAX's backend started, waiting for one request."""

    def __init__(self) -> None:
        request_read, self.request_write = os.pipe()
        self.output_read, output_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.request_write)
            os.close(self.output_read)
            _spare_main(request_read, output_write)
        os.close(request_read)
        os.close(output_write)

    def run(self, request: dict[str, Any]) -> None:
        with os.fdopen(self.request_write, "w", encoding="utf-8") as pipe:
            pipe.write(json.dumps(request))

    def discard(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def _spare_main(request_fd: int, output_fd: int) -> None:
    """The spare's life: get ready, wait for a request, run pytest, exit."""
    code = 70
    try:
        os.setsid()  # its own process group, so a client can stop all it starts
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        # A cold run's process seeds its global RNGs afresh; so does each warm one.
        random.seed()
        import numpy

        numpy.random.seed()
        import jax

        jax.devices()
        with os.fdopen(request_fd, encoding="utf-8") as pipe:
            text = pipe.read()
        if not text:  # the worker is closing down
            os._exit(0)
        request = json.loads(text)
        apply_limits(int(request["memory"]) or None)
        os.chdir(request["cwd"])
        os.environ.update(request["env"])
        import pytest

        code = int(pytest.main(request["args"]))
    except BaseException:  # noqa: BLE001 — whatever happened, this process must end here
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(path: Path) -> None:
    _preload()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o600)
    server.listen(8)
    server.settimeout(PARENT_CHECK_SECONDS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    parent, last_used = os.getppid(), time.monotonic()
    spare = _Spare()
    try:
        while True:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                # Whoever started it (a `kata watch`) is gone, or nobody has used it lately.
                if os.getppid() != parent or time.monotonic() - last_used > IDLE_EXIT_SECONDS:
                    return
                continue
            with connection:
                spare = _serve_one(connection, spare)
            last_used = time.monotonic()
    finally:
        spare.discard()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _serve_one(connection: socket.socket, spare: _Spare) -> _Spare:
    stream = connection.makefile("rw", encoding="utf-8")
    line = stream.readline()
    if not line:
        return spare
    request = json.loads(line)
    output = OutputCollector(os.fdopen(spare.output_read, "rb"), int(request["output_limit"]))
    output.start()
    spare.run(request)
    with contextlib.suppress(OSError):
        stream.write(json.dumps({"pid": spare.pid}) + "\n")
        stream.flush()
    code = _wait(spare.pid, float(request["seconds"]))
    output.join(timeout=5)
    with contextlib.suppress(OSError):
        stream.write(json.dumps({"exit": code, "output": output.text()}) + "\n")
        stream.flush()
    return _Spare()


def _wait(pid: int, seconds: float) -> int:
    """The child's exit code (negative for a signal); killed past `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        time.sleep(0.01)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
