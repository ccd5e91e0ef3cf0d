"""A StableHLO program's text read op by op, and what the ops that move words do with them.

kata.checking.key_use follows a program's keys word by word on this ground: `parse` reads the
module's text into functions, blocks and ops; a `Value` is what the judge knows of one
tensor (each element's atoms, and its integers where it works them out); and the ops that
only move words (`move_words`), choose them at places or by a condition the judge works out
(`selected`, `AT_KNOWN_PLACES`, `alike_choices`) or compute integers it knows (`fold`) give
their results here. Where the judge cannot tell, they give None, and key_use takes the op
for a pick or a computation. What an atom stands for (a key's word, a pick of one) is
key_use's: here atoms are only carried along.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Ops that move words without computing with them: their results keep the atoms.
MOVES = {
    "stablehlo.slice",
    "stablehlo.reshape",
    "stablehlo.broadcast_in_dim",
    "stablehlo.transpose",
    "stablehlo.concatenate",
    "stablehlo.convert",
    "stablehlo.bitcast_convert",
    "stablehlo.copy",
    "stablehlo.optimization_barrier",
    "stablehlo.reverse",
    "stablehlo.pad",
    "sdy.sharding_constraint",
}
# Ops that choose words (by a condition, at traced places) rather than compute with them;
# where the judge works out the condition or the places, they move words (`selected`,
# `AT_KNOWN_PLACES`).
PICKS = {
    "stablehlo.select",
    "stablehlo.gather",
    "stablehlo.dynamic_update_slice",
    "stablehlo.scatter",
}
# Custom calls that only say where data lives.
PLACEMENT_CALLS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")
# A tensor larger than this is tracked as a whole, not word by word.
TRACKED_ELEMENTS = 1 << 16

_LOCATION = re.compile(r"\s+loc\(")
_TENSOR = re.compile(r"tensor<([^<>]*)>")
_RESULTS = re.compile(r"^(%[\w$.-]+(?:\s*,\s*%[\w$.-]+)*)(?::(\d+))?\s*=\s*(.*)$")
_NAME = re.compile(r'^"?([\w.]+)"?')
_OPERAND = re.compile(r"%[\w$.-]+(?:#\d+)?")
_FUNC = re.compile(r"^func\.func\s+(?:public\s+|private\s+)?@([\w$.-]+)\((.*)$")
_ARG = re.compile(r"(%[\w$.-]+):\s*tensor<([^<>]*)>")


def _strip_locations(text: str) -> str:
    """The program's text without `loc(...)` annotations (nested parentheses, strings)."""
    out: list[str] = []
    i = 0
    while True:
        match = _LOCATION.search(text, i)
        if match is None:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : match.start()])
        depth, j, quoted = 1, match.end(), False
        while j < len(text) and depth:
            ch = text[j]
            if quoted:
                if ch == "\\":
                    j += 1
                elif ch == '"':
                    quoted = False
            elif ch == '"':
                quoted = True
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            j += 1
        i = j


def shape_of(spec: str) -> tuple[tuple[int, ...], str] | None:
    """(shape, element type) of `2x3xf32`; None for a dynamic shape."""
    *dims, element = spec.split("x") if spec else [""]
    if any(not d.isdigit() for d in dims):
        return None
    return tuple(int(d) for d in dims), element


@dataclass
class Op:
    results: list[str]
    name: str
    line: str
    regions: list[Block] = field(default_factory=list)


@dataclass
class Block:
    arguments: list[str]
    ops: list[Op]


@dataclass
class Function:
    name: str
    arguments: list[tuple[str, str]]  # (%name, tensor spec)
    body: Block


def parse(text: str) -> dict[str, Function]:
    """The functions of a StableHLO module's text form."""
    lines = [
        line.strip()
        for line in _strip_locations(text).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    functions: dict[str, Function] = {}
    position = 0
    while position < len(lines):
        header = _FUNC.match(lines[position])
        position += 1
        if header is None:
            continue
        arguments = [(name, spec) for name, spec in _ARG.findall(header.group(2).split("->")[0])]
        ops, position = _block(lines, position)
        position += 1  # the function's closing `}`
        functions[header.group(1)] = Function(
            header.group(1), arguments, Block([a for a, _ in arguments], ops)
        )
    return functions


def _block(lines: list[str], position: int) -> tuple[list[Op], int]:
    """The ops from `position` up to the `}` that closes their block, and that closing
    line's position (`}`, `} do {`, `}, {`, `}) : (…) -> …`)."""
    ops: list[Op] = []
    while position < len(lines):
        line = lines[position]
        if line.startswith("}"):
            return ops, position
        position += 1
        match = _RESULTS.match(line)
        results: list[str] = []
        body = line
        if match:
            first, count, body = match.group(1), match.group(2), match.group(3)
            if "," in first:  # `%output_state, %output = stablehlo.rng_bit_generator …`
                results = [name.strip() for name in first.split(",")]
            else:
                results = [f"{first}#{i}" for i in range(int(count))] if count else [first]
        named = _NAME.match(body)
        op = Op(results, named.group(1) if named else body.split()[0], body)
        if op.name == "stablehlo.while" and position < len(lines) and lines[position] == "cond {":
            op.regions, position = _regions(lines, position + 1, op)  # cond { … } do { … }
        elif line.endswith("{"):
            op.regions, position = _regions(lines, position, op)
        ops.append(op)
    return ops, position


def _regions(lines: list[str], position: int, op: Op) -> tuple[list[Block], int]:
    regions: list[Block] = []
    while True:
        arguments: list[str] = []
        if position < len(lines) and lines[position].startswith("^"):  # ^bb0(%a: …, %b: …):
            arguments = [name for name, _ in _ARG.findall(lines[position])]
            position += 1
        ops, position = _block(lines, position)
        regions.append(Block(arguments, ops))
        closing = lines[position] if position < len(lines) else ""
        if closing.startswith("}") and closing.endswith("{"):
            position += 1
            continue
        if closing.startswith("}"):
            op.line += " " + closing  # the generic form's types follow the last region
        return regions, position + (1 if closing.startswith("}") else 0)


class Value:
    """What the judge knows of one tensor: its shape, each element's atoms (a frozenset),
    and, where it is a constant the judge can work out, its values."""

    __slots__ = ("shape", "atoms", "known")

    def __init__(
        self, shape: tuple[int, ...], atoms: np.ndarray | frozenset, known: np.ndarray | None = None
    ) -> None:
        self.shape, self.atoms, self.known = shape, atoms, known

    @property
    def fine(self) -> bool:
        return isinstance(self.atoms, np.ndarray)

    def all_atoms(self) -> frozenset:
        if not self.fine:
            return self.atoms  # type: ignore[return-value]
        return frozenset().union(*self.atoms.ravel()) if self.atoms.size else frozenset()

    def element_atoms(self) -> np.ndarray:
        """Each element's atoms, as an array of the value's shape."""
        if self.fine:
            return self.atoms  # type: ignore[return-value]
        array = np.empty(self.shape, dtype=object)
        array.fill(self.atoms)
        return array


def empty(shape: tuple[int, ...]) -> Value:
    """A value of `shape` that holds no words."""
    return made(shape, lambda index: frozenset())


def made(shape: tuple[int, ...], atoms_of: Any) -> Value:
    """A value of `shape` whose element `i` holds the atoms `atoms_of(i)`; one larger than
    TRACKED_ELEMENTS holds `atoms_of(None)` as a whole."""
    size = int(np.prod(shape, dtype=np.int64))
    if size > TRACKED_ELEMENTS:
        return Value(shape, atoms_of(None))
    array = np.empty(size, dtype=object)
    for i in range(size):
        array[i] = atoms_of(i)
    return Value(shape, array.reshape(shape))


def rearranged(value: Value, shape: tuple[int, ...], move: Any) -> Value:
    """`value` rearranged by `move` (a NumPy function of an array of its shape)."""
    known = move(value.known) if value.known is not None else None
    if not value.fine or int(np.prod(shape, dtype=np.int64)) > TRACKED_ELEMENTS:
        return Value(shape, value.all_atoms(), known)
    return Value(shape, move(value.atoms), known)


def selected(operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    """A select whose condition the judge works out: each element is the one it picks."""
    condition, *sides = operands
    if len(sides) != 2 or int(np.prod(shape, dtype=np.int64)) > TRACKED_ELEMENTS:
        return None
    picks = np.broadcast_to(np.asarray(condition.known) != 0, shape)
    on_true, on_false = (np.broadcast_to(v.element_atoms(), shape) for v in sides)
    known = None
    if all(v.known is not None for v in sides):
        known = np.where(picks, *(np.broadcast_to(v.known, shape) for v in sides))
    return Value(shape, np.where(picks, on_true, on_false), known)


def alike_choices(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    """A pick among choices that hold the same words, place by place, whichever it takes:
    a select of a value and itself, a gather or dynamic slice of rows all alike. It moves
    those words; None for any other pick."""
    if op.name == "stablehlo.select" and len(operands) == 3:
        sides = [v.element_atoms() for v in operands[1:]]
        if all(np.shape(side) == shape for side in sides) and np.array_equal(*sides):
            return Value(shape, sides[0]) if operands[1].fine else Value(shape, operands[1].atoms)
        return None
    # Rows chosen along the first axis only, whole.
    along_rows = op.name == "stablehlo.dynamic_slice" or (
        op.name == "stablehlo.gather" and "start_index_map = [0]" in op.line
    )
    source = operands[0] if operands else None
    if not along_rows or source is None or not source.fine or len(source.shape) < 1:
        return None
    rows = source.atoms.reshape(source.shape[0], -1)
    if not all(np.array_equal(row, rows[0]) for row in rows[1:]):
        return None
    row = rows[0].reshape(source.shape[1:])
    if shape == row.shape or shape[1:] == row.shape:
        return Value(shape, np.broadcast_to(row, shape).copy())
    return None


def loop_names(op: Op) -> list[str]:
    inside = op.line[op.line.find("(") + 1 : op.line.find(")")]
    return [part.split("=")[0].strip() for part in inside.split(",") if "=" in part]


def operand_names(op: Op) -> list[str]:
    head = op.line
    if op.name == "stablehlo.while":  # (%iterArg = %c, …): the values after each `=`
        inside = head[head.find("(") + 1 : head.find(")")]
        return [part.split("=")[1].strip() for part in inside.split(",") if "=" in part]
    head = head.split(" : ")[0] if " : " in head else head
    if op.regions:
        head = head.split("({")[0].split("{")[0]
    head = re.sub(r"\bdense<[^>]*>", "", head)
    return _OPERAND.findall(head)


def result_shapes(op: Op) -> list[tuple[int, ...]]:
    line = op.line
    tail = line.rsplit("->", 1)[1] if "->" in line else line.rsplit(" : ", 1)[-1]
    shapes = []
    for spec in _TENSOR.findall(tail):
        parsed = shape_of(spec)
        shapes.append(parsed[0] if parsed else ())
    if op.name != "stablehlo.while" and "->" not in line and len(op.results) == 1:
        shapes = shapes[-1:]
    return shapes[: max(len(op.results), 1)]


def constant(op: Op, shape: tuple[int, ...]) -> Value:
    """A constant, its integer values known where it is one number or a list of them."""
    value = empty(shape)
    if int(np.prod(shape, dtype=np.int64)) > TRACKED_ELEMENTS:
        return value
    match = re.search(r"dense<(-?\d+|true|false)>", op.line)
    if match:
        text = match.group(1)
        number = {"true": 1, "false": 0}.get(text)
        value.known = np.full(shape, int(text) if number is None else number, dtype=np.int64)
        return value
    listed = re.search(r"dense<(\[[-\d,\s\[\]]*\])>", op.line)
    if listed:
        numbers = np.asarray(json.loads(listed.group(1)), dtype=np.int64)
        if numbers.size == int(np.prod(shape, dtype=np.int64)):
            value.known = numbers.reshape(shape)
    return value


def iota(op: Op, shape: tuple[int, ...]) -> Value:
    """0, 1, 2, … along the op's dimension: known, as a constant is."""
    value = empty(shape)
    dimension = re.search(r"dim\s*=\s*(\d+)", op.line)
    if dimension and shape and int(np.prod(shape, dtype=np.int64)) <= TRACKED_ELEMENTS:
        value.known = np.indices(shape)[int(dimension.group(1))].astype(np.int64)
    return value


def _wrapped(known: np.ndarray, op: Op) -> np.ndarray | None:
    """`known` as the op's result type holds it (an int32 sum wraps past 2**31); None for
    a type the judge does not work out (floats)."""
    specs = _TENSOR.findall(op.line.rsplit("->", 1)[-1])
    parsed = shape_of(specs[-1]) if specs else None
    dtype = _INTEGER_TYPES.get(parsed[1] if parsed else "")
    if dtype is None:
        return None
    return np.asarray(known).astype(dtype).astype(np.int64)


_INTEGER_TYPES = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
}  # fmt: skip


def _brackets(line: str, key: str) -> list[int] | None:
    match = re.search(rf"{key}\s*=\s*\[([^\]]*)\]", line)
    if match is None:
        return None
    return [int(n) for n in match.group(1).replace(" ", "").split(",") if n]


def move_words(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    """The words an op that moves them puts where; None where the judge cannot tell."""
    source = operands[0]
    name = op.name
    if name in ("stablehlo.copy", "sdy.sharding_constraint"):
        return source if source.shape == shape else None
    if name in ("stablehlo.convert", "stablehlo.bitcast_convert"):
        if source.shape != shape:
            return None
        # A known number as the new type holds it: int32 -1 is uint32 4294967295.
        known = None if source.known is None else _wrapped(source.known, op)
        return Value(shape, source.atoms, known)
    if name == "stablehlo.optimization_barrier":
        return source
    if name == "stablehlo.reverse":
        dims = _brackets(op.line, "dims")
        return (
            None if dims is None else rearranged(source, shape, lambda a: np.flip(a, tuple(dims)))
        )
    if name == "stablehlo.pad":
        return _padded(op, operands, shape)
    if name == "stablehlo.reshape":
        return rearranged(source, shape, lambda a: np.reshape(a, shape))
    if name == "stablehlo.slice":
        match = re.search(r"\[([\d:, ]*)\]", op.line)
        if match is None:
            return None
        index = []
        for part in match.group(1).split(","):
            numbers = [int(n) for n in part.strip().split(":")]
            index.append(slice(numbers[0], numbers[1], numbers[2] if len(numbers) > 2 else 1))
        return rearranged(source, shape, lambda a: a[tuple(index)])
    if name == "stablehlo.transpose":
        order = _brackets(op.line, "dims")
        return (
            None if order is None else rearranged(source, shape, lambda a: np.transpose(a, order))
        )
    if name == "stablehlo.broadcast_in_dim":
        dims = _brackets(op.line, "dims")
        if dims is None:
            return None

        def broadcast(a: np.ndarray) -> np.ndarray:
            expanded = [1] * len(shape)
            for axis, size in zip(dims, np.shape(a), strict=True):
                expanded[axis] = size
            return np.broadcast_to(np.reshape(a, expanded), shape)

        return rearranged(source, shape, broadcast)
    if name == "stablehlo.concatenate":
        match = re.search(r"dim\s*=\s*(\d+)", op.line)
        if match is None:
            return None
        axis = int(match.group(1))
        atoms = [v.element_atoms() for v in operands]
        known = (
            np.concatenate([v.known for v in operands], axis=axis)
            if all(v.known is not None for v in operands)
            else None
        )
        if int(np.prod(shape, dtype=np.int64)) > TRACKED_ELEMENTS:
            return Value(shape, frozenset().union(*(v.all_atoms() for v in operands)), known)
        return Value(shape, np.concatenate(atoms, axis=axis), known)
    return None


def _gathered(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    """A gather of whole rows at indices the judge works out (`x[jnp.array([1, 0])]`):
    each result row is the operand's row at its index (clamped, as gather clamps)."""
    source, indices = operands[0], operands[1]
    sizes = re.search(r"slice_sizes = array<i64:\s*([\d, ]+)>", op.line)
    rows_only = "collapsed_slice_dims = [0]" in op.line and "start_index_map = [0]" in op.line
    if indices.known is None or sizes is None or not rows_only or not source.fine:
        return None
    if [int(n) for n in sizes.group(1).split(",")] != [1, *source.shape[1:]]:
        return None
    rows = np.clip(np.asarray(indices.known).reshape(-1), 0, source.shape[0] - 1)
    picked = source.atoms[rows]
    if picked.size != int(np.prod(shape, dtype=np.int64)):
        return None
    known = None if source.known is None else np.asarray(source.known)[rows].reshape(shape)
    return Value(shape, picked.reshape(shape), known)


def _updated(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    """A dynamic update slice at a place the judge works out: the update's words there,
    the operand's elsewhere."""
    source, update, *starts = operands
    if not source.fine or not update.fine or any(s.known is None for s in starts):
        return None
    if len(starts) != len(source.shape) or source.shape != shape:
        return None
    begin = [
        int(np.clip(int(np.asarray(s.known).reshape(-1)[0]), 0, dim - size))
        for s, dim, size in zip(starts, shape, update.shape, strict=True)
    ]
    places = tuple(slice(b, b + size) for b, size in zip(begin, update.shape, strict=True))
    atoms = source.atoms.copy()
    atoms[places] = update.atoms
    return Value(shape, atoms, None)


def _scattered(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    """A scatter that sets whole rows at indices the judge works out (`x.at[0].set(row)`,
    `x.at[jnp.arange(2)].set(rows)`): each update's words there, the operand's elsewhere."""
    if len(operands) != 3 or len(op.regions) != 1:
        return None
    source, indices, updates = operands
    region = op.regions[0]
    sets = (
        len(region.ops) == 1
        and len(region.arguments) == 2
        and operand_names(region.ops[0]) == [region.arguments[1]]
    )
    rows_only = "inserted_window_dims = [0]" in op.line and (
        "scatter_dims_to_operand_dims = [0]" in op.line
    )
    if not (sets and rows_only) or indices.known is None or not source.fine or not updates.fine:
        return None
    if source.shape != shape or not shape:
        return None
    rows = np.asarray(indices.known).reshape(-1)
    if rows.min(initial=0) < 0 or rows.max(initial=0) >= shape[0]:
        return None  # out of bounds: a scatter drops it
    row_size = int(np.prod(shape[1:], dtype=np.int64))
    if updates.atoms.size != rows.size * row_size:
        return None
    atoms = source.atoms.copy()
    for row, update in zip(rows, updates.atoms.reshape(rows.size, -1), strict=True):
        atoms[int(row), ...] = update.reshape(shape[1:])
    return Value(shape, atoms, None)


# Ops that choose words at places the judge may work out: there, they move them.
AT_KNOWN_PLACES = {
    "stablehlo.gather": _gathered,
    "stablehlo.dynamic_update_slice": _updated,
    "stablehlo.scatter": _scattered,
}


def _padded(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    """A pad: the source's words spread out, the padding value's everywhere else."""
    source, padding = operands[0], operands[1]
    low, interior = _brackets(op.line, "low"), _brackets(op.line, "interior")
    if low is None or interior is None or min(low) < 0 or not source.fine or not padding.fine:
        return None
    if int(np.prod(shape, dtype=np.int64)) > TRACKED_ELEMENTS:
        return None
    places = tuple(
        slice(start, start + (size - 1) * (gap + 1) + 1, gap + 1)
        for start, size, gap in zip(low, source.shape, interior, strict=True)
    )
    atoms = np.empty(shape, dtype=object)
    atoms.fill(padding.element_atoms().reshape(-1)[0])
    atoms[places] = source.atoms
    known = None
    if source.known is not None and padding.known is not None:
        known = np.full(shape, np.asarray(padding.known).reshape(-1)[0])
        known[places] = source.known
    return Value(shape, atoms, known)


# Integer ops the judge works out on constants (a loop's counter, an index, a fold_in's data).
FOLDED = {
    "stablehlo.add": np.add,
    "stablehlo.subtract": np.subtract,
    "stablehlo.multiply": np.multiply,
    "stablehlo.and": np.bitwise_and,
    "stablehlo.or": np.bitwise_or,
    "stablehlo.xor": np.bitwise_xor,
    "stablehlo.negate": np.negative,
    "stablehlo.maximum": np.maximum,
    "stablehlo.minimum": np.minimum,
    "stablehlo.select": lambda p, a, b: np.where(p != 0, a, b),
    "stablehlo.compare": None,
}
_COMPARE = {"LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
            "EQ": np.equal, "NE": np.not_equal}  # fmt: skip


def fold(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    known = [np.broadcast_to(v.known, shape) for v in operands]  # type: ignore[arg-type]
    try:
        if op.name == "stablehlo.compare":
            direction = re.search(r"compare\s+(\w+)", op.line)
            if direction is None or direction.group(1) not in _COMPARE:
                return None
            result = _COMPARE[direction.group(1)](*known).astype(np.int64)
        else:
            result = np.asarray(FOLDED[op.name](*known), dtype=np.int64)
    except (ValueError, TypeError):
        return None
    atoms = frozenset().union(*(v.all_atoms() for v in operands))
    if atoms:
        return None  # computed from a key's words: not a constant
    wrapped = _wrapped(result, op)
    if wrapped is None:
        return None
    return Value(shape, empty(shape).atoms, wrapped)
