"""The warm grader's client side: finding, starting, reaching and stopping the course's worker.

The worker itself (the server, `python -m kata.servers.worker`) is in kata.servers.worker.
A grading run asks `warm_grader` for the course's worker; the runner connects to it once
per child run and falls back to a cold process whenever it does not answer.
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
import sysconfig
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kata.handoffs.run_request import RunRequest, stop_line
from kata.isolation.caches import CACHE_VARIABLE

# The exit code of a warm spare that failed before pytest began (its traceback is in the run's
# output): the runner then grades cold.
SPARE_FAILED = 70

WORKER_START_SECONDS = 60.0
WORKER_REPLY_SECONDS = 10.0
CONNECT_SECONDS = 1.0


class WorkerUnavailable(Exception):
    """The warm worker did not take the run; grade cold instead."""


class WarmProcess:
    """One run on the warm worker: the same pytest arguments, in a pre-started process."""

    def __init__(
        self,
        connection: socket.socket,
        request: RunRequest,
        token: str,
        events_fd: int | None = None,
        chip_fd: int | None = None,
    ) -> None:
        self.connection = connection
        self.received = b""
        self.reply: dict | None = None
        try:
            # The judge's end of the events pipe goes with the request, and only to it; so
            # does the run's connection to the chip holder, where it has one.
            data = request.line(token)
            descriptors = [fd for fd in (events_fd, chip_fd) if fd is not None]
            sent = socket.send_fds(connection, [data], descriptors)
            connection.sendall(data[sent:])
            reply = self._read_line(WORKER_REPLY_SECONDS)
            if "pid" not in reply:  # busy with another run, or refusing this one
                raise WorkerUnavailable(f"the warm grader answered {reply}")
            self.pid = int(reply["pid"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            connection.close()
            raise WorkerUnavailable(str(error)) from error

    def _read_line(self, seconds: float) -> dict:
        """The worker's next reply. Bytes are buffered here, not in a file object, so that
        `select` never waits on a reply that has already arrived."""
        deadline = time.monotonic() + seconds
        while b"\n" not in self.received:
            remaining = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.connection], [], [], remaining)
            if not ready:
                raise TimeoutError("no reply from the warm grader")
            chunk = self.connection.recv(65536)
            if not chunk:
                raise ConnectionError("the warm grader went away")
            self.received += chunk
        line, _, self.received = self.received.partition(b"\n")
        return json.loads(line)

    def wait(self, seconds: float) -> int | None:
        if self.reply is None:
            try:
                self.reply = self._read_line(seconds)
            except TimeoutError:
                return None
            except (OSError, ValueError):
                self.reply = self._lost()
        return self.reply.get("exit")

    def _lost(self) -> dict:
        """The worker is gone mid-run: end the run as if killed, so it is judged a crash."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        return {"exit": -signal.SIGKILL, "output": ""}

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.finish()

    def finish(self) -> int | None:
        if self.reply is None:
            try:
                self.reply = self._read_line(WORKER_REPLY_SECONDS)
            except (OSError, ValueError):
                self.reply = self._lost()
        self.connection.close()
        return self.reply.get("exit")

    def output_text(self) -> str:
        return (self.reply or {}).get("output", "")


# Finding, starting and reaching the warm worker ------------------------------------

# Set (to anything but 0) to grade every run in a new process and start no warm grader.
COLD_VARIABLE = "KATA_COLD"
# Read by Python, JAX and its backends as they start.
WORKER_SETTINGS = ("JAX_", "XLA_", "TPU_", "CUDA_", "NVIDIA_", "PYTHON")
# kata's own settings a worker takes as it starts: whether runs are confined, and in what,
# and whether its CPU clocks are to read as frozen (kata.cpu_clocks).
KATA_WORKER_SETTINGS = ("KATA_CONFINEMENT", "KATA_CONTAINER_WITHOUT", "KATA_CPU_CLOCKS")


def worker_supported() -> bool:
    return hasattr(os, "fork") and hasattr(socket, "AF_UNIX")


def cold_requested() -> bool:
    return os.environ.get(COLD_VARIABLE, "0") not in ("", "0")


def worker_folder() -> Path:
    """Where workers' sockets and locks live: a folder only this user may enter."""
    folder = Path(tempfile.gettempdir()) / f"kata-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise PermissionError(f"{folder} belongs to another user")
    os.chmod(folder, 0o700)
    return folder


def _course_key(course_root: Path) -> str:
    return hashlib.sha256(str(course_root.resolve()).encode()).hexdigest()[:16]


def worker_lock(course_root: Path) -> Path:
    """The lock that the course's one worker holds."""
    return worker_folder() / f"{_course_key(course_root)}.lock"


def worker_socket(course_root: Path, env: Mapping[str, str]) -> Path:
    """Where the course's worker listens, named for the course and the worker's identity
    (`engine_identity`): when it changes, the next check starts a worker under the new
    name, which takes over from the old one."""
    return worker_folder() / f"{_course_key(course_root)}-{engine_identity(env)}.sock"


def engine_identity(env: Mapping[str, str]) -> str:
    """What a running server of kata's cannot see change under it: the Python and the
    packages installed for it, kata's own code, and the settings JAX reads as it is
    imported (from `env`)."""
    engine = sorted(Path(__file__).parents[1].rglob("*.py"))
    installed = Path(sysconfig.get_path("purelib"))
    identity = [
        sys.executable,
        *(f"{path}:{path.stat().st_mtime_ns}" for path in [installed, *engine]),
        *sorted(f"{k}={v}" for k, v in env.items() if _worker_setting(k)),
    ]
    return hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]


def _worker_setting(name: str) -> bool:
    """A variable a worker reads once, as it starts, so one started under another value
    must not be reused. `import jax` sets TPU_SKIP_MDS_QUERY itself, so it does not count.
    """
    if name in KATA_WORKER_SETTINGS:
        return True
    return name.startswith(WORKER_SETTINGS) and name != "TPU_SKIP_MDS_QUERY"


def connect_worker(path: Path) -> socket.socket | None:
    """A connection to the worker listening at `path`, or None if none does."""
    if not worker_supported() or not path.exists():
        return None
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(CONNECT_SECONDS)  # a stuck worker's full queue must not hang a check
    try:
        client.connect(str(path))
    except OSError:
        client.close()
        return None
    client.settimeout(None)
    return client


def token_file(path: Path) -> Path:
    return path.with_suffix(".token")


def worker_token(path: Path) -> str:
    """The secret every request to the worker at `path` carries. A confined run cannot
    read it (its folder is outside the run's rules), so code being graded cannot ask the
    worker for a run of its own, under rules of its own choosing."""
    try:
        return token_file(path).read_text(encoding="utf-8")
    except OSError:
        return ""


def worker_running(path: Path) -> bool:
    probe = connect_worker(path)
    if probe is None:
        return False
    probe.close()
    return True


def worker_starting(course_root: Path, path: Path) -> bool:
    """Whether the course's worker for `path` is still starting: nothing answers at `path`
    yet, but the course's lock (`worker_lock`) is held, which only a live process can do
    (the kernel lets a lock go with the last process holding it), and it names `path`. A
    worker takes the lock and writes its socket's path into it before it imports JAX and
    pytest, and listens only once it has (kata.servers.worker.serve). A worker that is
    ending holds it too, for the moment between removing its socket and its lock."""
    if not worker_supported() or worker_running(path):
        return False
    try:
        with open(worker_lock(course_root), encoding="utf-8") as lock:
            return _held_elsewhere(lock) and lock.read().strip() == str(path)
    except OSError:  # no lock file: no worker has started, or the last one ended
        return False


def _held_elsewhere(lock: IO[str]) -> bool:
    """Whether another open of `lock`'s file holds its lock: told by asking for a shared
    one without waiting, and letting it go at once (a worker claiming the lock meanwhile
    finds it busy for that instant, and tries again 50 ms later: serving.claim)."""
    import fcntl  # POSIX only, as workers are (`worker_supported`)

    try:
        fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(lock, fcntl.LOCK_UN)
    return False


# Whether the workers this process starts end with it (a notebook's kernel), rather than
# outliving it for the next `kata check` and ending after 30 idle minutes (the worker's
# IDLE_EXIT_SECONDS).
_workers_end_with_this_process = False


def end_workers_with_this_process() -> None:
    """Make the warm workers this process starts end when it does: a notebook's kernel
    shut down left its worker running (seen 7 minutes on), as a terminal's `kata check`
    means it to for the next check."""
    global _workers_end_with_this_process
    _workers_end_with_this_process = True


def server_command(module: str, *args: str) -> list[str]:
    """The command that starts kata's long-lived `module` (the warm worker, the chip holder):
    an isolated Python (`-I`), so that neither its working folder nor PYTHON* variables set
    its sys.path, with the folders the user's PYTHONPATH names put back, as absolute paths:
    an install beside a system's own JAX lives there (`pip install --target`, on a TPU VM
    whose JAX and libtpu come with its image; without them, no server of kata's started
    there, and every check was cold)."""
    named = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    folders = [str(Path(folder).resolve()) for folder in named if folder]
    start = (
        "import runpy, sys; "
        f"sys.path[0:0] = {folders!r}; "
        "sys.argv.pop(0); "
        "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-I", "-c", start, module, *args]


def ends_with_this_process() -> bool:
    """Whether this process is a notebook's kernel (`end_workers_with_this_process`)."""
    return _workers_end_with_this_process


def start_worker(path: Path, course_root: Path, env: dict[str, str]) -> None:
    """Start the course's warm worker in the background; it serves once it has imported JAX."""
    empty = path.parent / "empty"  # its working folder holds nothing a run could use
    empty.mkdir(mode=0o700, exist_ok=True)
    subprocess.Popen(
        server_command(
            "kata.servers.worker",
            str(path),
            str(course_root.resolve()),
            str(worker_lock(course_root)),
            *(["--end-with-parent"] if _workers_end_with_this_process else []),
        ),
        cwd=empty,
        # Each run names its own cache, if any (kata.isolation.caches); a learner's process
        # forked from the worker reads the worker's starting environment in /proc/self.
        env={name: value for name, value in env.items() if name != CACHE_VARIABLE},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C in the learner's terminal is not for it
    )


def wait_for_worker(path: Path, seconds: float = WORKER_START_SECONDS) -> bool:
    """Whether the worker at `path` answers within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if worker_running(path):
            return True
        time.sleep(0.05)
    return False


def stop_worker(path: Path, seconds: float = WORKER_REPLY_SECONDS) -> int | None:
    """Ask the worker at `path` to exit, once any run it has going is over.

    How many runs it served, or None if none answered within `seconds`.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        connection = connect_worker(path)
        if connection is None:
            return None
        with connection, connection.makefile("rw", encoding="utf-8") as stream:
            connection.settimeout(seconds)
            try:
                stream.write(stop_line(worker_token(path)).decode())
                stream.flush()
                line = stream.readline()
                if not line:  # queued on a socket the worker replaced as a run ended: again
                    continue
                reply = json.loads(line)
            except (ConnectionResetError, BrokenPipeError):  # the same, told otherwise
                continue
            except (OSError, ValueError):
                return None
        if "runs" in reply:
            return int(reply["runs"])
        time.sleep(0.05)  # busy with a run
    return None


# Why a grading block's runs were all cold, where the course's warm worker never answered:
# it was still starting, or there was none, so one was started for the checks after.
STILL_STARTING = "still starting"
STARTED = "started"
COLD_NOTICES = {
    STILL_STARTING: "graded cold: the warm grader was still starting "
    "(the next check takes about a second)",
    STARTED: "graded cold; a warm grader is starting now, for the checks after this one "
    "(about a second each)",
}


@dataclass
class WarmGrader:
    """The course's warm worker as one grading run sees it: where it listens, the
    environment its runs get, whether it answered, and if it never did, why (set as the
    `warm_grader` block ends: STILL_STARTING or STARTED)."""

    socket: Path
    course_root: Path
    env: dict[str, str]
    answered: bool = False
    cold_because: str | None = None

    def connect(self) -> socket.socket | None:
        """A connection for one run, or None: then that run is graded cold."""
        connection = connect_worker(self.socket)
        self.answered |= connection is not None
        return connection

    def cold_notice(self) -> str | None:
        """The learner's one line on why the runs were cold, where none reached the warm
        grader; None where one did."""
        return COLD_NOTICES.get(self.cold_because or "")


@contextlib.contextmanager
def warm_grader(course_root: Path, env: dict[str, str]) -> Iterator[WarmGrader | None]:
    """The course's warm worker for the runs in the block.

    If it never answers, the runs are cold and one is started as the block ends, for the
    runs after it: starting it sooner would take CPU from the runs being timed. None is
    started where one is already starting (or came up meanwhile): a second would only
    wait for the first and exit. None where every run is to be cold (KATA_COLD) or
    workers are not supported.
    """
    if not worker_supported() or cold_requested():
        yield None
        return
    try:
        path = worker_socket(course_root, env)
    except OSError:  # no private folder for the socket: cold
        yield None
        return
    grader = WarmGrader(path, course_root, env)
    yield grader
    if grader.answered:
        return
    if worker_running(path) or worker_starting(course_root, path):
        grader.cold_because = STILL_STARTING
    else:
        start_worker(path, course_root, env)
        grader.cold_because = STARTED
