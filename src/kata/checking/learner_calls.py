"""The check API: calling learner code, in the learner's process, without importing it.

In the checks, `ex` stands for the learner's module: `ex.set_first(x, 3.5)` sends the call
to the learner's process (kata.learner_side.learner_process) and returns its result as NumPy
arrays and plain containers. JAX transformations are asked for by name:
`ex.set_first.jit()(x, v)`, `ex.df.vmap()(xs)` and `.grad()` are run here from the
function's exported program, `ex.step.eagerly()(...)` there. Two requests give evidence the
learner's process cannot write (docs/writing-checks.md): `ex.f.exported(...)`, the
function's program as bytes, which the judge deserializes, runs, scans and counts; and
`ex.f.speed_vs(...)`, chains of calls the judge times against its own code. Anything more
involved is a check-file helper marked `@in_learner_process`: it runs there, with the
learner's module as its first argument, and returns data for the check to judge.

What the learner's process says it saw during a call comes back with it: the XLA
compilations (`count_compilations()` counts them across the calls in a block, adding
those the kernel's count of its CPU time shows and the reply leaves out), printed
text (printed here, for pytest to capture), and whether the grader's own functions or
JAX's listeners were changed (`GraderTampering`). That is its word: it may fail a check,
and grants one only where no outside evidence exists (docs/evidence.md's table says where).

The process itself is reached through kata.checking.learner_connection, and an exported
program is read and run by kata.checking.exported_program.
"""

from __future__ import annotations

import contextlib
import functools
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from kata.checking.call_inputs import remember
from kata.checking.expect import CountedProgram, assert_close
from kata.checking.exported_program import (
    ExportedProgram,
    host_callback_message,
    program_leaves,
    program_words,
)
from kata.checking.learner_connection import LearnerProcess, all_seen, open_counts
from kata.checking.measured import measure
from kata.checking.speed import Eager, SpeedResult, Timer, compare_speed, here
from kata.cpu_clocks import cpu_seconds
from kata.handoffs import wire
from kata.handoffs.chip_connection import (
    Chip,
    ChipError,
    eager_request,
    judges_chip,
    program_request,
)
from kata.handoffs.learner_requests import Attribute, Call, Chain, Each, Export, Run
from kata.handoffs.wire import GraderTampering, LearnerError, is_key
from kata.learner_side.compile_counts import (
    UNREPORTED_COMPILATION,
    Compilations,
    counting_into,
    kernel_saw_a_compilation,
)
from kata.learner_side.learner_process import is_static


@contextlib.contextmanager
def count_compilations(measured: bool = True) -> Iterator[Compilations]:
    """The XLA compilations the learner's process made for the calls in the block; the
    check measures them as "compilations" (blocks add up), unless not `measured` (a block
    that times the same calls again)."""
    with counting_into(open_counts) as seen:
        try:
            yield seen
        finally:
            if measured:
                measure("compilations", seen.count)


def type_name(value: Any) -> str:
    """The class name of a value from the learner's process; for an object that stayed
    there (an `Opaque` handle), the name of its own class."""
    return value.type_name if isinstance(value, wire.Opaque) else type(value).__name__


def _observed(reply: dict[str, Any]) -> Any:
    """The value of a call's reply, after passing on what the learner's process saw."""
    if reply["tampered"]:
        raise GraderTampering(reply["tampered"])
    compiled = reply["compilations"]
    if not compiled and kernel_saw_a_compilation(reply["kernel_cpu"], reply["kernel_bytes"]):
        # What only a compilation explains, unreported (a relay rewrote the reply, a
        # listener was silenced): it counts, on the kernel's word.
        compiled = [UNREPORTED_COMPILATION]
    for seen in open_counts:
        seen.names += compiled
        seen.judge_seconds.append(reply["judge_seconds"])
        seen.kernel_counted &= reply["kernel_cpu"] is not None
    if reply["printed"]:
        print(reply["printed"], end="")
    return reply["value"]


def _encoded(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, list[bytes]]:
    """`args` and `kwargs` as wire documents, sharing one list of arrays, each referring to
    its own."""
    document, arrays = wire.encode((args, kwargs))
    positional, named = document["tuple"]
    return positional, named, arrays


@dataclass(frozen=True)
class LearnerFunction:
    """A function of the learner's module (or one it returned), under transformations."""

    process: LearnerProcess
    target: dict[str, Any]
    under: tuple[tuple[str, dict[str, Any]], ...] = ()
    # Called in the learner's process even where its program could be run here.
    there: bool = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The function's result for `args`. Under `jit`, `vmap` or `grad` (and not in a
        `count_compilations()` block, which counts what the learner's process compiles),
        that is what its exported program computes, run here: the transformation is the
        judge's, not applied where the learner's code could leave it out (`exported`)."""
        static = self._static_positions()
        here = not (self.there or kwargs or open_counts or static is None)
        if here and _program_takes(args, static):
            result = self._program_for(args).run(*args)
        else:
            result = _observed(self._call(args, kwargs))
        remember(args, kwargs, result)
        return result

    def _static_positions(self) -> frozenset[int] | None:
        """The arguments the outermost `jit` takes as values (none without one), where the
        transformations are all ones a program holds (`jit`, `vmap`, `grad`); else None."""
        names = [name for name, _ in self.under]
        if not names or not set(names) <= {"jit", "vmap", "grad"}:
            return None
        jits = [options for name, options in self.under if name == "jit"]
        return frozenset(jits[-1].get("static_argnums", ())) if jits else frozenset()

    def _program_for(self, args: tuple[Any, ...]) -> ExportedProgram:
        """This function's exported program for `args`' shapes, dtypes and static values,
        checked once (`exported`) and kept while its process lives."""
        key = (repr(self.target), repr(self.under), _signature(args))
        programs = self.process.programs
        if key not in programs:
            programs[key] = self.exported(*args)
        return programs[key]

    def in_its_process(self) -> LearnerFunction:
        """Run where the learner's code runs, transformations and all: for what only that
        process shows (its printed text, a host callback's effect), on its word."""
        return replace(self, there=True)

    def equation_count(self, *args: Any, reference: Callable[..., Any]) -> CountedProgram:
        """How many operations this call's program holds: the program exported by the
        learner's process for these arguments' shapes, counted here; `confirm()` holds its
        values to `reference` as `exported` does. Only a size that passes a check must be
        confirmed (kata.checking.expect.sizes_growing_each_step): compiling a stub's Python
        loop of 120 steps took the judge 4.4 s of CPU, and a size that fails earns nothing."""
        name = self.target.get("name", "the function")
        program = self._export(args, None)
        return CountedProgram(
            program.operation_count,
            functools.partial(_held_to, program, args, reference, name),
        )

    def exported(
        self,
        *args: Any,
        reference: Callable[..., Any] | None = None,
        rtol: float = 1e-4,
        layout: dict[str, Any] | None = None,
    ) -> ExportedProgram:
        """This function's program for the shapes of `args`, handed over as data (StableHLO
        bytes, never unpickled), deserialized and run here on `args` and on arguments the
        judge draws after the export (`drawn_again`). With a `reference` (the judge's own
        function of the same arguments) its results must be the reference's (within `rtol`):
        a check that reads the program's shape, not its values, passes one. Without, the
        check compares what `run` gives with its own answer, and the program must agree with
        the function itself under `jax.jit` (one that reads something besides its arguments
        fails), and change with its keys (`assert_varies_with_keys`). One that calls back
        into Python on the host fails.

        The learner's process is sent the shapes alone (`shapes_only`), and only values it
        has never seen (`assert_unseen`): a program is committed before its process knows
        what it will be run on, so one of constants, or one that looks its arguments up
        among values the process met before, gives a wrong answer where the check compares
        it with the check's own. Past that moment its word adds nothing: it could answer
        every later call with what the program gives.

        `layout` asks for the program over all of that process's devices, `args` laid out
        on them (kata.learner_side.learner_process.exported); the judge compiles and runs it on
        as many of its own (`ExportedProgram.compiled`)."""
        name = self.target.get("name", "the function")
        program = self._export(args, layout)
        if reference is not None:
            _held_to(program, args, reference, name, rtol)
            return program
        again = drawn_again(args)
        what = f"{name}'s exported program, run by the grader,"
        static = tuple(i for i, a in enumerate(args) if is_static(a))
        # The comparison runs in the learner's process: what the function itself returns,
        # under `jax.jit` (eagerly, XLA may round differently). A program over a key is
        # held to the function run eagerly: its bits are the same either way, and a
        # function that draws otherwise when traced (to show the judge a clean program)
        # gives itself away.
        if assert_varies_with_keys(program, args, again, name):
            eager = tuple(step for step in self.under if step[0] != "jit")
            itself = replace(self, there=True, under=eager)
        else:
            itself = replace(self, there=True).jit(static_argnums=static)
        # Both sides compute at once: the learner's process its function, the judge the
        # program (on two cores, a warm grading of 01's solution took 0.49 s instead of 0.57,
        # median of 6).
        its_results = itself.each_later([args, again])
        try:
            ours = [program.run(*these) for these in (args, again)]
        except BaseException:
            self.process.stop()
            raise
        for mine, its in zip(ours, its_results(), strict=True):
            try:
                _assert_same(mine, its, what)
            except AssertionError as differs:
                raise AssertionError(
                    f"{differs}. The program the function compiles to and the function "
                    "itself disagree on the same arguments: does it read something besides "
                    "them (a global generator such as np.random, a value kept at module level)?"
                ) from None
        return program

    def _export(
        self, args: tuple[Any, ...], layout: dict[str, Any] | None, platform: str | None = None
    ) -> ExportedProgram:
        """The program the learner's process exports for `args`' shapes (for `platform`, or
        its own), read and free of host callbacks, not yet run (`exported`)."""
        name = self.target.get("name", "the function")
        assert_unseen(args, name)
        positional, named, arrays = _encoded(shapes_only(args), {})
        platforms = [platform] if platform else None
        request = Export(self.target, list(self.under), positional, named, layout, platforms)
        try:
            data = _observed(self.process.ask(request, arrays))
        except LearnerError as error:
            if "host_callbacks" in error.message:
                raise AssertionError(host_callback_message(name)) from None
            raise
        data = np.asarray(data, dtype=np.uint8).tobytes()
        program = ExportedProgram.from_bytes(data, args, layout)
        program.assert_no_host_callbacks(name)
        return program

    def speed_vs(
        self,
        baseline: Eager,
        *args: Any,
        reference: Callable[..., Any],
        margin: float,
        carry: int = 0,
        path: tuple[int | str, ...] = (),
    ) -> SpeedResult:
        """How much faster this function runs than `baseline`, the judge's own code (the
        reference run eagerly), both timed by the judge (kata.checking.speed); the
        baseline with every process of the learner's code stopped (`held_still`). Where the
        run was handed a chip (kata.servers.chip_holder), a function that passed is timed
        again there (`_on_chip`), and the chip's figure is the one shown.

        The learner's side runs as chains of calls in its process: each call gets, as its
        argument `carry`, the part at `path` of what the call before returned, so no call
        can be answered before the one before it finished, nor all in one batch; each
        chain starts from values the judge draws anew (`drawn_again`). The judge times
        each chain across the boundary on its own clock, and checks three links of it, the
        first and two picked after it returned, against `reference(*args)`: a chain that
        was not computed fails, whatever it took. Each of those links must also be, bit
        for bit, what the function's own program (`exported` before the chain, for values
        the learner's process never saw) gives here for the same arguments: a function that
        tells a tracer from an array can compile one thing and, called, run another (NumPy
        on the host, its operations one by one), and only the calls are timed.

        A function that cannot be exported fails, whatever it raised: an exception the
        learner's code raises never chooses weaker evidence (one held to `reference` alone
        let NumPy on the host that raised ConcretizationTypeError when traced pass, 456×).
        Where a right answer reads Python numbers off its values (08's fit, its losses as
        floats), the check times it wrapped so that those reads are answered while it is
        traced (kata.learner_side.scalar_reads), its calls held to that program the same.
        """
        name = self.target.get("name", "the function")
        # Held to the function itself under jit (`reference` may judge a part of the result).
        program = self.exported(*drawn_again(args))
        # Links held to the program once the timing is over: the judge's JAX, which runs
        # the program, would leave its CPU threads spinning beside the next chain (a right
        # answer then measured 9× and 11× in 7 gradings, 69-133× in the 11 others).
        computed: list[tuple[Any, list[Any], int, int]] = []
        chain = self._chain_timer(args, reference, carry, path, computed)
        chip = judges_chip()
        ahead = self._sent_ahead(chip, baseline, args, carry, path) if chip else None
        result = compare_speed(chain, here(baseline, self.process.held_still), margin=margin)
        if result.passed:  # a slow answer is told it is slow
            for got, fed, call, calls in computed:
                _assert_computed_by(program, got, fed, path, name, call, calls)
            if chip is not None:
                try:
                    chip.greeted()
                    timers = self._on_chip(chip, ahead, baseline, args, reference, carry, path)
                    timed = compare_speed(*timers, margin=margin)
                except ChipError as error:  # then the CPU's figure stands alone
                    return replace(result, not_on_chip=str(error))
                return replace(timed, device=chip.device, on_cpu=result)
        return result

    def _chain_timer(
        self,
        args: tuple[Any, ...],
        reference: Callable[..., Any],
        carry: int,
        path: tuple[int | str, ...],
        computed: list[tuple[Any, list[Any], int, int]],
    ) -> Timer:
        """`speed_vs`'s timer of the learner's side: a chain of `calls` calls in its process
        on values drawn anew, timed across the boundary on the judge's clock (with the
        process's CPU per call), three of its links held to `reference` now and kept in
        `computed`, to be held to the function's own program after."""
        pick = random.SystemRandom()

        def chain(calls: int) -> tuple[float, float | None]:
            fresh = drawn_again(args)
            positional, named, arrays = _encoded(fresh, {})
            followed = {"arg": carry, "path": list(path)}
            request = Chain(self.target, list(self.under), positional, named, calls, followed)
            pid = self.process.pid
            before = cpu_seconds(pid) if pid else None
            started = time.perf_counter()
            reply = self.process.ask(request, arrays)
            seconds = time.perf_counter() - started
            after = cpu_seconds(pid) if pid == self.process.pid and before is not None else None
            cpu = (after - before) / calls if after is not None and before is not None else None
            carried = _observed(reply)
            for link in {0, pick.randrange(calls), calls - 1}:
                fed = list(fresh)
                fed[carry] = _nth(carried, link - 1) if link else fresh[carry]
                got = _nth(carried, link)
                _assert_link(got, reference(*fed), link + 1, calls)
                computed.append((got, fed, link + 1, calls))
            return seconds / calls, cpu

        return chain

    def _sent_ahead(
        self,
        chip: Chip,
        baseline: Eager,
        args: tuple[Any, ...],
        carry: int,
        path: tuple[int | str, ...],
    ) -> ExportedProgram | None:
        """The function exported for the chip's platform and sent there to compile, with a
        first eager run of `baseline` (`Chip.send_ahead`), while the CPU's timing goes on; None
        where the holder has not opened the chip yet or the export fails (`_on_chip` then
        exports it again, and says why). Nothing sent ahead is timed or believed."""
        try:
            if not chip.opened():
                return None
            program = self._exported_for(chip, args)
            data, words = program.program.serialize(), program_words(drawn_again(args))
            chip.send_ahead(
                program_request(data, words, _carried(args, carry), path, 2, set()),
                eager_request(baseline.function, baseline.args, 1),
            )
        except ChipError:
            return None
        return program

    def exported_for_chip(self, chip: Chip, *args: Any) -> ExportedProgram:
        """This function's program for the shapes of `args`, exported by the learner's
        process for `chip`'s platform, for the holder to run (`Chip.time_program`): read
        here, never run here. ChipError where it cannot be exported there (`_exported_for`).
        What the chip computes with it is the check's to hold to its own answer."""
        return self._exported_for(chip, args)

    def _exported_for(self, chip: Chip, args: tuple[Any, ...]) -> ExportedProgram:
        """The function's program exported for the chip's platform. One the learner's process
        cannot export there (a platform it does not know, a lowering the chip lacks) is the
        chip's failure, not the learner's: the same function's program for the CPU passed,
        and the CPU's figure stands, with the reason beside it."""
        try:
            return self._export(drawn_again(args), None, chip.platform)
        except (LearnerError, AssertionError) as error:
            why = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ChipError(f"it could not be exported for {chip.platform}: {why}") from None

    def _on_chip(
        self,
        chip: Chip,
        program: ExportedProgram | None,
        baseline: Eager,
        args: tuple[Any, ...],
        reference: Callable[..., Any],
        carry: int,
        path: tuple[int | str, ...],
    ) -> tuple[Timer, Timer]:
        """`speed_vs` on the chip, for a function whose calls the CPU's timing showed to be
        its compiled program: that `program`, exported by the learner's process for the
        chip's platform (now, where it was not sent ahead), run there by the holder as a
        chain of calls on arguments the judge draws (its links held to `reference`), against
        `baseline` run eagerly there, every process of the learner's code stopped meanwhile."""
        pick = random.SystemRandom()
        if program is None:
            program = self._exported_for(chip, args)
        data = program.program.serialize()
        carried = _carried(args, carry)

        def on_chip(calls: int) -> tuple[float, float | None]:
            fresh = drawn_again(args)
            checked = {0, pick.randrange(calls), calls - 1}
            links = checked | {link - 1 for link in checked if link}
            request = program_request(data, program_words(fresh), carried, path, calls, links)
            seconds, kept = chip.time_program(request)
            for link in checked:
                fed = list(fresh)
                fed[carry] = kept[link - 1] if link else fresh[carry]
                want = reference(*fed)
                _assert_link(kept[link], want, link + 1, calls, CHIP_LINK_RTOL, CHIP_LINK_ATOL)
            return seconds, None

        def eager_on_chip(calls: int) -> tuple[float, float | None]:
            with self.process.held_still():
                return chip.time_eager(eager_request(baseline.function, baseline.args, calls)), None

        return on_chip, eager_on_chip

    def each_later(self, calls: list[tuple[Any, ...]]) -> Callable[[], list[Any]]:
        """Call the function in its process on each tuple of `calls`, in one request sent
        now: what this returns waits for the results (`LearnerProcess.ask_later`)."""
        positional, named, arrays = _encoded(tuple(calls), {})
        request = Each(self.target, list(self.under), positional, named)
        reply = self.process.ask_later(request, arrays)
        return lambda: _observed(reply())

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        positional, named, arrays = _encoded(args, kwargs)
        return self.process.ask(Call(self.target, list(self.under), positional, named), arrays)

    def _with(self, name: str, **options: Any) -> LearnerFunction:
        return replace(self, under=(*self.under, (name, options)))

    def jit(self, static_argnums: tuple[int, ...] = ()) -> LearnerFunction:
        return self._with("jit", static_argnums=list(static_argnums))

    def vmap(self, in_axes: Any = 0) -> LearnerFunction:
        return self._with("vmap", in_axes=in_axes)

    def grad(self, argnums: int | tuple[int, ...] = 0) -> LearnerFunction:
        return self._with("grad", argnums=argnums)

    def eagerly(self) -> LearnerFunction:
        """Run with every `jax.jit` switched off (`jax.disable_jit()`)."""
        return self._with("eager")

    def keys_checked(self) -> LearnerFunction:
        """Run with JAX's key-reuse checker on (`jax.debug_key_reuse(True)`): a key used
        twice raises KeyReuseError, which names the reuse in JAX's words. It runs in the
        learner's process, so it can only fail a check; `exported(...)
        .assert_each_key_used_once` is the evidence."""
        return self._with("keys_checked")


def _carried(args: tuple[Any, ...], carry: int) -> tuple[int, int]:
    """Where argument `carry`'s leaves lie among a program's words for `args` (start, stop)."""
    import jax

    before = len(program_leaves(args[:carry]))
    return before, before + len(jax.tree.leaves(args[carry]))


def _program_takes(args: tuple[Any, ...], static: frozenset[int]) -> bool:
    """Whether a program exported for `args` takes them as `jax.jit` with `static` would:
    the static ones as values (`is_static`) and the rest as arrays and keys, with no
    object that stayed in the learner's process."""
    import jax

    opaque = any(isinstance(leaf, wire.Opaque) for leaf in jax.tree.leaves(args))
    return not opaque and all(is_static(a) == (i in static) for i, a in enumerate(args))


def _signature(args: tuple[Any, ...]) -> str:
    """What a program is exported for: each array's shape and dtype, each static value."""
    import jax

    def described(leaf: Any) -> str:
        if is_static(leaf):
            return repr(leaf)
        return f"{np.shape(leaf)}:{getattr(leaf, 'dtype', type(leaf).__name__)}"

    leaves, structure = jax.tree.flatten(args, is_leaf=is_key)
    return f"{structure}|{'|'.join(described(leaf) for leaf in leaves)}"


def _held_to(
    program: ExportedProgram,
    args: tuple[Any, ...],
    reference: Callable[..., Any],
    name: str,
    rtol: float = 1e-4,
) -> None:
    """`program` gives what `reference` does on `args` and on arguments drawn now, after
    its export (`LearnerFunction.exported`)."""
    what = f"{name}'s exported program, run by the grader,"
    for these in (args, drawn_again(args)):
        _assert_same(program.run(*these), reference(*these), what, rtol=rtol)


def shapes_only(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """`args` with every array and key replaced by zeros of its shape and kind: all an
    export needs (static arguments, baked in, stay as they are)."""
    import jax

    def blank(leaf: Any) -> Any:
        if is_key(leaf):
            words = np.zeros(jax.random.key_data(leaf).shape, np.uint32)
            return jax.random.wrap_key_data(words, impl=jax.random.key_impl(leaf))
        if hasattr(leaf, "dtype") and hasattr(leaf, "shape"):
            return np.zeros(np.shape(leaf), leaf.dtype)
        return leaf

    return tuple(a if is_static(a) else jax.tree.map(blank, a, is_leaf=is_key) for a in args)


def assert_unseen(args: tuple[Any, ...], name: str) -> None:
    """Refuse (as the check's own error) to export a program for arguments whose every array
    the learner's process has been sent or sent back before: it could look them up. A
    check exports first, then calls the function plainly (docs/writing-checks.md)."""
    _, arrays = wire.encode(tuple(a for a in args if not is_static(a)))
    if all_seen(arrays):
        raise CheckOrderError(
            f"the check exports {name}'s program for values the learner's process has "
            "already seen: it must export before it sends them"
        )


class CheckOrderError(Exception):
    """A check asked for evidence in an order that lets the learner's process write it."""


def drawn_again(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """`args` as the judge draws them anew: each float array scaled elementwise by a factor
    in [0.75, 1.25] (its signs, its zeros and roughly its range kept, so a function's domain
    holds) and each key replaced by a fresh one of its kind; the rest as it was."""
    import jax
    import jax.numpy as jnp

    draw = np.random.default_rng()

    def again(leaf: Any) -> Any:
        if is_key(leaf):
            words = jax.random.key_data(leaf)
            fresh = draw.integers(0, 2**32, size=words.shape, dtype=np.uint32)
            return jax.random.wrap_key_data(fresh, impl=jax.random.key_impl(leaf))
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and jnp.issubdtype(dtype, jnp.floating):
            scaled = np.asarray(leaf, np.float64) * draw.uniform(0.75, 1.25, np.shape(leaf))
            return np.asarray(scaled.astype(dtype))
        return leaf

    # A static argument is baked into the program as it was: it stays.
    return tuple(a if is_static(a) else jax.tree.map(again, a, is_leaf=is_key) for a in args)


def _assert_same(got: Any, want: Any, what: str, rtol: float = 1e-4) -> None:
    import jax

    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves), f"{what} returns another structure"
    for a, b in zip(got_leaves, want_leaves, strict=True):
        assert_close(a, b, what, rtol=rtol, atol=1e-5)


def assert_varies_with_keys(
    program: ExportedProgram, args: tuple[Any, ...], again: tuple[Any, ...], name: str
) -> bool:
    """A program over a key draws from it: given other keys (`again`, drawn by the judge
    after the export), its result changes. One of constants, which a check of how it uses
    its keys would find uses none twice, fails. Whether the program takes a key."""
    import jax

    if not any(is_key(leaf) for leaf in jax.tree.leaves(args, is_leaf=is_key)):
        return False
    first, second = jax.tree.leaves(program.run(*args)), jax.tree.leaves(program.run(*again))
    assert any(not np.array_equal(a, b) for a, b in zip(first, second, strict=True)), (
        f"{name}'s exported program, run by the grader with two different keys, gave the "
        "same result: it draws nothing from its key"
    )
    return True


def _nth(stacked: Any, n: int) -> Any:
    """Call `n`'s part of what a chain returned, stacked over its calls."""
    if isinstance(stacked, Mapping):
        return {key: _nth(value, n) for key, value in stacked.items()}
    if isinstance(stacked, (list, tuple)):
        return type(stacked)(_nth(value, n) for value in stacked)
    return np.asarray(stacked)[n]


def _assert_computed_by(
    program: ExportedProgram,
    got: Any,
    fed: list[Any],
    path: tuple[int | str, ...],
    name: str,
    call: int,
    calls: int,
) -> None:
    """`got`, what call `call` of a timed chain returned at `path` for arguments `fed`, is
    bit for bit what `program`, the function's own, gives for them here. Two processes of
    one jaxlib compile one program to the same code, which rounds alike (measured: 02's
    right answers, their concrete calls against the judge's run of the program, equal in
    every bit); NumPy's sin and cos round otherwise (on 10,000 inputs, 02's 100 rounds in
    float32 NumPy ended on the program's bits for 44% of them, in float64 for none)."""
    import jax

    want = program.run(*fed)
    for step in path:
        want = want[step]
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    same = len(got_leaves) == len(want_leaves) and all(
        np.asarray(a).dtype == np.asarray(b).dtype
        and np.shape(a) == np.shape(b)
        and np.asarray(a).tobytes() == np.asarray(b).tobytes()
        for a, b in zip(got_leaves, want_leaves, strict=False)
    )
    assert same, (
        f"call {call} of {calls} timed calls in a row of {name} returned other bits than its "
        "own compiled program, run by the grader, gives for the same arguments: called on "
        "arrays it computes another way than when it is traced (on the host with NumPy, or "
        "its operations one at a time), and a compiled function computes what its program "
        "does. Does it check whether its argument is a tracer?"
    )


# How far a link timed on a chip may be from the judge's float64 reference: a TPU multiplies
# float32 matrices in bfloat16 passes unless a program asks for more (measured on a TPU v5e:
# one step of 07's reference off by 3e-3 of a weight, one of 08's fit by 2e-3), and the CPU's
# links, held at 1e-3 and bit for bit to the program, already showed what the calls compute.
CHIP_LINK_RTOL = 3e-2
CHIP_LINK_ATOL = 3e-3


def _assert_link(
    got: Any, want: Any, call: int, calls: int, rtol: float = 1e-3, atol: float = 1e-4
) -> None:
    what = f"call {call} of {calls} timed calls in a row"
    if isinstance(want, Mapping):
        assert isinstance(got, Mapping) and set(want) <= set(got), (
            f"{what} returned {type_name(got)}, not a dict with {', '.join(map(str, want))}"
        )
        for key in want:
            assert_close(got[key], want[key], f"{what}, ['{key}']", rtol=rtol, atol=atol)
    else:
        assert_close(got, want, what, rtol=rtol, atol=atol)


class LearnerModule:
    """The learner's module, as the judge sees it: names that lead to the learner's process."""

    def __init__(self, exercise: Path, checks: Path | None = None, host_devices: int = 0) -> None:
        self._process = _shared_process()
        self._process.load(exercise, checks, host_devices)

    def __getattr__(self, name: str) -> LearnerFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        self._process.ask(Attribute(name))
        return LearnerFunction(self._process, {"name": name})

    def invoke(self, held: wire.Opaque, name: str | None = None) -> LearnerFunction:
        """An object the learner's code returned (a model, a `Tree` or an `Opaque`), or a
        helper built there, to be called in the learner's process as a function of its
        module is; the checks' messages call it `name` (else by its class's name)."""
        target = {"opaque": held.handle, "name": name or held.type_name}
        return LearnerFunction(self._process, target)

    def run(self, helper: str, *args: Any, **kwargs: Any) -> Any:
        """The check file's helper `helper`, run in the learner's process with its module."""
        positional, named, arrays = _encoded(args, kwargs)
        return _observed(self._process.ask(Run(helper, positional, named), arrays))


@functools.cache
def _shared_process() -> LearnerProcess:
    """The run's one way to learner's processes: a fresh process for each check file."""
    return LearnerProcess()


Helper = TypeVar("Helper", bound=Callable[..., Any])


def in_learner_process(helper: Helper) -> Helper:
    """Mark a check file's helper that touches learner code. Called with the judge's `ex`,
    it runs in the learner's process, with the learner's module as `ex`, and its result
    comes back as data: arrays, numbers, strings and containers of them. It must not judge:
    the check asserts on what it returns."""

    @functools.wraps(helper)
    def call(ex: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(ex, LearnerModule):
            return ex.run(helper.__name__, *args, **kwargs)
        return helper(ex, *args, **kwargs)

    call.runs_in_learner_process = True  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]


def builds_in_learner_process(builder: Helper) -> Helper:
    """Mark a check file's helper that builds an argument for the learner's code in its
    process, from the judge's numbers and the learner's objects it is given, with library
    code alone (Optax's `init`, Equinox's `tree_at`): it never touches the learner's module
    (its first parameter goes unused; tests/test_evidence_table.py holds each to that).
    What it builds grants nothing: the check judges what the learner's code returns for it.
    The mark is read from the check file's source (kata.supervisor.evidence)."""
    return in_learner_process(builder)


def rebuilt(ex: Any, value: Any, as_asked: bool = True) -> Any:
    """`value` as the learner's process holds it, built there once: a `Tree` with children
    `replaced` becomes one object, which every later call gets again by its handle (sent
    as it is, a changed Tree would be built anew for each call, and a change a call made to
    it in place would be lost). With `as_asked`, what comes back must describe exactly what
    was asked for, class and children: a builder replaced in that process (or an unflatten
    of the learner's own that loses children) cannot hand the learner's functions another
    object than the judge's."""
    if not isinstance(ex, LearnerModule):  # in the learner's process: it is built already
        return value
    built = ex.run("rebuilt", value)
    assert not as_asked or _describes(built, value), (
        f"the {type_name(value)} built in the learner's process with the checks' numbers "
        "came back holding other children than asked: its unflatten does not rebuild what "
        "its flatten gave, or kata's builder there was replaced"
    )
    return built


rebuilt.runs_in_learner_process = True  # type: ignore[attr-defined]


def _describes(got: Any, want: Any) -> bool:
    """Whether `got`, as it came back, is `want`: the same classes, children and values."""
    if isinstance(want, wire.Tree):
        return (
            isinstance(got, wire.Tree)
            and (got.type_name, got.names()) == (want.type_name, want.names())
            and all(_describes(g, w) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, wire.Opaque):
        return isinstance(got, wire.Opaque) and got.type_name == want.type_name
    if isinstance(want, list | tuple):
        return (
            type(got) is type(want)
            and len(got) == len(want)
            and all(_describes(g, w) for g, w in zip(got, want, strict=True))
        )
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and list(got) == list(want)
            and all(_describes(got[k], want[k]) for k in want)
        )
    if isinstance(want, np.ndarray | np.generic) or isinstance(got, np.ndarray | np.generic):
        return np.shape(got) == np.shape(want) and bool(np.array_equal(got, want))
    return type(got) is type(want) and got == want


def held_still(ex: Any) -> contextlib.AbstractContextManager[None]:
    """Every process of the learner's code stopped for the block (`LearnerProcess.held_still`):
    for a check's own timing of what it judges the learner's answer against. Nothing to
    stop where `ex` is the learner's module itself (a helper in its process)."""
    if isinstance(ex, LearnerModule):
        return ex._process.held_still()
    return contextlib.nullcontext()


@in_learner_process
def forget_compiled_programs(ex: Any) -> None:
    """Empty JAX's caches in the learner's process: the next call compiles as a first one."""
    import jax

    jax.clear_caches()
