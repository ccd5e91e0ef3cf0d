"""A program's StableHLO module read by MLIR's own parser: what the judge counts and scans
in an exported program (kata.checking.exported_program.ExportedProgram).

Its text is not read with patterns: MLIR prints a name that is no plain identifier quoted
(a jitted helper named `row step` is `@"row step"`), an op in generic form as
`"stablehlo.add"(…)`, and a pattern that misses either counts that part as nothing (a
Python loop over a helper named with a space kept 04's and 09's programs "small"). The
parser reads every spelling alike; what the walk cannot follow (a call to a symbol the
module does not define, a function that calls itself, a top-level op holding code) refuses
the program as unreadable, never counts it as nothing.

Code runs where `main` is, in regions of its ops, and in any function an op names: a
`func.call`'s callee, and as surely a `stablehlo.composite`'s decomposition or a custom
call's `called_computations`, so every function an op refers to counts as run there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Ops that only move, lay out or choose values, or make constants: they compute nothing
# (`ProgramReading.computed`).
MOVES_VALUES = frozenset(
    f"stablehlo.{name}"
    for name in (
        *("reshape", "transpose", "broadcast_in_dim", "slice", "dynamic_slice", "concatenate"),
        *("copy", "optimization_barrier", "reverse", "pad", "gather", "select", "constant"),
        *("iota", "custom_call"),
    )
)
# The ends and calls of functions: a call's operations are its callee's.
FUNCTION_PLUMBING = frozenset({"func.call", "func.return"})
# Dialects that only say where values lie (Shardy's sharding constraints, meshes).
LAYOUT_DIALECTS = ("sdy.",)
# A symbol named in an attribute MLIR's Python bindings do not take apart (a dialect's own,
# such as `#sdy.sharding<@mesh, …>`): `@name` or `@"quoted name"` in its printed form.
_SYMBOL_IN_TEXT = re.compile(r'@(?:"((?:[^"\\]|\\.)*)"|([\w$.-]+))')
_ESCAPE = re.compile(rb"\\([0-9A-Fa-f]{2})")
# A name MLIR prints bare (`@main`, `@_normal`); any other it prints quoted.
PLAIN_NAME = re.compile(r"[A-Za-z_][\w$.]*", re.ASCII)
# Ops that multiply and sum along an axis, on a matrix unit where the chip has one.
CONTRACTIONS = frozenset(f"stablehlo.{name}" for name in ("dot_general", "dot", "convolution"))
# One operand's precision in a contraction's `precision_config` (`#stablehlo<precision
# HIGHEST>`), and an operand's type in its `algorithm` (`#stablehlo.dot_algorithm<
# lhs_precision_type = f32, …>`): a dialect's own attributes, read in their printed form
# (the attribute's, never the module's text), as `_symbols_in` reads a symbol in one.
_PRECISION = re.compile(r"precision\s+(\w+)")
_ALGORITHM_TYPE = re.compile(r"(lhs|rhs)_precision_type\s*=\s*(\w+)")


class UnreadableProgram(AssertionError):
    """The judge cannot follow all of a program: it refuses it rather than count or scan
    part of it."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"the exported program cannot be read by the grader ({why}): it was not written "
            "by jax.jit from JAX operations alone; is `jax.export` or the program changed?"
        )


@dataclass(frozen=True)
class Contraction:
    """One multiply-and-sum a program asks for (a `stablehlo.dot_general`, `dot` or
    `convolution`), as its operation says, whatever a compiler later does with it: its
    operands' element types and its result's (`bf16`, `f32`), the precision it asks of each
    operand (`DEFAULT` where it names none; on a TPU that multiplies float32 in one
    bfloat16 pass, on a GPU in TF32), and the element types its `algorithm` multiplies
    each operand in, where it names one."""

    op: str
    operands: tuple[str, ...]
    result: str
    precision: tuple[str, ...]
    algorithm: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProgramReading:
    """What the judge reads of one program, every function's ops counted alike.

    `operations`: operations as one call of `main` runs them, a function's counted again
    at each call (JAX writes a jitted helper's body once however often it is called).
    `custom_call_targets`: the target of each custom call anywhere in the module.
    `computed`: (operation, element type of its first result) for each operation that
    computes a value, anywhere in the module.
    `plainly_named`: the module's text with each function MLIR prints quoted renamed
    plainly (`@kata_helper_0` for `@"row step"`), for kata.checking.key_use, which reads
    text: it took a call it could not name for the learner's own arithmetic on the key
    (a right `jax.jit(lambda k: …)` that splits its key read as a reuse by hand).
    `contractions`: each matrix product or convolution anywhere in the module, as asked
    for (`Contraction`)."""

    operations: int
    custom_call_targets: tuple[str, ...]
    computed: tuple[tuple[str, str], ...]
    plainly_named: str
    contractions: tuple[Contraction, ...] = ()


def read_program(text: str) -> ProgramReading:
    """The reading of a StableHLO module's text (jax.export's `mlir_module()`); raises
    UnreadableProgram for one it cannot parse or follow."""
    from jax._src.lib.mlir import ir

    try:
        module = ir.Module.parse(text, context=_context())
    except Exception as error:  # noqa: BLE001 — MLIRError and its kin, all one to the judge
        raise UnreadableProgram(f"MLIR does not parse it: {str(error).splitlines()[0]}") from None
    return _Walk(module, ir).reading(module, text)


@functools.cache
def _context() -> Any:
    """The judge's MLIR context, JAX's own kind, made once: one costs 13 ms (min of 40),
    against 1.2 ms to parse and walk 09's program in it. It keeps the constants of every
    program it parsed, as the judge keeps those programs (`LearnerProcess.programs`), for
    the run alone: each run's judge is a process of its own."""
    from jax._src.interpreters import mlir

    return mlir.make_ir_context()


class _Walk:
    def __init__(self, module: Any, ir: Any) -> None:
        self.ir = ir
        self.functions: dict[str, Any] = {}
        self.other_symbols: set[str] = set()
        for op in _operations_of(module.operation):
            name = self._symbol_name(op)
            if op.name == "func.func" and name is not None:
                self.functions[name] = op
            elif any(True for _ in _nested(op)):
                raise UnreadableProgram(f"a top-level {op.name} holds operations")
            elif name is not None:
                self.other_symbols.add(name)  # data it names (a device mesh), not code
        self.counted: dict[str, int] = {}
        self.counting: set[str] = set()

    def reading(self, module: Any, text: str) -> ProgramReading:
        if "main" not in self.functions:
            raise UnreadableProgram("it has no function `main`")
        targets, computed, contractions = [], [], []
        for function in self.functions.values():
            for op in _nested(function):
                if op.name == "stablehlo.custom_call":
                    targets.append(self._string(op.attributes["call_target_name"]))
                kind = self._result_element_type(op)
                if kind and not _moves_values(op.name):
                    computed.append((op.name, kind))
                if op.name in CONTRACTIONS:
                    contractions.append(self._contraction(op))
        operations = self._count("main")
        plainly_named = self._renamed_plainly(module, text)
        return ProgramReading(
            operations, tuple(targets), tuple(computed), plainly_named, tuple(contractions)
        )

    def _contraction(self, op: Any) -> Contraction:
        operands = tuple(self._element_type(value.type) for value in op.operands)
        attributes = op.attributes
        precision: tuple[str, ...] = ("DEFAULT",) * len(operands)
        if "precision_config" in attributes:
            named = _PRECISION.findall(str(attributes["precision_config"]))
            precision = tuple(named) or precision
        algorithm: tuple[str, ...] = ()
        if "algorithm" in attributes:
            types = dict(_ALGORITHM_TYPE.findall(str(attributes["algorithm"])))
            algorithm = (types.get("lhs", "?"), types.get("rhs", "?"))
        result = self._result_element_type(op) or "?"
        return Contraction(op.name, operands, result, precision, algorithm)

    def _element_type(self, kind: Any) -> str:
        tensor = _cast(self.ir.RankedTensorType, kind)
        return str(tensor.element_type) if tensor is not None else "?"

    def _renamed_plainly(self, module: Any, text: str) -> str:
        """`text`, or where a function's name is no plain identifier, the module printed
        with every such function renamed to one (no name JAX gives its own functions)."""
        quoted = [name for name in self.functions if not PLAIN_NAME.fullmatch(name)]
        if not quoted:
            return text
        taken = set(self.functions) | self.other_symbols
        for number, name in enumerate(quoted):
            plain = f"kata_helper_{number}"
            while plain in taken:
                plain += "_"
            taken.add(plain)
            self.ir.SymbolTable.replace_all_symbol_uses(name, plain, module.operation)
            self.ir.SymbolTable.set_symbol_name(self.functions[name], plain)
        return str(module)

    def _count(self, name: str) -> int:
        """Operations in one call of function `name`, those of the functions it calls
        counted at each call (once each read: a chain of helpers calling the next twice
        costs a sum, not 2ⁿ walks)."""
        if name in self.counted:
            return self.counted[name]
        if name not in self.functions:
            raise UnreadableProgram(f"it calls @{name}, which it does not define")
        if name in self.counting:
            raise UnreadableProgram(f"@{name} calls itself")
        if not any(len(region.blocks) for region in self.functions[name].regions):
            # Its code lies outside the program (the compiler would have to supply it).
            raise UnreadableProgram(f"@{name} is declared without a body")
        self.counting.add(name)
        total = 0
        for op in _nested(self.functions[name]):
            called = [callee for callee in self._symbols_named_by(op) if callee in self.functions]
            total += sum(self._count(callee) for callee in called)
            total += int(op.name not in FUNCTION_PLUMBING)
        self.counting.discard(name)
        self.counted[name] = total
        return total

    def _symbols_named_by(self, op: Any) -> Iterator[str]:
        """Each symbol an op's attributes name; one the module does not define refuses it."""
        attributes = op.attributes
        for index in range(len(attributes)):
            for name in self._symbols_in(attributes[index].attr):
                if name not in self.functions and name not in self.other_symbols:
                    raise UnreadableProgram(f"{op.name} names @{name}, which it does not define")
                yield name

    def _symbols_in(self, attribute: Any) -> Iterator[str]:
        ir = self.ir
        if (flat := _cast(ir.FlatSymbolRefAttr, attribute)) is not None:
            yield flat.value
        elif (array := _cast(ir.ArrayAttr, attribute)) is not None:
            for element in array:
                yield from self._symbols_in(element)
        elif (dictionary := _cast(ir.DictAttr, attribute)) is not None:
            for index in range(len(dictionary)):
                yield from self._symbols_in(dictionary[index].attr)
        elif all(_cast(data, attribute) is None for data in (ir.StringAttr, ir.DenseElementsAttr)):
            # Strings and constants are data; any other attribute is read in its printed
            # form, so that a symbol in a form the bindings do not take apart still counts.
            for quoted, plain in _SYMBOL_IN_TEXT.findall(str(attribute)):
                yield plain or _unescaped(quoted)

    def _symbol_name(self, op: Any) -> str | None:
        return self._string(op.attributes["sym_name"]) if "sym_name" in op.attributes else None

    def _string(self, attribute: Any) -> str:
        string = _cast(self.ir.StringAttr, attribute)
        if string is None:
            raise UnreadableProgram(f"a name is {attribute}, not a string")
        return string.value

    def _result_element_type(self, op: Any) -> str | None:
        if len(op.results) == 0:
            return None
        tensor = _cast(self.ir.RankedTensorType, op.results[0].type)
        return str(tensor.element_type) if tensor is not None else None


def _moves_values(name: str) -> bool:
    return name in MOVES_VALUES or name in FUNCTION_PLUMBING or name.startswith(LAYOUT_DIALECTS)


def _cast(kind: Any, value: Any) -> Any:
    """`value` as MLIR's `kind` (`ir.StringAttr`, …), or None: the bindings' cast, the same
    on JAX 0.5.3 and 0.10.2 (the `isinstance` static methods are gone from the newer)."""
    try:
        return kind(value)
    except ValueError:
        return None


def _operations_of(op: Any) -> Iterator[Any]:
    """The operations directly inside `op`'s regions."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner.operation


def _nested(op: Any) -> Iterator[Any]:
    """Every operation inside `op`, at any depth."""
    for inner in _operations_of(op):
        yield inner
        yield from _nested(inner)


def _unescaped(quoted: str) -> str:
    """A quoted symbol's name as MLIR prints it (`row\\22s\\22` for `row"s"`) made whole."""
    whole = _ESCAPE.sub(lambda found: bytes.fromhex(found[1].decode()), quoted.encode())
    return whole.decode("utf-8", errors="replace")
