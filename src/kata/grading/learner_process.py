"""The learner's process: imports the learner's module and runs what the judge asks of it.

`python -m kata.grading.learner_process FD FILE` serves one judge over the connected Unix
socket FD: it confines itself (as every run of learner code does), imports FILE, and then
answers requests until the judge hangs up. Each request names a function of the module (or
an object an earlier call returned), JAX transformations to apply to it, and arguments;
the answer is the result as data, plus what kata's probes saw during the call: the XLA
compilations and what was printed. The verdict is never decided here.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from kata.grading import wire


class Session:
    """The learner's module, and the objects it handed out (by handle)."""

    def __init__(self, path: Path) -> None:
        import kata.checking.probes  # noqa: F401  (part of the fingerprint)
        from kata.grading.integrity import Fingerprint
        from kata.grading.learner import load_exercise

        self.path = path
        # What the probes rely on, before any learner code runs: a probe's numbers count
        # only while it is unchanged.
        self.fingerprint = Fingerprint.take()
        self.module = load_exercise(path.stem, path.parent)
        self.objects: dict[int, Any] = {}

    def keep(self, item: Any) -> wire.Opaque:
        self.objects[id(item)] = item
        return wire.Opaque(id(item), type(item).__name__)

    def find(self, opaque: wire.Opaque) -> Any:
        try:
            return self.objects[opaque.handle]
        except KeyError:
            raise wire.WireError(f"no object with handle {opaque.handle}") from None

    def target(self, request: dict[str, Any]) -> Any:
        named = request["target"]
        if "opaque" in named:
            return self.find(wire.Opaque(int(named["opaque"]), ""))
        return getattr(self.module, str(named["name"]))

    def answer(self, request: dict[str, Any], arrays: list[bytes]) -> dict[str, Any]:
        import jax

        from kata.checking.probes import count_compilations, traced_equation_count

        op = request["op"]
        if op == "attribute":
            found = getattr(self.module, str(request["name"]), None)
            return {"callable": callable(found), "found": hasattr(self.module, request["name"])}
        fn = transformed(self.target(request), request.get("under", []))
        args = wire.decode(request["args"], arrays, self.find, jax.device_put)
        kwargs = wire.decode(request["kwargs"], arrays, self.find, jax.device_put)
        if op == "equations":
            return {"value": traced_equation_count(fn, *args, **kwargs)}
        printed = io.StringIO()
        with count_compilations() as compiled, contextlib.redirect_stdout(printed):
            result = fn(*args, **kwargs)
            result = jax.block_until_ready(result)
            jax.effects_barrier()
        return {
            "value": result,
            "compilations": compiled.names,
            "printed": printed.getvalue(),
            "tampered": self.fingerprint.changed(),
        }

    def failure(self, error: BaseException) -> dict[str, Any]:
        return failure_of(error, self.path)


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

    for name, options in under:
        if name == "jit":
            fn = jax.jit(fn, static_argnums=tuple(options.get("static_argnums", ())))
        elif name == "vmap":
            fn = jax.vmap(fn, in_axes=_axes(options.get("in_axes", 0)))
        elif name == "grad":
            fn = jax.grad(fn, argnums=_axes(options.get("argnums", 0)))
        elif name == "eager":
            fn = _eagerly(fn)
        else:
            raise wire.WireError(f"an unknown transformation {name!r}")
    return fn


def _axes(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _eagerly(fn: Any) -> Any:
    import jax

    def run(*args: Any, **kwargs: Any) -> Any:
        with jax.disable_jit():
            return fn(*args, **kwargs)

    return run


def serve(connection: socket.socket, path: Path | None = None) -> None:
    """Answer the judge until it hangs up. A `load` request switches to another exercise
    file (a new module, imported afresh), as the judge moves to its next check file."""
    session: Session | None = None
    failed: dict[str, Any] | None = None
    if path is not None:
        session, failed = _load(path)
    while True:
        try:
            request, arrays = wire.receive(connection)
        except EOFError:
            return
        if request.get("op") == "load":
            session, failed = _load(Path(str(request["path"])))
            reply, blobs = wire.encode(failed or {"loaded": True})
        elif session is None:
            reply, blobs = wire.encode(failed or {"error": _not_loaded()})
        else:
            try:
                reply, blobs = wire.encode(session.answer(request, arrays), session.keep)
            except BaseException as error:
                reply, blobs = wire.encode(session.failure(error))
        wire.send(connection, reply, blobs)


def _load(path: Path) -> tuple[Session | None, dict[str, Any] | None]:
    try:
        return Session(path), None
    except BaseException as error:  # the module does not import: every call fails alike
        return None, failure_of(error, path)


def _not_loaded() -> dict[str, Any]:
    return {"types": ["RuntimeError"], "message": "no exercise file loaded", "frames": []}


def start_beside() -> socket.socket:
    """Fork a learner's process from this one (which imported JAX and kata, and started
    no backend); the judge's end of its socket, inheritable by what this process runs."""
    ours, theirs = socket.socketpair()
    if os.fork() == 0:
        ours.close()
        try:
            serve(theirs)
        finally:
            os._exit(0)
    theirs.close()
    ours.set_inheritable(True)
    return ours


def main(argv: list[str]) -> None:
    fd, file = int(argv[0]), Path(argv[1]).resolve()
    connection = socket.socket(fileno=fd)
    sys.path.insert(0, str(file.parent))
    serve(connection, file)


if __name__ == "__main__":
    main(sys.argv[1:])
