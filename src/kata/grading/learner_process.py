"""The learner's process: imports the learner's module and runs what the judge asks of it.

The judge (pytest, the checks, kata's plugin) never imports learner code; it asks this
process, over a Unix socket, to call a function of the learner's module (under JAX
transformations it names) or one of the check file's `@in_learner_process` helpers, and
gets back data: the result, plus what kata's probes saw during the call (the XLA
compilations, what was printed, and whether the grader's own functions were changed).
The verdict is never decided here; a hostile process can only send wrong values.

Started three ways, all serving `serve`: forked beside the judge by the cold sandbox and
by the warm worker's spare, after the grading modules are imported and before any learner
code runs (`start_beside`), or as `python -m kata.grading.learner_process FD` when the
checks run straight under pytest (an IDE), or after the one before it was stopped.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import io
import json
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kata.grading import wire

# The judge sends this when it gives up on a call (kata.checking.learner_calls).
WHERE_SIGNAL = signal.SIGUSR1
# What a call may print before the rest is cut: the judge shows the learner 4,000 characters.
PRINTED_LIMIT = 64_000


class Session:
    """One exercise: the check file's helpers, the learner's module and the objects it
    handed out (by handle)."""

    def __init__(self, exercise: Path, checks: Path | None) -> None:
        import kata.checking.probes  # noqa: F401  (part of the fingerprint)
        from kata.grading.integrity import Fingerprint
        from kata.grading.learner import load_exercise

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

    def function(self, request: dict[str, Any]) -> Any:
        """The function a request names, under its transformations: built once, so that
        calling it again reuses JAX's compiled program as a learner's own code would."""
        key = json.dumps([request["target"], request.get("under", [])])
        if key not in self.transformed:
            named = request["target"]
            if "opaque" in named:
                target = self.find(wire.Opaque(int(named["opaque"]), ""))
            else:
                target = getattr(self.module, str(named["name"]))
            self.transformed[key] = transformed(target, request.get("under", []))
        return self.transformed[key]

    def helper(self, name: str) -> Any:
        """A check file's `@in_learner_process` helper, to be called with the module."""
        helper = getattr(self.checks, name, None)
        if helper is None or not getattr(helper, "runs_in_learner_process", False):
            raise wire.WireError(f"the checks have no helper {name!r} for this process")
        return lambda *args, **kwargs: helper(self.module, *args, **kwargs)

    def answer(self, request: dict[str, Any], arrays: list[bytes]) -> dict[str, Any]:
        import jax

        from kata.checking.probes import count_compilations, traced_equation_count

        op = request["op"]
        if op == "attribute":
            getattr(self.module, str(request["name"]))  # raises as the learner's module would
            return {"found": True}
        fn = self.helper(str(request["name"])) if op == "run" else self.function(request)
        args = wire.decode(request["args"], arrays, self.find, jax.device_put)
        kwargs = wire.decode(request["kwargs"], arrays, self.find, jax.device_put)
        if op == "equations":
            return {"value": traced_equation_count(fn, *args, **kwargs)}
        printed = _Printed()
        with count_compilations() as compiled, contextlib.redirect_stdout(printed):
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


def transformed(fn: Any, under: list[list[Any]]) -> Any:
    """`fn` under the judge's JAX transformations, innermost first."""
    import jax

    from kata.checking.speed import eagerly

    for name, options in under:
        if name == "jit":
            fn = jax.jit(fn, static_argnums=tuple(options.get("static_argnums", ())))
        elif name == "vmap":
            fn = jax.vmap(fn, in_axes=_axes(options.get("in_axes", 0)))
        elif name == "grad":
            fn = jax.grad(fn, argnums=_axes(options.get("argnums", 0)))
        elif name == "eager":
            fn = eagerly(fn)
        else:
            raise wire.WireError(f"an unknown transformation {name!r}")
    return fn


def _axes(value: Any) -> Any:
    return tuple(_axes(v) for v in value) if isinstance(value, list) else value


class StoppedByJudge(BaseException):
    """The judge gave up on the call (its time ran out): raised where the learner's code
    is, so the reply says which line it was stuck on."""


def _stopped_by_judge(*_: object) -> None:
    raise StoppedByJudge("stopped by the grader")


def serve(connection: socket.socket) -> None:
    """Answer the judge until it hangs up. `load` switches to another exercise (its check
    file and learner's module, imported afresh), as the judge moves to its next check file."""
    signal.signal(WHERE_SIGNAL, _stopped_by_judge)
    session: Session | None = None
    failed: dict[str, Any] | None = {"error": _not_loaded()}
    while True:
        try:
            request, arrays = wire.receive(connection)
        except EOFError:
            return
        op = request.get("op")
        if op == "prepare":
            prepare(request)
            reply, blobs = wire.encode({"pid": os.getpid()})
        elif op == "load":
            if session is not None:  # the last exercise's programs are of no more use
                import jax

                session = None
                jax.clear_caches()
                gc.collect()
            exercise, checks = Path(request["exercise"]), request.get("checks")
            session, failed = _load(exercise, Path(checks) if checks else None)
            reply, blobs = wire.encode(failed or {"pid": os.getpid()})
        elif session is None:
            reply, blobs = wire.encode(failed)
        else:
            try:
                reply, blobs = wire.encode(session.answer(request, arrays), session.keep)
            except BaseException as error:  # noqa: BLE001 — learner code raised: report it
                reply, blobs = wire.encode(failure_of(error, session.path))
        wire.send(connection, reply, blobs)


def _load(exercise: Path, checks: Path | None) -> tuple[Session | None, dict[str, Any] | None]:
    try:
        return Session(exercise, checks), None
    except BaseException as error:  # noqa: BLE001 — the module does not import: every call fails alike
        return None, failure_of(error, exercise)


def _not_loaded() -> dict[str, Any]:
    return {"types": ["RuntimeError"], "message": "no exercise file loaded", "frames": []}


def prepare(request: dict[str, Any]) -> None:
    """Take on a warm run's settings (the worker's spare forked this process before it
    knew them): its folder, environment, limits and confinement."""
    from kata.grading.container import drop_privileges
    from kata.grading.sandbox import apply_limits, confine_run

    drop_privileges()  # forked before the judge gave up the run's capabilities
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    apply_limits(int(request["memory"]) or None)
    if request.get("confine") is not None:
        confine_run(request["confine"])
        confine_learner()


def confine_learner() -> None:
    """Nest a Landlock domain of its own inside the run's: it may still write its working
    folder, TMPDIR and JAX's compilation cache (as the run may), but, in a domain the
    judge is not in, it can no more trace the judge or read its memory, where the events'
    key is (kata.grading.seal)."""
    from kata.grading import confinement

    folders = [os.getcwd(), os.environ.get("TMPDIR"), os.environ.get("JAX_COMPILATION_CACHE_DIR")]
    writable = ("/dev/null", *(f for f in folders if f and os.path.isdir(f)))
    devices, _ = confinement.accelerator_paths()
    confinement.confine(confinement.Policy(readable=("/",), writable=writable, devices=devices))


def start_beside(
    confined: bool, warm_up: Callable[[], None] | None = None
) -> tuple[socket.socket, int]:
    """Fork a learner's process from this one (which imported JAX and kata, and started no
    backend): the judge's end of its socket, and its pid. `warm_up` runs in it first."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        # Nothing of the judge's: a pipe with the events' key, a warm run's request.
        os.closerange(3, theirs.fileno())
        os.closerange(theirs.fileno() + 1, 1 << 16)
        try:
            if confined:
                confine_learner()
            if warm_up is not None:
                warm_up()
            serve(theirs)
        finally:
            os._exit(0)
    theirs.close()
    ours.set_inheritable(True)
    return ours, pid


def prepare_beside(connection: socket.socket, settings: dict[str, Any]) -> None:
    """Send a learner's process forked by `start_beside` a warm run's settings (`prepare`)."""
    wire.send(connection, {"op": "prepare", **settings}, [])
    wire.receive(connection)


def main(argv: list[str]) -> None:
    connection = socket.socket(fileno=int(argv[0]))
    if len(argv) > 1 and argv[1] == "--confine":
        confine_learner()
    serve(connection)


if __name__ == "__main__":
    main(sys.argv[1:])
