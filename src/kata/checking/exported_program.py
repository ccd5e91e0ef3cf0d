"""A learner's function as a program the judge holds: its exported StableHLO, read and run here.

The learner's process hands over `jax.export` of a function as bytes
(kata.checking.learner_calls.LearnerFunction.exported); the judge deserializes them into an
`ExportedProgram`, refuses one not exported as it asked, reads its module with MLIR's parser
(kata.checking.program_walk) to count its operations and name its custom calls, follows its
keys' words (kata.checking.key_use), and runs it on its own threads for a bounded CPU time
(`finished`), so that a loop that never ends fails its check instead of the run.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kata.checking.key_use import TOP_LEVEL, Reuse, UnfollowedKeys, reused_keys
from kata.checking.program_walk import ProgramReading, read_program
from kata.handoffs.wire import is_key
from kata.learner_side.learner_process import is_static


def host_callback_message(name: str) -> str:
    return (
        f"{name} calls back into Python on the host (jax.pure_callback, io_callback or "
        "jax.debug.*): that part runs as Python, outside the compiled program, so no "
        "compile count or program size says anything about it. Write it with JAX "
        "operations (jax.lax.fori_loop, scan, while_loop, vmap) instead."
    )


def key_reuse_message(name: str, reuse: Reuse) -> str:
    if reuse.by_hand:
        origin = (
            "its key argument"
            if reuse.first == "its key argument"
            else (f"a key from {_random_name(reuse.first)}")
        )
        where = reuse.second if reuse.second == TOP_LEVEL else f"in {reuse.second}"
        return (
            f"{name} computes with the numbers of {origin} itself ({where}): a key made "
            "from another key's numbers (jax.random.key(...) of its data, arithmetic on "
            "jax.random.key_data) draws what that key draws, a reuse JAX's key-reuse "
            "checker cannot see. Make new keys with jax.random.split (or fold_in), and "
            "draw once from each."
        )
    first, second = _random_name(reuse.first), _random_name(reuse.second)
    return (
        f"{name} draws from one key twice, in {first} and again in {second}: its program, "
        "read by the grader, feeds the same key's numbers to both. A key unwrapped and "
        "wrapped again (jax.random.key_data, wrap_key_data) or used as a legacy uint32 "
        "PRNGKey is still the same key, though JAX's key-reuse checker no longer sees it. "
        "Split the key (jax.random.split) and draw once from each part."
    )


def _random_name(title: str) -> str:
    """`jax.random.normal` for the draw an exported program calls `_normal_real`."""
    if title == TOP_LEVEL:
        return title
    plain = re.sub(r"^threefry_|_real$|_partitionable$|_original$", "", title)
    return f"jax.random.{plain}"


@dataclass(frozen=True)
class ExportedProgram:
    """A learner's function as a program the judge holds: deserialized from StableHLO
    bytes (jax.export), counted, scanned and run here. Its arguments are the leaves of
    the call's arrays and keys, a key as its words; `keys` are the positions of those."""

    program: Any
    text: str
    # Its module as MLIR's parser reads it (kata.checking.program_walk): what is counted
    # and scanned, never the text's patterns.
    reading: ProgramReading
    keys: frozenset[int] = frozenset()
    # How the judge asked a program for several devices to take its arguments
    # ({"axis": mesh axis name, "args": [PartitionSpec entries per argument]},
    # LearnerFunction.exported): the judge lays them out so, whatever the program says.
    layout: Mapping[str, Any] | None = None

    @classmethod
    def from_bytes(
        cls, data: bytes, args: tuple[Any, ...] = (), layout: Mapping[str, Any] | None = None
    ) -> ExportedProgram:
        from jax import export

        program = export.deserialize(bytearray(data))
        text = program.mlir_module()
        _assert_one_plain_program(program, text, args)
        keys = frozenset(i for i, leaf in enumerate(program_leaves(args)) if is_key(leaf))
        return cls(program, text, read_program(text), keys, layout)

    @property
    def operation_count(self) -> int:
        """Operations in the program as one call of its `main` holds them: each function's
        own, and a function it calls counted again at each call. JAX writes a jitted
        helper's body once however often it is called: a Python loop calling a helper that
        slices, computes and writes its step's row held 32 operations at 3 steps and at 30,
        counted as text."""
        return self.reading.operations

    def computed_in(self, element_types: tuple[str, ...]) -> list[tuple[str, str]]:
        """(operation, element type) for each operation (a StableHLO name, e.g.
        `stablehlo.multiply`) whose result has one of `element_types` (`bf16`, `f16`, …):
        what the program computes or rounds in them, whatever a compiler later does with
        it. Moving values (a reshape, a slice, a layout) computes nothing and is left out."""
        return [found for found in self.reading.computed if found[1] in element_types]

    @property
    def custom_calls(self) -> list[str]:
        return list(self.reading.custom_call_targets)

    def assert_no_host_callbacks(self, name: str) -> None:
        if any("callback" in target for target in self.custom_calls):
            raise AssertionError(host_callback_message(name))

    def assert_each_key_used_once(self, name: str) -> None:
        """No key's words are drawn from twice in the program, however the key was wrapped,
        unwrapped or made again on the way (kata.checking.key_use): what JAX's key-reuse
        checker, which runs where the learner's code runs, cannot see."""
        try:
            reuses = reused_keys(self.reading.plainly_named, self.keys)
        except UnfollowedKeys as where:
            raise AssertionError(
                f"the grader cannot follow where {name}'s keys go in its compiled program "
                f"({where}), so it cannot tell that each key is drawn from once. Draw with "
                "jax.random's functions on keys from jax.random.split, outside any loop's "
                "condition, and it can."
            ) from None
        if reuses:
            raise AssertionError(key_reuse_message(name, reuses[0]))

    def run(self, *args: Any) -> Any:
        """The program's results for `args`, as NumPy arrays, compiled and run here for at
        most ENDLESS_CPU_SECONDS of its thread's CPU time (`finished`)."""
        import jax

        if self.program.nr_devices > 1:
            placed = jax.tree.leaves(self.placed(*args))
            compiled = self.compiled(*args)
            outputs = finished(lambda: compiled(*placed))
        else:
            words = program_words(args)
            outputs = finished(lambda: self._call(*words))
        return jax.tree.map(np.asarray, outputs)

    def _call(self, *words: Any) -> Any:
        """The program on its leaves, in order: one exported over the leaves themselves
        (kata.learner_side.learner_process.exported) or over arrays in lists and dicts (a
        check's own export) alike."""
        import jax

        args, kwargs = jax.tree.unflatten(self.program.in_tree, words)
        return self.program.call(*args, **kwargs)

    def placed(self, *args: Any) -> list[Any]:
        """`args` (less the static ones; keys as their words) on the judge's own devices:
        a 1-D mesh of the first `nr_devices` devices of its platform, laid out as the judge
        asked (`layout`). A program that takes them otherwise fails: what it declares is
        the learner's choice, and a program taking every argument whole would show the
        judge results laid out "as it took them" from a step that never split them."""
        import jax
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        platform = self.program.platforms[0]
        devices = jax.devices(platform)
        count = self.program.nr_devices
        if len(devices) < count:
            raise AssertionError(
                f"the grader has {len(devices)} {platform} devices, and this program is for "
                f"{count}: grade it with kata, which gives the judge as many as the course's "
                f"exercises need (or set XLA_FLAGS=--xla_force_host_platform_device_count={count})"
            )
        axis = str(self.layout["axis"]) if self.layout else "devices"
        mesh = Mesh(np.array(devices[:count]), (axis,))
        declared = self.program.in_shardings_jax(mesh)
        words = program_words(args)
        if self.layout is None:  # a check's own export: its layout is the judge's own
            shardings = declared
        else:
            specs = [
                PartitionSpec(*spec)
                for arg, spec in zip(args, self.layout["args"], strict=True)
                if not is_static(arg)
                for _ in jax.tree.leaves(arg)
            ]
            shardings = [NamedSharding(mesh, spec) for spec in specs]
            for word, asked, taken in zip(words, shardings, declared, strict=True):
                shape = np.shape(word)
                if taken is None or asked.devices_indices_map(shape) != taken.devices_indices_map(
                    shape
                ):
                    raise AssertionError(
                        f"the exported program takes an argument of shape {shape} laid out as "
                        f"{taken}, not as the grader gave it ({asked}): it was not exported "
                        "from the function called on the grader's inputs"
                    )
        placed = [jax.device_put(a, s) for a, s in zip(words, shardings, strict=True)]
        return jax.tree.unflatten(jax.tree.structure(_program_arguments(args)), placed)

    def compiled(self, *args: Any) -> Any:
        """The program compiled here for `args` laid out as it takes them (`placed`): its
        HLO text (`.as_text()`) shows the collectives XLA put in, and `.output_shardings`
        where its results lie, by the judge's own compiler."""
        import jax

        return jax.jit(self._call).lower(*jax.tree.leaves(self.placed(*args))).compile()


def _assert_one_plain_program(program: Any, text: str, args: tuple[Any, ...]) -> None:
    """The program is what `LearnerFunction.exported` asks the learner's process for: for
    one platform, its safety checks on, and taking exactly the call's leaves, with their
    shapes. An export for several platforms (or for symbolic shapes) puts arguments of its
    own before them (`jax.global_constant`: the platform's index, a dimension's size),
    so that the judge would follow another argument for a key than the key's words, and
    runs one branch of several; a learner's module can ask for one by wrapping
    `jax.export.export`."""
    leaves = program_words(args)
    shapes = [tuple(aval.shape) for aval in program.in_avals]
    wanted = [tuple(np.shape(leaf)) for leaf in leaves]
    if len(program.platforms) != 1 or "jax.global_constant" in text:
        raise AssertionError(
            f"the exported program is for {', '.join(program.platforms)} and takes arguments "
            "of its own before the call's: it was not exported as the grader asked (for one "
            "platform and the call's shapes); is `jax.export` changed in your module?"
        )
    if getattr(program, "disabled_safety_checks", ()) or (args and shapes != wanted):
        raise AssertionError(
            f"the exported program takes arguments of shapes {shapes}, not the call's "
            f"{wanted}, or has JAX's safety checks off: it was not exported as the grader "
            "asked; is `jax.export` changed in your module?"
        )


class EndlessProgram(AssertionError):
    """A program the judge ran did not finish: its task's other checks are not run
    (kata.judge.pytest_plugin), as after a check that ran out of time."""

    ends_task = True


# A program compiles and runs on a check's inputs in well under a second (measured over the
# solved course, the longest took 0.11 s of its thread's CPU on JAX 0.10.2, 0.15 s on
# 0.5.3); one still running after this much of its thread's CPU time is a loop that never
# ends (a while_loop whose condition stays True). CPU time, not the clock's: a busy
# machine gives it less, never more. Nothing can stop a running program: it spins on, on
# one core, until the run ends, and the check fails now, not when its time (60 s) is up.
ENDLESS_CPU_SECONDS = 3.0


def finished(execute: Callable[[], Any]) -> Any:
    """What `execute()` returns once ready, run on a thread of its own; fails with
    EndlessProgram when that thread has spent ENDLESS_CPU_SECONDS of CPU without finishing
    (where there is no thread's CPU clock, the process's)."""
    import jax

    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["value"] = jax.block_until_ready(execute())
        except BaseException as error:  # noqa: BLE001 — handed to the check below
            done["error"] = error

    thread = threading.Thread(target=run, name="kata-program", daemon=True)
    thread.start()
    cpu_clock = getattr(time, "pthread_getcpuclockid", None)
    with contextlib.suppress(OSError):  # it ended already: its clock went with it
        clock = (
            cpu_clock(thread.ident) if cpu_clock and thread.ident else time.CLOCK_PROCESS_CPUTIME_ID
        )
        start = time.clock_gettime(clock)
        while thread.is_alive():
            thread.join(0.05)
            if thread.is_alive() and time.clock_gettime(clock) - start > ENDLESS_CPU_SECONDS:
                raise EndlessProgram(
                    f"the compiled program was still running after {ENDLESS_CPU_SECONDS:g} s "
                    "of CPU, on inputs it takes milliseconds for: a loop that never ends (a "
                    "`lax.while_loop` whose condition stays True: an inf or a NaN in the "
                    "carry, a tolerance it never meets, a counter it never moves on)"
                )
    thread.join()
    if "error" in done:
        raise done["error"]
    return done["value"]


def program_leaves(args: tuple[Any, ...]) -> list[Any]:
    """The leaves of a call's arguments that its exported program takes, in its order:
    the static ones are closed over (kata.learner_side.learner_process.exported)."""
    import jax

    return jax.tree.leaves(_program_arguments(args))


def _program_arguments(args: tuple[Any, ...]) -> list[Any]:
    """The arguments of a call its exported program takes: not the static ones."""
    return [a for a in args if not is_static(a)]


def program_words(args: tuple[Any, ...]) -> list[Any]:
    """What the exported program is called with: its leaves, each key as its words."""
    import jax

    return [jax.random.key_data(leaf) if is_key(leaf) else leaf for leaf in program_leaves(args)]
