"""The judge's handle on the learner's process: starting, asking, holding still and stopping it.

Under the grader, the starter forked beside the judge (kata.learner_side.learner_process.Starter)
forks each learner's process and stops them all while the judge times its own code; straight
under pytest, `LearnerProcess` starts and stops them itself. Every request crosses as data
(kata.handoffs.wire). Two records of the run come back with it: the digests of the arrays a
learner's process was sent or sent back (`all_seen`, so that a program is exported only for
values it never met), and, while a check counts compilations (`open_counts`), the kernel's
count of the process's CPU and bytes moved across each request.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kata.cpu_clocks import kernel_cpu
from kata.handoffs import learner_requests, starter_requests, wire
from kata.handoffs.environment import (
    LEARNER_CONFINED_VARIABLE,
    LEARNER_PID_VARIABLE,
    LEARNER_SOCKET_VARIABLE,
)
from kata.handoffs.learner_requests import LearnerRequest, Load
from kata.handoffs.starter_requests import BytesMoved, End, Fresh, Pause, Resume
from kata.handoffs.wire import LearnerError
from kata.isolation import pausing
from kata.learner_side.compile_counts import Compilations, bytes_moved
from kata.learner_side.learner_process import WHERE_SIGNAL

if TYPE_CHECKING:
    from kata.checking.exported_program import ExportedProgram

# How long a process the judge gave up on has to say where it was.
WHERE_SECONDS = 1.0
# How long one that hung up has to end of itself, so that the judge ends as it did.
ENDED_SECONDS = 1.0

# The compilation counts of the `count_compilations()` blocks open now
# (kata.checking.learner_calls): each request made meanwhile adds to them.
open_counts: list[Compilations] = []

# Digests of the arrays a learner's process of this run was sent or sent back (its
# processes share the run's scratch folder, so one can leave them to the next): what its
# code has seen. Arrays of a word or less (a scalar, a flag) are too common to count.
_seen_by_learner: set[bytes] = set()
SEEN_MIN_BYTES = 8


def _note_seen(arrays: list[bytes]) -> None:
    _seen_by_learner.update(_digest(a) for a in arrays if _informative(a))


def _informative(array: bytes) -> bool:
    """Whether an array says something a program could not guess: more than a word, and not
    one byte over and over (zeros, a fill), which no one needs to see to know."""
    return len(array) >= SEEN_MIN_BYTES and array.count(array[:1]) < len(array)


def _digest(array: bytes) -> bytes:
    return hashlib.blake2b(array, digest_size=16).digest()


def all_seen(arrays: list[bytes]) -> bool:
    """Whether a learner's process of this run was sent or sent back every array of
    `arrays` that says something (`_informative`), and there is one."""
    counted = [_digest(a) for a in arrays if _informative(a)]
    return bool(counted) and all(d in _seen_by_learner for d in counted)


class LearnerProcess:
    """The connection to the learner's process of the exercise being checked: a fresh one
    for each exercise (each check file), and again after one was stopped mid-call. Under
    the grader, the starter forked beside the judge (kata.learner_side.learner_process.Starter)
    forks it; straight under pytest (an IDE), it is started here."""

    def __init__(self) -> None:
        inherited = os.environ.pop(LEARNER_SOCKET_VARIABLE, None)
        self.starter = socket.socket(fileno=int(inherited)) if inherited is not None else None
        os.environ.pop(LEARNER_PID_VARIABLE, None)
        self.under_grader = self.starter is not None
        # One this process started (held, not collected, while it runs), if any.
        self.process: subprocess.Popen[bytes] | None = None
        self.connection: socket.socket | None = None
        self.pid = 0
        self.loaded = Load("")
        # The exercise's `host_devices` (course.toml): its process gets that many CPU devices.
        self.host_devices = 0
        # Programs checked and kept by `LearnerFunction._program_for`
        # (kata.checking.learner_calls) for the process running now, by function,
        # transformations and signature: emptied when it stops, as the next process is
        # another learner's file.
        self.programs: dict[tuple[Any, ...], ExportedProgram] = {}

    def _start(self) -> socket.socket:
        """A new learner's process, none of whose code has run yet: the judge's end of
        its socket (its pid in `self.pid`)."""
        if self.starter is not None:
            starter_requests.send(self.starter, Fresh(self.host_devices))
            reply, _ = wire.receive(self.starter)
            _, (fd,), _, _ = socket.recv_fds(self.starter, 1, 1)
            self.pid = int(reply["pid"])
            return socket.socket(fileno=fd)
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-m", "kata.learner_side.learner_process", str(theirs.fileno())]
        if os.environ.get(LEARNER_CONFINED_VARIABLE):
            command.append("--confine")
        if self.host_devices:
            command += ["--host-devices", str(self.host_devices)]
        self.process = subprocess.Popen(command, pass_fds=[theirs.fileno()])
        self.pid = self.process.pid
        theirs.close()
        return ours

    def load(self, exercise: Path, checks: Path | None, host_devices: int = 0) -> None:
        """Check `exercise` next, in a process of its own (with `host_devices` CPU devices,
        where not 0): nothing the one before ran is left in it."""
        self.stop()
        self.host_devices = host_devices
        self.loaded = Load(str(exercise), str(checks) if checks else "")
        try:
            self.ask(self.loaded)
        except _Ended as ended:
            # Every check of the file fails alike, and the next file gets a new process.
            raise LearnerError(
                ["ProcessEnded", "Exception"],
                f"importing {exercise.name} ended the process it ran in ({ended}): does it "
                "call os._exit() at the top level?",
                [],
            ) from None

    def ask(self, request: LearnerRequest, arrays: list[bytes] | None = None) -> dict[str, Any]:
        return self.ask_later(request, arrays)()

    def ask_later(
        self, request: LearnerRequest, arrays: list[bytes] | None = None
    ) -> Callable[[], dict[str, Any]]:
        """Send `request` now; what it returns waits for the reply. The judge may work in
        between, while the learner's process does, but ask nothing else of it: a caller
        that gives up on the reply stops the process (`stop`)."""
        if self.connection is None:
            self.connection = self._start()
            if not isinstance(request, Load):  # a new process: the file again
                self._exchange(self.connection, learner_requests.document(self.loaded), [])
        # While compilations are being counted, the kernel's count of the process's CPU
        # and bytes read and written across the request comes with the reply: a
        # compilation costs milliseconds and moves a cache entry, which the process's own
        # report cannot take back (kata.learner_side.compile_counts). So does the judge's wall
        # clock across it, from sending to the reply read: where the kernel's clocks are
        # dead, what is left to tell a call that compiled nothing.
        connection, pid = self.connection, self.pid
        counted = bool(open_counts and pid)
        before = kernel_cpu(pid) if counted else None
        moved_before = self._bytes_moved() if before is not None else None
        # Python's collector is kept out of a counted request on dead clocks too: it would
        # slow a call the judge's clock must find fast.
        with self._ending_as_a_failure(request):
            started = time.perf_counter()
            self._send(connection, learner_requests.document(request, counted), arrays or [])

        def reply() -> dict[str, Any]:
            with self._ending_as_a_failure(request):
                reply = self._receive(connection)
            reply["judge_seconds"] = time.perf_counter() - started
            after = kernel_cpu(pid) if before is not None and pid == self.pid else None
            reply["kernel_cpu"] = after.spent_since(before) if after is not None else None
            moved = self._bytes_moved() if after is not None and moved_before is not None else None
            reply["kernel_bytes"] = moved - moved_before if moved is not None else None
            if "error" in reply:
                error = reply["error"]
                raise LearnerError(error["types"], error["message"], error["frames"])
            return reply

        return reply

    @contextlib.contextmanager
    def _ending_as_a_failure(self, request: LearnerRequest) -> Iterator[None]:
        """The learner's process ending mid-request, as the check's failure (a `load`'s
        end is its caller's to tell)."""
        try:
            yield
        except _Ended as ended:
            if isinstance(request, Load):
                raise
            if self.under_grader:
                _end_as(ended.status)
            raise LearnerError(
                ["ProcessEnded", "Exception"], f"the learner's code ended its process ({ended})", []
            ) from None

    @contextlib.contextmanager
    def held_still(self) -> Iterator[None]:
        """Every process of the learner's code stopped for the block, and continued after
        (kata.isolation.pausing): what the judge times in it shares the CPU with none of
        them. Under the grader the starter, a subreaper, stops all its descendants, however
        detached; straight under pytest, only the learner's process and its descendants
        are stopped, from here."""
        if self.starter is None:
            stopped = pausing.stop_tree(self.pid, including_root=True) if self.pid else set()
            before = pausing.stopped_cpu(self.pid, including_root=True) if self.pid else {}
            try:
                yield
                ran = pausing.ran_while_stopped(self.pid, before, True) if self.pid else []
            finally:
                pausing.resume(stopped)
            _assert_stayed_stopped(ran)
            return
        starter_requests.send(self.starter, Pause())
        answered = False
        try:
            wire.receive(self.starter)
            answered = True
            yield
        finally:
            if not answered:  # interrupted before the starter's answer: it comes first
                wire.receive(self.starter)
            starter_requests.send(self.starter, Resume())
            reply, _ = wire.receive(self.starter)
        _assert_stayed_stopped(reply.get("ran", []))

    def _bytes_moved(self) -> int | None:
        """`bytes_moved` of the learner's process, read by the starter where there is one:
        only a process whose Landlock domain holds the learner's may read them, and a warm
        judge's domain is beside its starter's, not around it."""
        if self.starter is None:
            return bytes_moved(self.pid)
        starter_requests.send(self.starter, BytesMoved(self.pid))
        reply, _ = wire.receive(self.starter)
        return reply.get("moved")

    def _exchange(
        self, connection: socket.socket, request: dict[str, Any], arrays: list[bytes]
    ) -> dict[str, Any]:
        self._send(connection, request, arrays)
        return self._receive(connection)

    def _send(
        self, connection: socket.socket, request: dict[str, Any], arrays: list[bytes]
    ) -> None:
        with self._talking(connection):
            _note_seen(arrays)
            wire.send(connection, request, arrays)

    def _receive(self, connection: socket.socket) -> dict[str, Any]:
        with self._talking(connection):
            document, received = wire.receive(connection)
            _note_seen(received)
            return wire.decode(document, received)

    @contextlib.contextmanager
    def _talking(self, connection: socket.socket) -> Iterator[None]:
        try:
            yield
        except (EOFError, BrokenPipeError, ConnectionResetError):
            # It ended (or hung up): give it a moment to end of itself, for its status.
            raise _Ended(self.stop(ENDED_SECONDS)) from None
        except BaseException as stopped:
            # Stopped mid-call (the check's time ran out) or a broken message: the process
            # is busy or out of step; the next call gets a fresh one. First, where was it?
            stopped.learner_frames = self._where_stuck(connection)  # type: ignore[attr-defined]
            self.stop()
            raise

    def _where_stuck(self, connection: socket.socket) -> list[tuple[str, int, str]]:
        """The learner's lines the process was running when the judge gave up on it
        (kata.learner_side.learner_process.StoppedByJudge), if it answers within a second."""
        if not self.pid:
            return []
        try:
            os.kill(self.pid, WHERE_SIGNAL)
            connection.settimeout(WHERE_SECONDS)
            reply = wire.decode(*wire.receive(connection))
            return LearnerError(**reply["error"]).frames if "error" in reply else []
        except Exception:  # noqa: BLE001 — busy in native code, or gone: no line to show
            return []

    def stop(self, wait: float = 0.0) -> int | None:
        """End the learner's process (after `wait` seconds for it to end of itself); its
        wait status, where known."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        self.programs.clear()
        pid, self.pid = self.pid, 0
        if not pid:
            return None
        if self.starter is not None:
            starter_requests.send(self.starter, End(pid, wait))
            status = wire.receive(self.starter)[0]["status"]
            return None if status is None else int(status)
        with contextlib.suppress(subprocess.TimeoutExpired):
            assert self.process is not None
            self.process.wait(wait)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = None
        self.process = None
        return status


class _Ended(Exception):
    """The learner's process ended mid-request; `status` is its wait status, if known."""

    def __init__(self, status: int | None) -> None:
        self.status = status
        code = os.waitstatus_to_exitcode(status) if status is not None else None
        super().__init__(f"exit code {code}" if code is not None else "it ended")


def _end_as(status: int | None) -> None:
    """End this process as the learner's ended (os._exit, a crash, the kernel's OOM
    killer): the run then reports the check it was on exactly as it reported a single
    process's end, and grades the checks left in a new one."""
    code = os.waitstatus_to_exitcode(status) if status is not None else 70
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those take no handler (OSError)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def _assert_stayed_stopped(ran: list[int]) -> None:
    if ran:
        raise AssertionError(
            f"{len(ran)} process(es) of your code ran while the grader timed its own code, "
            "though the grader had stopped every one (something continued them: a timer "
            "armed to send SIGCONT, a signal on I/O or a parent's death): what it timed "
            "shared the CPU with your code, so it cannot be judged"
        )
