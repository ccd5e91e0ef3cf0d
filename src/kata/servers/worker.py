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

One worker serves a course: it holds the course's lock for its whole life. A second one
started with the same identity (see kata.servers.warm.worker_socket) exits at once; one with
another identity asks the first to stop and takes over. A worker exits by itself when
nobody has used it for half an hour, or when its course folder or its socket is gone.

Protocol, one connection per request over a Unix socket in a private folder:
request  a run (kata.handoffs.run_request.RunRequest: pytest's arguments, its folder,
          environment, output limit, memory cap, Landlock paths, container, seconds and
          events key), sent with the judge's end of the events pipe (SCM_RIGHTS)
replies  {"pid": P}, then {"exit": code, "output": "..."} when the run ends;
         {"busy": true} at once while another run is going.
request  {"stop": true}: the worker replies {"stopped": true, "runs": N} and exits.
Every request carries "token", the secret in the worker's token file (see
kata.servers.warm.worker_token); one without it is refused, and so is one from a peer
(SO_PEERCRED) of another user or inside any run, and, where Landlock is available, one
that asks for no confinement. After each run, before its exit goes out, the socket and
the token are replaced: nothing that connected while a run went on is ever served.

Each spare is a run's container (kata.isolation.container) with the judge inside, built
while the learner edits; the request brings its mounts and its memory cap, and the judge
confines itself (kata.isolation.confinement) to the paths it names. The worker never is.
A run is over when its container is empty, before its exit is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import random
import secrets
import select
import signal
import socket
import struct
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kata.grading_platform import opens_an_accelerator
from kata.handoffs import events_pipe
from kata.handoffs.output_collector import OutputCollector
from kata.handoffs.run_request import MalformedRequest, RunRequest, asks_to_stop
from kata.isolation import cgroups, confinement, container
from kata.judge.start import (
    BEFORE_THE_RUN,
    FOR_THE_RUN,
    JudgeToBe,
    RunSettings,
    preload_grading_modules,
    take,
)
from kata.quick_exit import end_now
from kata.servers.serving import LIVENESS_CHECK_SECONDS, claim, listen, write_token
from kata.servers.warm import SPARE_FAILED, stop_worker, token_file, worker_running

IDLE_EXIT_SECONDS = 30 * 60.0
# A request is pytest's arguments, paths and an environment: far below this.
REQUEST_LIMIT = 4 * 2**20


# The server side -------------------------------------------------------------------


class _Spare:
    """A run's container with a judge inside, ready to run pytest at once, waiting for one
    request. `pid` is the container's supervisor (kata.isolation.container), a process group
    leader: killing its group ends the run."""

    def __init__(self, host_devices: int = 0) -> None:
        self.requests, theirs = socket.socketpair()
        self.output_read, output_write = os.pipe()
        self.built, built = os.pipe()  # a byte once its container (and cgroup) exists
        self.pid = os.fork()
        if self.pid == 0:
            os.setpgid(0, 0)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            keep = {0, 1, 2, theirs.fileno(), output_write}
            container.close_all_but(keep | {built})  # the listening socket, the lock: not the run's
            supervisor = container.enter(container.Spec(), keep_fds=keep)
            if supervisor is None:
                _spare_main(theirs, output_write, host_devices)
            os.write(built, b"1")
            os.close(built)
            signal.signal(signal.SIGTERM, lambda *_: supervisor.kill())
            container.exit_as(supervisor.wait())
        theirs.close()
        os.close(output_write)
        os.close(built)

    def wait_until_built(self) -> None:
        """Until its container exists: the run's memory cap goes on its cgroup."""
        os.read(self.built, 1)  # b"" if it died first: the run then reports that
        os.close(self.built)

    def run(self, request: RunRequest, descriptors: list[int]) -> None:
        """Hand the spare its request, the judge's end of the run's events pipe and, where
        the run times on a chip, its connection to the chip holder."""
        with self.requests:
            socket.send_fds(self.requests, [request.line("")], descriptors)

    def discard(self) -> None:
        # Its process group too: whatever a learner's code started goes with it.
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def _spare_main(requests: socket.socket, output_fd: int, host_devices: int) -> None:
    """The spare's life, as its container's judge (with the course's `host_devices`): get
    ready, wait for a request, run pytest, exit."""
    code = SPARE_FAILED
    try:
        # Its own process group, so a client can stop all it starts (it is one already
        # where no container was built around it).
        with contextlib.suppress(PermissionError):
            os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as in a cold run, not the worker's
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        # A cold run's process seeds its global RNGs afresh; so does each warm one.
        random.seed()
        import numpy

        numpy.random.seed()
        # Forked before this process starts JAX's backend, which a fork cannot copy.
        # A waiting spare must not hold a GPU or TPU (and, on a GPU, most of its memory)
        # that the learner's own programs may want: there, the run starts the backend. On
        # the CPU (kata.grading_platform's choice on a machine with a chip too), it
        # warms up.
        warm_up = None if opens_an_accelerator(os.environ) else _warm_up_compiler
        judge = JudgeToBe(host_devices, warm_up=warm_up)
        take(BEFORE_THE_RUN, judge)
        if warm_up is not None:
            warm_up()
        # What is left now stays: keep the collector from walking it again in every run.
        gc.collect()
        gc.freeze()
        request, descriptors = _receive_request(requests)
        if request is None:  # the worker is closing down
            os._exit(0)
        events_fd, *chip = descriptors
        # Where a cold run's `python -m` would be, with its environment (`-I` left the
        # folder off the path).
        judge.settings = RunSettings(
            memory=request.memory,
            confine=request.confine,
            container=container.Spec.of(request.container),
            cwd=request.cwd,
            env=request.env,
            chip_fd=chip[0] if chip else None,
        )
        judge.events_key = request.events_key
        take(FOR_THE_RUN, judge)
        import pytest

        code = int(pytest.main(events_pipe.with_descriptor(request.args, events_fd)))
    except BaseException:  # noqa: BLE001 — whatever happened, this process must end here
        traceback.print_exc()  # into the run's output: why the spare could not judge
        code = SPARE_FAILED
    finally:
        end_now(code)


def _receive_request(requests: socket.socket) -> tuple[RunRequest | None, list[int]]:
    """The run's request and the descriptors that came with it (`_Spare.run`)."""
    text, descriptors = b"", []
    while True:
        chunk, fds, _, _ = socket.recv_fds(requests, 1 << 20, 2)
        descriptors += fds
        if not chunk:
            break
        text += chunk
    if not text or not descriptors:
        return None, []
    return RunRequest.read(json.loads(text)), descriptors


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


def serve(
    path: Path,
    course_root: Path,
    lock_path: Path,
    idle_seconds: float = IDLE_EXIT_SECONDS,
    end_with_parent: bool = False,
) -> None:
    """Serve runs until idle for `idle_seconds`, the course or the socket is gone, a stop
    request comes, or (`end_with_parent`) the process that started it has ended: its
    orphan is adopted by another, so the parent's pid changes."""
    parent = os.getppid()
    lock = claim(lock_path, path, worker_running, stop_worker)
    if lock is None:
        return
    preload_grading_modules()
    host_devices = _course_host_devices(course_root)
    gc.collect()
    gc.freeze()  # the preloaded modules stay for good; forked children need not scan them
    confinement.become_subreaper()
    # Its own setting, as it started (KATA_CONFINEMENT is part of its identity): a request
    # cannot ask for a run without it.
    confined = confinement.abi_version() > 0
    token = write_token(path)
    server = listen(path)

    def renew() -> None:
        """A new socket and token once a run is over, before its verdict goes out: what
        connected while it ran is dropped with the old socket, never served, and the
        token a run might have seen is worth nothing."""
        nonlocal server, token
        token = write_token(path)
        server, used = listen(path), server
        used.close()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    spare, runs, last_used = _Spare(host_devices), 0, time.monotonic()
    try:
        while True:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                idle = time.monotonic() - last_used > idle_seconds
                orphaned = end_with_parent and os.getppid() != parent
                if idle or orphaned or not course_root.is_dir() or not path.exists():
                    return
                continue
            request, descriptors = _read_request(connection)
            with connection, contextlib.ExitStack() as received:
                for fd in descriptors:
                    received.callback(os.close, fd)
                if request is None:  # someone checking that the worker answers
                    continue
                refusal = _refusal(connection, request, token, descriptors)
                if refusal:
                    _reply(connection, {"error": refusal})
                    continue
                if asks_to_stop(request):
                    path.unlink(missing_ok=True)  # nobody finds a worker that is ending
                    _reply(connection, {"stopped": True, "runs": runs})
                    return
                try:
                    run = RunRequest.read(request)
                except MalformedRequest as error:
                    _reply(connection, {"error": str(error)})
                    continue
                if confined and run.confine is None:
                    _reply(connection, {"error": "this warm grader confines every run"})
                    continue
                _run(connection, server, spare, run, descriptors, renew)
            spare, runs, last_used = _Spare(host_devices), runs + 1, time.monotonic()
    finally:
        # Refuse connections first: a client that connects now grades cold at once
        # rather than waiting on a worker that is going away.
        server.close()
        path.unlink(missing_ok=True)
        token_file(path).unlink(missing_ok=True)
        spare.discard()
        lock_path.unlink(missing_ok=True)  # while still holding it: see serving.claim
        lock.close()


def _course_host_devices(course_root: Path) -> int:
    """The course's most `host_devices` (course.toml), for every run's judge; a course
    changed meanwhile is served as it was when this worker started."""
    from kata.course import CourseError, load_course

    try:
        return load_course(course_root).host_devices
    except CourseError:  # a course it cannot read: its runs then fail and say so
        return 0


def _read_request(connection: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """The request on a new connection and the descriptors sent with it; None for a bare
    probe or one that makes no sense (or passes REQUEST_LIMIT bytes)."""
    connection.settimeout(LIVENESS_CHECK_SECONDS)
    text, descriptors = b"", []
    try:
        while b"\n" not in text and len(text) < REQUEST_LIMIT:
            chunk, fds, _, _ = socket.recv_fds(connection, 65536, 2)
            descriptors += fds
            if not chunk:
                break
            text += chunk
        request = json.loads(text.partition(b"\n")[0]) if b"\n" in text else None
    except (OSError, ValueError):
        request = None
    return (request if isinstance(request, dict) else None), descriptors


def _refusal(
    connection: socket.socket,
    request: dict[str, Any],
    token: str,
    descriptors: list[int],
) -> str | None:
    """Why the request is not served by whoever it is from, or None."""
    if not _peer_outside_runs(connection):
        return "not a request from this worker's user, from outside every run"
    if not secrets.compare_digest(str(request.get("token", "")), token):
        return "not a request from this worker's user"
    if asks_to_stop(request):
        return None
    if len(descriptors) not in (1, 2):
        return "a grading request comes with its events pipe (and at most a chip's connection)"
    return None


def _peer_outside_runs(connection: socket.socket) -> bool:
    """Whether the peer is this user's and in no run: a run's processes are in a PID
    namespace of their own (then SO_PEERCRED's pid is theirs seen from here, or 0), or,
    without one, descend from this worker, which is their subreaper."""
    size = struct.calcsize("3i")
    try:
        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size)
        pid, uid, _ = struct.unpack("3i", credentials)
        if uid != os.getuid() or pid <= 0:
            return False
        if os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid"):
            return False
        while pid > 1:
            if pid == os.getpid():
                return False
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
                pid = int(stat.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError):  # gone, or not ours to look at: not served
        return False
    return True


def _reply(connection: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        connection.sendall(json.dumps(message).encode() + b"\n")


def _run(
    connection: socket.socket,
    server: socket.socket,
    spare: _Spare,
    request: RunRequest,
    descriptors: list[int],
    renew: Callable[[], None],
) -> None:
    """Hand the request to the spare and report its exit, turning other clients away;
    `renew` the listening socket between the two."""
    try:
        container.Spec.of(request.container)
    except (KeyError, TypeError, ValueError) as error:
        _reply(connection, {"error": f"not a grading request: {error}"})
        return
    try:
        spare.wait_until_built()
        cgroups.memory_cap_of(spare.pid, request.memory)
    except OSError as error:
        _reply(connection, {"error": f"the run's memory cap could not be set: {error}"})
        return
    output = OutputCollector(os.fdopen(spare.output_read, "rb"), request.output_limit)
    output.start()
    spare.run(request, descriptors)
    _reply(connection, {"pid": spare.pid})
    code = _wait(spare.pid, request.seconds, server, connection)
    confinement.end_descendants()  # before the reply: the run is over when it says so
    renew()
    output.join(timeout=5)
    _reply(connection, {"exit": code, "output": output.text()})


def _wait(pid: int, seconds: float, server: socket.socket, client: socket.socket) -> int:
    """The child's exit code (negative for a signal); killed past `seconds`, or once the
    client that asked for it has gone (a notebook's kernel shut down mid-run): nobody
    waits for its verdict.

    Clients that come meanwhile are told at once that the worker is busy, and grade cold:
    queued, they would wait for this run, and a request they gave up on would still run.
    """
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline or _hung_up(client):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        # A short poll: the learner is waiting for this exit.
        ready, _, _ = select.select([server], [], [], 0.002)
        if ready:
            with contextlib.suppress(OSError), server.accept()[0] as waiting:
                _reply(waiting, {"busy": True})


def _hung_up(client: socket.socket) -> bool:
    """Whether the client closed its end: a client sends nothing after its request, so
    its socket turns readable only at its end."""
    ready, _, _ = select.select([client], [], [], 0)
    if not ready:
        return False
    try:
        return client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m kata.servers.worker", description=__doc__)
    parser.add_argument("socket", type=Path, help="the Unix socket to listen on")
    parser.add_argument("course", type=Path, help="the course root; the worker ends with it")
    parser.add_argument("lock", type=Path, help="the course's lock file: one worker per course")
    parser.add_argument("--idle-seconds", type=float, default=IDLE_EXIT_SECONDS)
    parser.add_argument(
        "--end-with-parent", action="store_true", help="end when the process that started it ends"
    )
    options = parser.parse_args(argv)
    serve(
        options.socket,
        options.course,
        options.lock,
        options.idle_seconds,
        options.end_with_parent,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
