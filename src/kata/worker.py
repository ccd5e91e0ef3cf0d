"""The warm grader: a process that has imported JAX and pytest, forking a fresh child per run.

A cold check pays for a new Python, `import jax`, pytest's start-up and JAX's backend
before the first line of learner code runs. The worker pays once: it imports everything
but never runs JAX itself, then keeps one *spare* child forked from that clean state with
its backend already started (on a CPU; a GPU or TPU is left to the run). A grading
request goes to the spare, which runs pytest and exits; a new spare is forked once the
run is over, while the learner is editing.

Isolation is the cold grader's: every run is a process of its own, forked from a parent
that never ran learner code or compiled anything, so no imported module, jit cache, JAX
config or RNG state passes from one run to the next. (The spare compiles one program of
its own to pay XLA's start-up costs, then clears JAX's caches.) A run that hangs or
crashes takes only its own child down; the client kills it by process group, as it would
a cold run.

One worker serves a course: it holds a lock beside its socket for its whole life, so a
second one started for the same socket exits at once. It exits by itself when nobody has
used it for half an hour, or when its course folder or its socket is gone.

Protocol, one connection per run over a Unix socket in a private folder:
request  {"args": [...pytest arguments], "cwd": ..., "env": {...}, "output_limit": N, "seconds": S}
replies  {"pid": P}, then {"exit": code, "output": "..."} when the run ends.
request  {"stop": true}: the worker replies {"stopped": true, "runs": N} and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gc
import json
import os
import random
import signal
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

from kata.processes import OutputCollector
from kata.sandbox import accelerator_installed, apply_limits

IDLE_EXIT_SECONDS = 30 * 60.0
LIVENESS_CHECK_SECONDS = 1.0


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
        # A waiting spare must not hold a GPU or TPU (and, on a GPU, most of its memory)
        # that the learner's own programs may want: there, the run starts the backend.
        if not accelerator_installed():
            _warm_up_compiler()
        # Nothing made so far is garbage: keep the collector from walking it on every run.
        gc.freeze()
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


def _warm_up_compiler() -> None:
    """Start JAX's backend and compile one program, then forget it.

    XLA's first compilation in a process pays one-off set-up costs; paying them here takes
    them off the learner's wait. The caches are cleared afterwards, so the run compiles
    exactly what a cold run would, and compile-count checks judge the same.
    """
    import jax
    import numpy

    jax.jit(lambda x: x + 1)(numpy.float32(0)).block_until_ready()
    jax.clear_caches()


def _lock_path(socket_path: Path) -> Path:
    return socket_path.with_suffix(".lock")


def _claim(socket_path: Path) -> IO[str] | None:
    """The lock that makes this the course's only worker, or None if another holds it.

    A worker deletes its lock file as it ends, so the lock taken must still be the file
    at that path: one opened just before it was deleted locks nothing anyone else sees.
    """
    # Held open for the worker's life; the kernel releases it however the worker ends.
    lock = open(_lock_path(socket_path), "w")  # noqa: SIM115
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.stat(_lock_path(socket_path)).st_ino == os.fstat(lock.fileno()).st_ino:
            return lock
    except (BlockingIOError, FileNotFoundError):
        pass
    lock.close()
    return None


def serve(path: Path, course_root: Path, idle_seconds: float = IDLE_EXIT_SECONDS) -> None:
    lock = _claim(path)
    if lock is None:
        return  # another worker serves this course
    _preload()
    gc.freeze()  # the preloaded modules stay for good; forked children need not scan them
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a worker that died: the lock says none is listening
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o600)
    server.listen(8)
    server.settimeout(LIVENESS_CHECK_SECONDS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    last_used, runs = time.monotonic(), 0
    spare: _Spare | None = _Spare()
    try:
        while spare is not None:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                idle = time.monotonic() - last_used > idle_seconds
                if idle or not course_root.is_dir() or not path.exists():
                    return
                continue
            with connection:
                next_spare = _serve_one(connection, spare, runs)
            runs += next_spare is not spare
            spare, last_used = next_spare, time.monotonic()
    finally:
        # Stop taking connections first: a client that connects now is refused at once
        # and grades cold, rather than waiting on a worker that is going away.
        server.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if spare is not None:
            spare.discard()
        _lock_path(path).unlink()  # while still holding it: see _claim
        lock.close()


def _serve_one(connection: socket.socket, spare: _Spare, runs: int) -> _Spare | None:
    """Serve one request; the spare for the next one, or None when asked to stop."""
    stream = connection.makefile("rw", encoding="utf-8")
    line = stream.readline()
    if not line:  # someone checking that the worker answers
        return spare
    request = json.loads(line)
    if request.get("stop"):
        spare.discard()
        with contextlib.suppress(OSError):
            stream.write(json.dumps({"stopped": True, "runs": runs}) + "\n")
            stream.flush()
        return None
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
        time.sleep(0.002)  # the learner is waiting for this exit; polling is cheap


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m kata.worker", description=__doc__)
    parser.add_argument("socket", type=Path, help="the Unix socket to listen on")
    parser.add_argument("course", type=Path, help="the course root; the worker ends with it")
    parser.add_argument("--idle-seconds", type=float, default=IDLE_EXIT_SECONDS)
    options = parser.parse_args(argv)
    serve(options.socket, options.course, options.idle_seconds)


if __name__ == "__main__":
    main(sys.argv[1:])
