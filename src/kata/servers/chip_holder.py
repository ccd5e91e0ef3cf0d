"""The chip holder: the one process of kata that opens the machine's accelerator, and times on it
what the judges ask.

A TPU admits one process at a time, opening it costs seconds (5.6 s on a TPU v5e, 6.7 s with
`import jax`), and a process forked after it opened the chip cannot use it
(../shared/accelerators.md). So no judge and no learner's process opens it: they all run on the
CPU (kata.grading_platform), and this long-lived process, kata's own code, holds
the chip for them. A speed check's judge hands it (kata.checking.learner_calls.speed_vs):
- a learner's program, exported by the learner's process for the chip's platform (a CPU-only
  process exports for "tpu"), to run as a chain of calls on the judge's arguments and time;
- the judge's own baseline (a function of kata's or of the course's checks, named by its file
  and name, never sent as code), to run under `jax.disable_jit()` on the chip and time.
Every figure is measured here; the learner's process only ever handed over bytes, whose
results the judge checks against its reference.

Started by the grading front-end (`reach`) the first time a run on a machine with a free chip
needs it; it listens before it opens the chip, so a run is launched at once and its judge
waits only when its first speed check asks. One per user and machine (its lock, in the private
folder of kata.servers.warm); it exits after IDLE_EXIT_SECONDS without a request, letting the
chip go for the learner's own programs.

Protocol, over a Unix socket, one request at a time (a timing is never shared with another's
work): kata.handoffs.chip_requests, a Hello first, then TimeProgram, TimeEager or Stop. Any
failure is {"error": "..."}; the judge then keeps its CPU figures. A judge may send a
TimeProgram and a TimeEager ahead and read their replies later (`Chip.send_ahead`): they compile
on the chip what it times afterwards, while the judge times the CPU's side.

Nothing a learner's program does can stop it for the runs after: a program that never ends (a
`while_loop` whose condition stays true on the chip alone) cannot be interrupted, so a
`Watchdog` process ends the whole holder once one request has run REQUEST_RUN_SECONDS, and the
next run starts a fresh one. On a GPU it allocates as it needs, up to a tenth of the GPU's
memory (`GPU_MEMORY`), never the 75% JAX takes by default, for ten idle minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# numpy and kata.handoffs.wire are imported where used: the front-end that starts a holder
# imports this module and, measured, no numpy (80 ms of every `kata check`).
from kata.handoffs import chip_requests
from kata.handoffs.chip_connection import ChipError
from kata.handoffs.chip_requests import ChipRequest, Hello, Stop, TimeEager, TimeProgram
from kata.servers.serving import LIVENESS_CHECK_SECONDS, claim, listen, write_token
from kata.servers.warm import (
    connect_worker,
    engine_identity,
    server_command,
    token_file,
    worker_folder,
    worker_token,
)

IDLE_EXIT_SECONDS = 10 * 60.0
# From its start to its socket, before JAX: a Python and kata's serving modules, 0.2 s
# quiet; at a load of 80 on 2 cores, past 5 s (a run then timed on the CPU alone).
LISTEN_SECONDS = 30.0
# A request arrives whole at once; one that stalls is dropped rather than stalling the rest.
REQUEST_SECONDS = 10.0
# The longest one request may run before the holder is ended (`Watchdog`). The longest a right
# answer's took on a TPU v5e was the first eager run of 07's baseline, every operation compiled
# for the chip: 3.3 s (benchmarks/README.md, "On a TPU"); under a load of 80 on 2 cores, kata's
# own work here runs up to 5x slower. A judge waits for a reply a little longer than this
# (kata.handoffs.chip_connection.REPLY_SECONDS), so it hears the holder go first.
REQUEST_RUN_SECONDS = 20.0
# Compiled programs kept for re-checks: a course's speed checks are 3 programs per file.
PROGRAMS_KEPT = 16
MODULE_NAME = "kata.servers.chip_holder"
RUNS_ALONE = ("JAX_PLATFORMS", "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_", "KATA_")
# The holder's programs need megabytes; by default JAX takes 75% of a GPU at its first operation
# (about 100 GiB of an H200, 11 GiB of a T4) and keeps it while the process lives, leaving the
# learner's own notebook the rest. So: allocated as needed, at most a tenth (the BFC allocator
# keeps the fraction as its limit without preallocation; XLA_CLIENT_MEM_FRACTION is its newer
# name). A user's own setting of either is kept. A TPU's memory has no such setting.
GPU_MEMORY_FRACTION = "0.10"
GPU_MEMORY = (
    {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    {
        "XLA_PYTHON_CLIENT_MEM_FRACTION": GPU_MEMORY_FRACTION,
        "XLA_CLIENT_MEM_FRACTION": GPU_MEMORY_FRACTION,
    },
)


class Stopped(Exception):
    """A stop request: the holder answers it and exits."""


# The front-end's side: finding and starting the holder --------------------------------------


def holder_socket(env: Mapping[str, str]) -> Path:
    """Where this user's holder listens, named for kata's code and the settings JAX reads
    (kata.servers.warm.engine_identity): a holder of older code is replaced."""
    return worker_folder() / f"chip-{engine_identity(holders_environment(env))}.sock"


def holders_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` less what is a run's alone (the CPU every other process of kata is put on, and
    the run's compilation cache: the holder keeps its programs in memory), with the GPU's
    memory kept small (`GPU_MEMORY`) where the user set nothing of it."""
    own = {k: v for k, v in env.items() if not k.startswith(RUNS_ALONE)}
    unset = [setting for setting in GPU_MEMORY if not own.keys() & setting.keys()]
    return {k: v for setting in unset for k, v in setting.items()} | own


def gpu_memory(env: Mapping[str, str]) -> str:
    """What of a GPU's memory a holder started with `env` takes, in words."""
    held = holders_environment(env)
    fraction = held.get("XLA_CLIENT_MEM_FRACTION", held.get("XLA_PYTHON_CLIENT_MEM_FRACTION"))
    share = f"{float(fraction):.0%}" if fraction else "75%, JAX's default"
    if held.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").lower() in ("false", "0"):
        return f"its GPU memory allocated as its programs need it, at most {share}"
    return f"{share} of the GPU's memory, taken at once"


def holder_lock() -> Path:
    return worker_folder() / "chip.lock"


def start_holder(path: Path, env: Mapping[str, str]) -> None:
    """Start the holder in the background, on the machine's own platform choice (not the
    CPU every other process of kata is put on)."""
    empty = path.parent / "empty"
    empty.mkdir(mode=0o700, exist_ok=True)
    subprocess.Popen(
        server_command(MODULE_NAME, str(path), str(holder_lock())),
        cwd=empty,
        env=holders_environment(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def reach(
    env: Mapping[str, str], start: bool, seconds: float = LISTEN_SECONDS
) -> socket.socket | None:
    """A connection to the holder for one run, its hello sent (the judge reads the answer
    when it first needs the chip), or None. With `start`, one is started where none listens
    (its socket is there within `seconds`; the chip opens after)."""
    path = holder_socket(env)
    if start and not holder_running(path):
        start_holder(path, env)
        deadline = time.monotonic() + seconds
        while not holder_running(path) and time.monotonic() < deadline:
            time.sleep(0.02)
    connection = reach_at(path)
    if connection is None and start:
        return unreached(f"the chip holder did not listen within {seconds:g} s")
    return connection


def unreached(reason: str) -> socket.socket:
    """A connection that stands for a holder that could not be reached: its one answer is
    `reason`, which the judge shows beside the CPU's figure."""
    from kata.handoffs import wire

    ours, theirs = socket.socketpair()
    with theirs:
        wire.send(theirs, *wire.encode({"error": reason}))
    return ours


def stop_holder(path: Path, seconds: float = 10.0) -> bool:
    """Ask the holder at `path` to exit; whether it said it would."""
    from kata.handoffs import wire

    connection = reach_at(path)
    if connection is None:
        return False
    with connection:
        connection.settimeout(seconds)
        try:
            chip_requests.send(connection, Stop())
            wire.receive(connection)  # the hello's answer
            reply = wire.decode(*wire.receive(connection))
        except (OSError, EOFError, ValueError, wire.WireError):
            return False
    return isinstance(reply, dict) and bool(reply.get("stopped"))


def reach_at(path: Path) -> socket.socket | None:
    """A connection to the holder at `path`, its hello sent, or None where none listens."""

    connection = connect_worker(path)
    if connection is None:
        return None
    try:
        chip_requests.send(connection, Hello(worker_token(path)))
    except OSError:
        connection.close()
        return None
    return connection


def holder_running(path: Path) -> bool:
    connection = connect_worker(path)
    if connection is None:
        return False
    connection.close()
    return True


# The judge's side ----------------------------------------------------------------------------


# The holder's side ---------------------------------------------------------------------------


class Holder:
    """What the holder keeps between requests: its chip, compiled programs (the last
    PROGRAMS_KEPT, by their bytes' digest) and the baselines' modules it imported."""

    def __init__(self) -> None:
        import jax

        device = jax.devices()[0]  # opens the chip
        self.chip = device
        # As `jax.export` names it, which a CPU-only process exports for: a CUDA device's
        # `platform` is "gpu", its programs' "cuda" ("gpu" is refused as unknown there).
        self.platform = export_platform()
        self.device = "the CPU" if device.platform == "cpu" else device.device_kind
        self.programs: OrderedDict[str, Callable[..., Any]] = OrderedDict()
        self.modules: dict[tuple[str, int], Any] = {}

    def answer(self, request: ChipRequest | None) -> dict[str, Any]:
        match request:
            case TimeProgram():
                return self.time_program(request)
            case TimeEager():
                return self.time_eager(request)
            case Stop():
                raise Stopped
        return {"error": f"no such request: {request!r}"}

    def program(self, data: bytes) -> Callable[..., Any]:
        import jax
        from jax import export

        digest = hashlib.sha256(data).hexdigest()
        if digest not in self.programs:
            exported = self.runnable(export.deserialize(bytearray(data)))

            def call(*words: Any) -> Any:
                args, kwargs = jax.tree.unflatten(exported.in_tree, words)
                return exported.call(*args, **kwargs)

            self.programs[digest] = jax.jit(call)
            while len(self.programs) > PROGRAMS_KEPT:
                self.programs.popitem(last=False)
        self.programs.move_to_end(digest)
        return self.programs[digest]

    def runnable(self, exported: Any) -> Any:
        """`exported` as the chip runs it: a program for its platform alone."""
        if tuple(exported.platforms) != (self.platform,):
            raise ChipError(f"a program for {exported.platforms}, not {self.platform}")
        return exported

    def time_program(self, request: TimeProgram) -> dict[str, Any]:
        import jax
        import numpy as np

        call = self.program(bytes(np.asarray(request.program, np.uint8)))
        # Committed to the chip, as the results fed back are: else the second call compiles
        # the program again (measured on a TPU v5e: 0.16 s of every speed check).
        words = [jax.device_put(w, self.chip) for w in request.words]
        start, stop = (int(i) for i in request.carried)
        calls, links = int(request.calls), {int(i) for i in request.links}
        kept = {}
        began = time.perf_counter()
        for i in range(calls):
            part = call(*words)
            if request.each_waited or i == calls - 1:
                part = jax.block_until_ready(part)
            for step in request.path:
                part = part[step]
            leaves = jax.tree.leaves(part)
            if len(leaves) != stop - start:
                raise ChipError(f"a call gave {len(leaves)} leaves to carry, not {stop - start}")
            words[start:stop] = leaves
            if i in links:
                kept[str(i)] = part
        seconds = (time.perf_counter() - began) / calls
        return {"seconds": seconds, "links": jax.tree.map(np.asarray, kept)}

    def time_eager(self, request: TimeEager) -> dict[str, Any]:
        import jax
        import numpy as np

        function = self.baseline(Path(request.file), str(request.name))
        on_chip = lambda a: jax.device_put(a, self.chip) if isinstance(a, np.ndarray) else a  # noqa: E731
        args = jax.tree.map(on_chip, request.args)  # a Python int stays one: range(steps)
        calls = int(request.calls)
        with jax.disable_jit():
            began = time.perf_counter()
            for _ in range(calls):
                jax.block_until_ready(function(*args))
            seconds = (time.perf_counter() - began) / calls
        return {"seconds": seconds}

    def baseline(self, file: Path, name: str) -> Callable[..., Any]:
        """The judge's function `name` in `file`: kata's own, or a course's check file
        (checks/test_*.py beside a course.toml), imported here once per version of it."""
        file = file.resolve()
        kata = Path(__file__).resolve().parents[1]
        of_course = (
            file.parent.name == "checks"
            and file.name.startswith("test_")
            and (file.parent.parent / "course.toml").is_file()
        )
        if not (file.is_relative_to(kata) or of_course) or file.suffix != ".py":
            raise ChipError(f"{file} is neither kata's nor a course's checks")
        key = (str(file), file.stat().st_mtime_ns)
        if key not in self.modules:
            self.modules[key] = _imported(file, kata, f"kata_baseline_{len(self.modules)}")
        found: Any = self.modules[key]
        for part in name.split("."):
            found = getattr(found, part)
        return found


def export_platform() -> str:
    """The platform name `jax.export` gives this process's default backend: "cpu", "tpu",
    "cuda" or "rocm"."""
    from jax import export

    return export.default_export_platform()


class Watchdog:
    """A process forked before the chip opens (no thread yet to copy), which ends the holder
    once one request has run `seconds`: a program running on the chip cannot be interrupted,
    and a holder stuck in one would keep every later run from the chip and make each wait.
    It removes the holder's socket and token first, so the next run starts a fresh holder
    at once; the lock goes with the process."""

    def __init__(self, seconds: float, leaves: tuple[Path, ...]) -> None:
        reading, self.pipe = os.pipe()
        holder = os.getpid()
        if os.fork() == 0:  # the watchdog
            os.close(self.pipe)
            _watch(reading, holder, seconds, leaves)
            os._exit(0)
        os.close(reading)

    def busy(self) -> None:
        os.write(self.pipe, b"b")

    def idle(self) -> None:
        os.write(self.pipe, b"i")


def _watch(pipe: int, holder: int, seconds: float, leaves: tuple[Path, ...]) -> None:
    """Until the holder closes `pipe` (it has ended): past `seconds` of one busy spell
    ("b" … "i"), remove `leaves` and kill the holder."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C to the holder's group is the holder's
    deadline: float | None = None
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([pipe], [], [], wait)
        if not ready:
            for leaf in leaves:
                leaf.unlink(missing_ok=True)
            with contextlib.suppress(ProcessLookupError):
                os.kill(holder, signal.SIGKILL)
            return
        said = os.read(pipe, 64)
        if not said:
            return
        deadline = time.monotonic() + seconds if said.endswith(b"b") else None


def _imported(file: Path, kata: Path, name: str) -> Any:
    """The module in `file`: kata's own by its name, a check file under `name` (registered,
    as dataclasses and pickling look a class's module up), beside its folder's modules."""
    if file.is_relative_to(kata):
        dotted = ".".join(("kata", *file.relative_to(kata).with_suffix("").parts))
        return importlib.import_module(dotted)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(file.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(file.parent))
    return module


def _same_user(connection: socket.socket) -> bool:
    credentials = connection.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
    )
    _, uid, _ = struct.unpack("3i", credentials)
    return uid == os.getuid()


def _serve_one(holder: Holder, connection: socket.socket, watchdog: Watchdog) -> bool:
    """Answer the request waiting on `connection`, under `watchdog`; False once it is to be
    closed. Raises Stopped, once answered, for a stop request."""
    from kata.handoffs import wire

    connection.settimeout(REQUEST_SECONDS)
    try:
        document, arrays = wire.receive(connection)
        request = chip_requests.read(wire.decode(document, arrays))
    except (OSError, EOFError, ValueError, wire.WireError):
        return False
    watchdog.busy()
    try:
        reply = holder.answer(request)
    except Stopped:
        _send(connection, {"stopped": True})
        raise
    except Exception as error:  # noqa: BLE001 — told to the judge, which keeps its CPU figures
        reply = {"error": f"the chip holder failed: {type(error).__name__}: {error}"}
    finally:
        watchdog.idle()
    return _send(connection, reply)


def _send(connection: socket.socket, reply: dict[str, Any]) -> bool:
    from kata.handoffs import wire

    try:
        wire.send(connection, *wire.encode(reply))
    except (OSError, wire.WireError):
        return False
    return True


def _greeted(connection: socket.socket, token: str, holder: Holder) -> bool:
    """Read a new connection's hello, and answer it: whether to serve the connection (one of
    another user, or without the token, is dropped)."""
    from kata.handoffs import wire

    connection.settimeout(REQUEST_SECONDS)
    try:
        hello = chip_requests.read(wire.decode(*wire.receive(connection)))
    except (OSError, EOFError, ValueError, wire.WireError):
        return False
    if not _same_user(connection) or not isinstance(hello, Hello):
        return False
    if not secrets.compare_digest(str(hello.token), token):
        return False
    _send(connection, {"device": holder.device, "platform": holder.platform})
    return True


def serve(
    path: Path,
    lock_path: Path,
    idle_seconds: float = IDLE_EXIT_SECONDS,
    request_seconds: float = REQUEST_RUN_SECONDS,
    open_chip: Callable[[], Holder] = Holder,
) -> None:
    lock = claim(lock_path, path, holder_running, stop_holder)
    if lock is None:
        return
    token = write_token(path)
    server = listen(path)  # before the chip opens: a run's connection waits in its queue
    watchdog = Watchdog(request_seconds, (path, token_file(path)))
    holder = open_chip()
    clients: list[socket.socket] = []
    last = time.monotonic()
    try:
        while clients or time.monotonic() - last < idle_seconds:
            if not path.exists():
                return  # replaced or removed: another holder, or nobody wants one
            ready, _, _ = select.select([server, *clients], [], [], LIVENESS_CHECK_SECONDS)
            for item in ready:
                last = time.monotonic()
                if item is server:
                    with contextlib.suppress(OSError):
                        connection, _ = server.accept()
                        greeted = _greeted(connection, token, holder)
                        if greeted:
                            clients.append(connection)
                        else:
                            connection.close()
                    continue
                if not _serve_one(holder, item, watchdog):
                    clients.remove(item)
                    item.close()
    except Stopped:
        return
    finally:
        server.close()
        path.unlink(missing_ok=True)
        token_file(path).unlink(missing_ok=True)
        lock_path.unlink(missing_ok=True)  # while still holding it: see serving.claim
        lock.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE_NAME}")
    parser.add_argument("socket", type=Path)
    parser.add_argument("lock", type=Path)
    options = parser.parse_args(argv)
    serve(options.socket, options.lock)


if __name__ == "__main__":
    main(sys.argv[1:])
