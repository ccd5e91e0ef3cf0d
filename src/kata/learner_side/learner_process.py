"""The learner's process: imports the learner's module and runs what the judge asks of it.

The judge (pytest, the checks, kata's plugin) never imports learner code; it asks this
process, over a Unix socket, to call a function of the learner's module (under JAX
transformations it names), once or on each of several sets of arguments (`each`), to run a
chain of timed calls, to export a function's program
(`jax.export`, as bytes), or to run one of the check file's `@in_learner_process` helpers,
and gets back data. The verdict is never decided here; a hostile process can only send
wrong values, and what it reports of itself (compilations, printed text, tampering) can
only fail a check. It starts no process once the learner's module is about to be imported
(kata.isolation.seccomp.forbid_new_processes): what the judge reads of it is all its work.

A process serves one exercise. Under the grader, a `Starter` forked beside the judge
(by the cold judge's start and by the warm worker's spare, after the grading modules are
imported and before any learner code runs: `start_beside`) forks a fresh one for each
check file; straight under pytest (an IDE) each is started as
`python -m kata.learner_side.learner_process FD [--confine] [--host-devices N]`.

An exercise with `host_devices = N` in course.toml gets a process of its own on JAX's CPU
backend with N devices (`use_host_devices`), forked before its backend starts: neither
the starter nor the judge start theirs before they fork.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib.util
import io
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kata.handoffs import learner_requests, starter_requests, wire
from kata.handoffs.learner_requests import Attribute, Call, Chain, Each, Export, Load, Run
from kata.handoffs.starter_requests import BytesMoved, End, Fresh, Pause, Prepare, Resume
from kata.handoffs.wire import is_key
from kata.isolation import confinement, pausing
from kata.isolation.seccomp import forbid_new_processes
from kata.learner_side.compile_counts import bytes_moved

# The judge sends this when it gives up on a call (kata.checking.learner_connection).
WHERE_SIGNAL = signal.SIGUSR1
# What a call may print before the rest is cut: the judge shows the learner 4,000 characters.
PRINTED_LIMIT = 64_000


class LoadedExercise:
    """One exercise: the check file's helpers, the learner's module and the objects it
    handed out (by handle)."""

    def __init__(self, exercise: Path, checks: Path | None) -> None:
        import kata.learner_side.compile_counts  # noqa: F401  (part of the fingerprint)
        from kata.isolation.integrity import Fingerprint
        from kata.learner_side.learner_file import load_exercise

        self.path = exercise
        self.checks = _import_checks(checks) if checks else None
        # What the probes and helpers rely on, before any learner code runs: their numbers
        # count only while it is unchanged.
        self.fingerprint = Fingerprint.take()
        if str(exercise.parent) not in sys.path:  # the learner's own helper modules
            sys.path.insert(0, str(exercise.parent))
        self.module = load_exercise(exercise.stem, exercise.parent)
        self.objects: dict[int, Any] = {}
        self.transformed: dict[str, Any] = {}

    def keep(self, item: Any) -> wire.Opaque:
        self.objects[id(item)] = item
        return wire.Opaque(id(item), type(item).__name__)

    def find(self, opaque: wire.Opaque) -> Any:
        try:
            return self.objects[opaque.handle]
        except KeyError:
            raise wire.WireError(f"no object with handle {opaque.handle}") from None

    def function(self, request: Call) -> Any:
        """The function a request names, under its transformations: built once, so that
        calling it again reuses JAX's compiled program as a learner's own code would."""
        key = json.dumps([request.target, request.under])
        if key not in self.transformed:
            named = request.target
            if "opaque" in named:
                target = self.find(wire.Opaque(int(named["opaque"]), ""))
            else:
                target = getattr(self.module, str(named["name"]))
            self.transformed[key] = transformed(target, request.under)
        return self.transformed[key]

    def helper(self, name: str) -> Any:
        """A check file's `@in_learner_process` helper, to be called with the module."""
        helper = getattr(self.checks, name, None)
        if helper is None or not getattr(helper, "runs_in_learner_process", False):
            raise wire.WireError(f"the checks have no helper {name!r} for this process")
        return lambda *args, **kwargs: helper(self.module, *args, **kwargs)

    def answer(self, request: Any, arrays: list[bytes]) -> dict[str, Any]:
        import jax

        from kata.learner_side.compile_counts import compilations_here

        if isinstance(request, Attribute):
            getattr(self.module, str(request.name))  # raises as the learner's module would
            return {"found": True}
        if isinstance(request, Run):
            fn = self.helper(str(request.name))
        elif isinstance(request, Call):
            fn = self.function(request)
        else:
            raise wire.WireError(f"no such request for a loaded exercise: {request!r}")
        args = wire.decode(request.args, arrays, self.find, jax.device_put)
        kwargs = wire.decode(request.kwargs, arrays, self.find, jax.device_put)
        printed = _Printed()
        with compilations_here() as compiled, contextlib.redirect_stdout(printed):
            match request:
                case Chain(calls=calls, carry=carry):
                    result = chained(fn, args, kwargs, int(calls), carry)
                case Export(layout=layout, platforms=platforms):
                    result = exported(fn, args, layout, platforms)
                case Each():  # a call for each tuple of arguments
                    result = [jax.block_until_ready(fn(*these)) for these in args]
                case _:
                    result = jax.block_until_ready(fn(*args, **kwargs))
            jax.effects_barrier()  # what jax.debug.print has still to print
        return {
            "value": result,
            "compilations": compiled.names,
            "printed": printed.getvalue(),
            "tampered": self.fingerprint.changed(),
        }


class _Printed(io.StringIO):
    """What a call printed, cut at PRINTED_LIMIT characters."""

    def write(self, text: str) -> int:
        room = PRINTED_LIMIT - self.tell()
        if room > 0:
            super().write(text[:room] if len(text) <= room else text[:room] + "\n… (cut)\n")
        return len(text)


def _import_checks(path: Path) -> Any:
    """The check file, imported here too, under the name pytest gives it (`test_…`, which
    the fingerprint watches), so its helpers can run beside the learner's module."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def failure_of(error: BaseException, path: Path) -> dict[str, Any]:
    """What learner code raised, as data, with the lines of `path` it passed through."""
    frames = [
        [frame.filename, frame.lineno, (frame.line or "").strip()]
        for frame in traceback.extract_tb(error.__traceback__)
        if Path(frame.filename) == path
    ]
    if isinstance(error, SyntaxError) and error.filename:
        frames.append([error.filename, error.lineno or 0, (error.text or "").strip()])
    return {
        "error": {
            "types": [cls.__name__ for cls in type(error).__mro__],
            "message": str(error),
            "frames": frames,
        }
    }


def eagerly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` run with every `jax.jit` switched off: the judge's eager baseline (its own
    reference), and learner code under `.eagerly()`."""

    import jax

    def run_eagerly(*args: Any, **kwargs: Any) -> Any:
        with jax.disable_jit():
            return fn(*args, **kwargs)

    return run_eagerly


def transformed(fn: Any, under: list[list[Any]]) -> Any:
    """`fn` under the judge's JAX transformations, innermost first."""
    import jax

    for name, options in under:
        if name == "jit":
            fn = _jitted(fn, tuple(options.get("static_argnums", ())))
        elif name == "vmap":
            fn = jax.vmap(fn, in_axes=_axes(options.get("in_axes", 0)))
        elif name == "grad":
            fn = jax.grad(fn, argnums=_axes(options.get("argnums", 0)))
        elif name == "eager":
            fn = eagerly(fn)
        elif name == "keys_checked":
            fn = _keys_checked(fn)
        else:
            raise wire.WireError(f"an unknown transformation {name!r}")
    return fn


def _keys_checked(fn: Any) -> Any:
    import jax

    def call(*args: Any, **kwargs: Any) -> Any:
        with jax.debug_key_reuse(True):
            return jax.block_until_ready(fn(*args, **kwargs))

    return call


def _jitted(fn: Any, static: tuple[int, ...]) -> Any:
    """`jax.jit(fn)`, its static arguments made hashable (a list of layer sizes, a tuple)."""
    import jax

    compiled = jax.jit(fn, static_argnums=static)
    if not static:
        return compiled

    def call(*args: Any, **kwargs: Any) -> Any:
        fixed = (_hashable(a) if i in static else a for i, a in enumerate(args))
        return compiled(*fixed, **kwargs)

    return call


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    return value


def is_static(value: Any) -> bool:
    """Whether a program is exported for this argument as a value, not as a shape: a
    number, a string, None, or a list, tuple or dict of them (a loop count, a tolerance,
    layer sizes)."""
    if isinstance(value, list | tuple):
        return all(is_static(v) for v in value)
    if isinstance(value, dict):
        return all(is_static(v) for v in value.values())
    return isinstance(value, int | float | str | type(None))


def exported(
    fn: Callable[..., Any],
    args: list[Any],
    layout: dict[str, Any] | None = None,
    platforms: list[str] | None = None,
) -> Any:
    """`fn` under `jax.jit`, exported (`jax.export`) for the shapes and dtypes of `args`
    (arrays and keys; the static ones, `is_static`, are closed over), serialized:
    StableHLO bytes, as a uint8 array, for the judge to deserialize, scan and run itself.
    A key is exported as its words (`jax.random.key_data`) and wrapped again inside: JAX
    0.5 cannot serialize a program over typed keys, and the judge follows the words
    anyway. A program calling back into Python on the host cannot be exported; JAX then
    raises, and the judge grants nothing.

    With a `layout` ({"axis": name, "args": [spec, ...]}), the program is for every device
    of this process in a 1-D mesh with that axis name, each leaf of argument i laid out by
    `PartitionSpec(*spec)` (`[]`: a copy on every device). With `platforms`, the program is
    for them, not this process's own: a process on the CPU exports for a chip it never
    opens (kata.servers.chip_holder runs it)."""
    import jax
    import numpy as np
    from jax import export

    def spec(value: Any, sharding: Any = None) -> Any:
        return jax.ShapeDtypeStruct(np.shape(value), value.dtype, sharding=sharding)

    def sharding_of(i: int) -> Any:
        if layout is None:
            return None
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(np.array(jax.devices()), (str(layout["axis"]),))
        return NamedSharding(mesh, PartitionSpec(*layout["args"][i]))

    static = {i: a for i, a in enumerate(args) if is_static(a)}
    dynamic = [i for i in range(len(args)) if i not in static]
    leaves, structure = jax.tree.flatten([args[i] for i in dynamic])
    owners = [i for i in dynamic for _ in jax.tree.leaves(args[i])]  # each leaf's argument
    impls = [str(jax.random.key_impl(leaf)) if is_key(leaf) else None for leaf in leaves]

    def program(*words: Any) -> Any:
        rewrapped = [
            jax.random.wrap_key_data(w, impl=impl) if impl else w
            for w, impl in zip(words, impls, strict=True)
        ]
        given = iter(jax.tree.unflatten(structure, rewrapped))
        return fn(*(static[i] if i in static else next(given) for i in range(len(args))))

    specs = [
        spec(jax.random.key_data(leaf) if impl else leaf, sharding_of(owner))
        for leaf, impl, owner in zip(leaves, impls, owners, strict=True)
    ]
    serialized = export.export(jax.jit(program), platforms=platforms)(*specs).serialize()
    return np.frombuffer(bytes(serialized), dtype=np.uint8)


def chained(
    fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], calls: int, carry: dict
) -> list[Any]:
    """`calls` calls of `fn`, each finished before the next, each fed the part of the last
    result at `carry["path"]` as its argument `carry["arg"]`: what each call carried on.

    A chain cannot be batched or answered ahead: every call needs the one before it, and
    the judge checks links it picks after the reply (kata.checking.learner_calls). Each
    array comes back stacked over the calls: one array per leaf, not one per call (a
    small array costs ~40 µs to send alone, twice a compiled call of 02).
    """
    import jax
    import numpy as np

    args, carried = list(args), []
    for _ in range(calls):
        result = jax.block_until_ready(fn(*args, **kwargs))
        for step in carry["path"]:
            result = result[step]
        args[int(carry["arg"])] = result
        carried.append(result)
    return jax.tree.map(lambda *leaves: np.stack([np.asarray(a) for a in leaves]), *carried)


def _axes(value: Any) -> Any:
    return tuple(_axes(v) for v in value) if isinstance(value, list) else value


class StoppedByJudge(BaseException):
    """The judge gave up on the call (its time ran out): raised where the learner's code
    is, so the reply says which line it was stuck on."""


def _stopped_by_judge(*_: object) -> None:
    raise StoppedByJudge("stopped by the grader")


def serve(connection: socket.socket) -> None:
    """Answer the judge until it hangs up. The first request loads the exercise (its check
    file and the learner's module); a process serves that one exercise only."""
    signal.signal(WHERE_SIGNAL, _stopped_by_judge)
    session: LoadedExercise | None = None
    failed: dict[str, Any] | None = {"error": _not_loaded()}
    while True:
        try:
            document, arrays = wire.receive(connection)
        except EOFError:
            return
        request = learner_requests.read(document) or starter_requests.read(document)
        if isinstance(request, Prepare):
            prepare(request)
            reply, blobs = wire.encode({"pid": os.getpid()})
        elif isinstance(request, Load) and session is None:
            checks = Path(request.checks) if request.checks else None
            forbid_new_processes()  # before the learner's module exists here
            session, failed = _load(Path(request.exercise), checks)
            # What is loaded now stays for good: a full collection later scans only what
            # calls make (5 µs measured, not 58 ms over JAX's objects), so none costs a request
            # the CPU the judge reads as a compilation (kata.learner_side.compile_counts).
            gc.freeze()
            reply, blobs = wire.encode(failed or {"pid": os.getpid()})
        elif session is None:
            reply, blobs = wire.encode(failed)
        else:
            collect_garbage_outside_counted_calls(bool(document.get("counted")))
            try:
                reply, blobs = wire.encode(session.answer(request, arrays), session.keep)
            except BaseException as error:  # noqa: BLE001 — learner code raised: report it
                reply, blobs = wire.encode(failure_of(error, session.path))
        wire.send(connection, reply, blobs)


def collect_garbage_outside_counted_calls(counted: bool) -> None:
    """Python's collector runs between the calls whose CPU the judge counts, never in one:
    there, a full collection costs what the judge takes for a compilation the process did
    not report (kata.learner_side.compile_counts). Measured on JAX 0.5.3: a 6 ms collection of
    what 16's checks had left in JAX's caches, inside one of 8 compiled train steps, failed
    a compiled 16 in 4 gradings of 4 on a quiet machine, and 16's reference in `kata
    verify` under the suite. Put off, a collection runs in the next call not counted."""
    if counted:
        gc.disable()
    else:
        gc.enable()


def _load(
    exercise: Path, checks: Path | None
) -> tuple[LoadedExercise | None, dict[str, Any] | None]:
    try:
        return LoadedExercise(exercise, checks), None
    except BaseException as error:  # noqa: BLE001 — the module does not import: every call fails alike
        return None, failure_of(error, exercise)


def _not_loaded() -> dict[str, Any]:
    return {"types": ["RuntimeError"], "message": "no exercise file loaded", "frames": []}


def prepare(settings: Prepare, learner: bool = True) -> None:
    """Take on a warm run's settings (the worker's spare forked this process before it
    knew them): its folder, environment, limits and confinement; a `learner`'s process
    also nests its own domain, in which it can signal no process outside it."""
    from kata.isolation.limits import apply_limits, confine_run, follow_compilation_cache
    from kata.isolation.seccomp import drop_privileges

    drop_privileges()  # forked before the judge gave up the run's capabilities
    if learner:
        _open_to_the_judge()  # giving them up made it undumpable
    os.chdir(settings.cwd)
    os.environ.clear()
    os.environ.update(settings.env)
    follow_compilation_cache()
    apply_limits(settings.memory or None)
    if settings.confine is not None:
        confine_run(settings.confine, signals_scoped=learner)
        if learner:
            confine_learner()


def confine_learner() -> None:
    """Nest a Landlock domain of its own inside the run's: it may still write its working
    folder, TMPDIR and JAX's compilation cache (as the run may), but not even read the
    judge's cache beside it (kata.isolation.caches.judge_cache), which holds the programs
    exported by every submission graded from the course; and, in a domain the judge is not
    in, it can no more trace the judge or read its memory, where the events' key is
    (kata.handoffs.seal)."""
    from kata.isolation.caches import judge_cache

    cache = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    folders = [os.getcwd(), os.environ.get("TMPDIR"), cache]
    writable = ("/dev/null", *(f for f in folders if f and os.path.isdir(f)))
    judges = judge_cache(cache) if cache else ""
    hidden = (os.path.realpath(judges),) if judges and os.path.isdir(judges) else ()
    # Landlock allows whole folders: the folders above the judge's cache give way to their
    # entries, as this process (under the run's domain, which may not list /tmp) sees them.
    run = confinement.policy_in_force()
    reachable = ("/",) if run is None else (*run.readable, *run.writable)
    readable = confinement.excluding(reachable, hidden)
    devices, _ = confinement.accelerator_paths()
    confinement.confine(confinement.Policy(readable=readable, writable=writable, devices=devices))


def use_host_devices(count: int, cpu_only: bool = True) -> None:
    """Give this process `count` devices on JAX's CPU backend, as starting it with
    `XLA_FLAGS=--xla_force_host_platform_device_count=N` would, and, `cpu_only`, no other
    backend (`JAX_PLATFORMS=cpu`): on a GPU or TPU too, the exercise sees the same devices.
    JAX reads both as it starts its backend, so this raises once it has started.

    Measured (JAX 0.10.2, 2 busy cores, 5 runs each): 8 CPU devices instead of 1 start the
    backend in the same 7-9 ms, compile a first program in the same 33-43 ms, and hold
    1 MB more.
    """
    import jax

    jax.config.update("jax_num_cpu_devices", count)  # its validator raises once started
    if cpu_only:
        os.environ["JAX_PLATFORMS"] = "cpu"
        jax.config.update("jax_platforms", "cpu")


def start_beside(
    confined: bool, warm_up: Callable[[], None] | None = None
) -> tuple[socket.socket, int]:
    """Fork the starter of learner's processes from this one (which imported JAX and kata,
    and started no backend): the judge's end of its socket, and its pid. The starter forks
    the first learner's process at once, and `warm_up` runs in that one."""
    ours, pid = _forked(lambda theirs: Starter(theirs, confined, warm_up).serve())
    ours.set_inheritable(True)
    return ours, pid


def _forked(body: Callable[[socket.socket], None]) -> tuple[socket.socket, int]:
    """Fork a child that runs `body` on its end of a new socket pair and then exits, holding
    no other descriptor of ours (the judge's events key, a warm run's request): our end of
    the socket, and the child's pid."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        os.closerange(3, theirs.fileno())
        os.closerange(theirs.fileno() + 1, 1 << 16)
        try:
            body(theirs)
        finally:
            os._exit(0)
    theirs.close()
    return ours, pid


def _set_dumpable(dumpable: bool) -> None:
    """Whether a process of the same user without CAP_SYS_PTRACE may trace this one or
    open its /proc files (prctl PR_SET_DUMPABLE); inherited by what it forks."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None).prctl(4, int(dumpable), 0, 0, 0)


def _open_to_the_judge() -> None:
    """Make this process dumpable again (the starter is not, and a fork inherits that), so
    that the judge may read its /proc/PID/io, the kernel's count of the bytes it reads and
    writes, by which the judge tells a compilation from other work
    (kata.learner_side.compile_counts). It holds nothing of the judge's that it could not read
    itself; another run's processes are kept from it by the run's PID namespace and by
    Landlock, which lets no domain trace another beside it."""
    _set_dumpable(True)


class Starter:
    """Starts a fresh learner's process for each exercise (kata.checking.learner_connection asks
    for one as it loads a check file), so nothing one exercise's code leaves in memory (a
    listener, a thread on the socket, a filled cache) is there for the next one's checks.

    It runs no learner code: forked before any, it only forks, hands the judge the new
    process's socket (SCM_RIGHTS) and pid, and ends and reaps the ones it started. It is
    not dumpable, so a learner's process of the same user cannot trace it, and each
    process it starts nests a Landlock domain of its own where the run is confined.

    It is a child subreaper: whatever the learner's code starts, however detached (a
    double fork, setsid), stays among its descendants, which it stops while the judge
    times its own code and continues after (`pause`, `resume`; kata.isolation.pausing).
    """

    def __init__(
        self, judge: socket.socket, confined: bool, warm_up: Callable[[], None] | None
    ) -> None:
        # `confined`: the run is, and this process with it; each process it starts nests a
        # domain of its own (`confine_learner`).
        self.judge = judge
        self.confined = confined
        # A warm run's Landlock policy, which each process started here confines itself to
        # (`_prepare`).
        self.run_policy: dict[str, Any] | None = None
        _set_dumpable(False)
        confinement.become_subreaper()
        # The processes stopped while the judge times its own code (`pause`).
        self.paused: set[int] = set()
        self.paused_cpu: dict[int, float | None] = {}
        # The first one is started (and warmed) before the run's request arrives.
        self.ready: tuple[socket.socket, int] | None = self._fork(warm_up)
        self.started: set[int] = set()

    def _fork(
        self, warm_up: Callable[[], None] | None = None, host_devices: int = 0
    ) -> tuple[socket.socket, int]:
        def learner(connection: socket.socket) -> None:
            pausing.forbid_continuing()
            _open_to_the_judge()
            if host_devices:
                use_host_devices(host_devices)
            if self.run_policy is not None:
                from kata.isolation.limits import confine_run

                confine_run(self.run_policy)
            if self.confined:
                confine_learner()
            if warm_up is not None:
                warm_up()
            serve(connection)

        return _forked(learner)

    def serve(self) -> None:
        while True:
            if self.paused and not self._judge_speaks_within(pausing.PAUSE_LIMIT_SECONDS):
                self._resume()  # a judge stuck elsewhere leaves nothing stopped for long
                continue
            try:
                document, _ = wire.receive(self.judge)
            except (EOFError, OSError):
                break
            match starter_requests.read(document):
                case Pause():
                    self._resume()  # one pause at a time: a second takes the tree as it is now
                    self.paused = pausing.stop_tree(os.getpid())
                    self.paused_cpu = pausing.stopped_cpu(os.getpid())
                    wire.send(self.judge, {"stopped": len(self.paused)}, [])
                case Resume():
                    ran = pausing.ran_while_stopped(os.getpid(), self.paused_cpu)
                    self._resume()
                    wire.send(self.judge, {"ran": ran}, [])
                case Prepare() as settings:
                    self._prepare(settings)
                    wire.send(self.judge, {"pid": os.getpid()}, [])
                case Fresh(host_devices=host_devices):
                    # The one started ahead may have started its backend: only for the default.
                    if host_devices:
                        connection, pid = self._fork(host_devices=int(host_devices))
                    else:
                        connection, pid = self.ready or self._fork()
                        self.ready = None
                    self.started.add(pid)
                    wire.send(self.judge, {"pid": pid}, [])
                    socket.send_fds(self.judge, [b"F"], [connection.fileno()])
                    connection.close()
                case BytesMoved(pid=pid):
                    ours = pid in self.started
                    wire.send(self.judge, {"moved": bytes_moved(pid) if ours else None}, [])
                case End(pid=pid, wait=wait):
                    wire.send(self.judge, {"status": self._end(int(pid), float(wait))}, [])
                case _:
                    wire.send(self.judge, {"error": f"no such request {document!r}"}, [])
        self._resume()
        for pid in list(self.started):
            self._end(pid, 0.0)
        if self.ready is not None:
            self._end(self.ready[1], 0.0)
        confinement.end_descendants()  # what the learner's code orphaned, handed to this one

    def _judge_speaks_within(self, seconds: float) -> bool:
        readable, _, _ = select.select([self.judge], [], [], seconds)
        return bool(readable)

    def _resume(self) -> None:
        pausing.resume(self.paused)
        self.paused = set()

    def _prepare(self, settings: Prepare) -> None:
        # Every setting but Landlock's: this process stays outside the learners' domains,
        # since only a process whose domain holds theirs may read their /proc/PID/io
        # (`bytes_moved`), and the first one, forked before the settings came, confines
        # itself in a domain beside this one's. Each one started later confines itself
        # (`_fork`). It runs no learner code, is not dumpable, and no learner's process
        # holds its socket.
        prepare(dataclasses.replace(settings, confine=None), learner=False)
        self.run_policy = settings.confine
        self.confined = self.run_policy is not None
        if self.ready is not None:  # forked before the settings came: it takes them too
            prepare_beside(self.ready[0], settings)

    def _end(self, pid: int, wait: float) -> int | None:
        """End one of the processes this one started and reap it: its
        wait status (after `wait` seconds for it to end of itself, as one that crashed
        mid-call does), or None if it is not one of them."""
        if pid not in self.started and (self.ready is None or self.ready[1] != pid):
            return None
        self.started.discard(pid)
        deadline = time.monotonic() + wait
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done or time.monotonic() >= deadline:
                break
            time.sleep(0.005)
        if not done:
            try:
                os.kill(pid, signal.SIGKILL)
            except PermissionError:  # not to be ended from here: the run's end ends it
                return None
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
        return status


def prepare_beside(connection: socket.socket, settings: Prepare) -> None:
    """Send the starter forked by `start_beside` (or the learner's process it forked ahead)
    a warm run's settings."""
    starter_requests.send(connection, settings)
    wire.receive(connection)


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kata.learner_side.learner_process")
    parser.add_argument("fd", type=int, help="this process's end of the judge's socket")
    parser.add_argument("--confine", action="store_true")
    parser.add_argument("--host-devices", type=int, default=0)
    options = parser.parse_args(argv)
    connection = socket.socket(fileno=options.fd)
    pausing.forbid_continuing()
    if options.host_devices:
        use_host_devices(options.host_devices)
    if options.confine:
        confine_learner()
    serve(connection)


if __name__ == "__main__":
    main(sys.argv[1:])
