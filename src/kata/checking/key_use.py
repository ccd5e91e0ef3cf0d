"""Which keys a program draws from, read by the judge from the program itself.

JAX's key-reuse checker runs where the learner's code runs, and only sees typed keys: a key
unwrapped and wrapped again (`jax.random.wrap_key_data(jax.random.key_data(k))`), rebuilt
from its bits (`jax.random.key(...)`) or used as a legacy uint32 `PRNGKey` is new to it. In
the exported program (StableHLO, kata.checking.learner_calls.ExportedProgram) every one of
those is the same 32-bit words, and wrapping is gone: what is left is where the words go.

So the judge follows them. Each word of a key argument is an atom; ops that only move words
(slice, reshape, broadcast, concatenate, convert, reverse, pad, a dynamic slice at an index
the judge works out, a select on a condition it works out) keep the atoms; an op that
computes with them *consumes* the atoms it reads, and its results get atoms of their own (a
key's, where JAX's split or fold_in made them). A draw is one call of JAX's own random
functions (`@_normal`, `@_threefry_split`, `@threefry2x32`, …: the private names of its
random modules), however it is written inside: the atoms it consumes belong to it. A key is
used twice when two draws, neither inside the other, consume one atom; the learner's code
computing with a key's words outside JAX's random functions (`jax.random.key(...)` of a
key's data, arithmetic on `key_data`) is called out as such. `fold_in` reads a key without
using it up, as JAX's checker has it, but a key used up before is still reused there.

Loops are followed turn by turn: to their end where the judge works it out (up to 64
turns); otherwise at least two (a key that a loop's body draws from but does not carry
forward new is used twice by then), and on until the words of the keys it was given reach
no place they had not reached. A loop cut short keeps, in each element of its carry, the
words of keys it did not use up that any turn put there: words moved along a buffer reach
wherever they could. Ops that choose words at places the judge does not work out (a
select, a gather, a dynamic slice or update at a traced index, a cond's results) give
picks of their own; at places it works out (constants, iotas, integer arithmetic wrapped
to its type as the program's), they move words, and so do choices among words alike. A
draw from a pick that may be words another draw surely drew from is a reuse, whatever
the data picks (`jnp.where(c, key_words, other)`); two picks alone prove nothing (a loop
whose counter the judge cannot follow picks anew each turn). fold_in of the same words
with the same data makes the same key again; one draw over a batch of keys in which one
key stands twice draws it twice. A program whose text the judge cannot follow shows no
reuse: JAX's own checker, in the learner's process, still runs.

Not followed (a learner's code can hide a reuse there, on purpose): a helper named like
one of JAX's own random functions (`_normal`, `_t`) is taken for one draw; draws in a
while loop's condition; turns past those followed; two picks at places from the same
words. Read as a reuse though right: `jax.random.binomial` (JAX's own code splits its key
twice), and a draw from `keys[0]` beside one from `keys[i]` at an index the judge cannot
work out (`i` may be 0, for all it can tell).
"""

from __future__ import annotations

import functools
import itertools
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
# where the judge works out the condition or the places, they move words (`_chosen`,
# `_AT_KNOWN_PLACES`).
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
# Loop turns followed where the judge cannot work out the end: at least two (the second
# shows what the first left for it), then on while the keys' words reach new places; at
# most MAX_TURNS, where it works out the end too.
TURNS = 2
MAX_TURNS = 64
FOLD_IN = re.compile(r"fold_in")

_LOCATION = re.compile(r"\s+loc\(")
_TENSOR = re.compile(r"tensor<([^<>]*)>")
_RESULTS = re.compile(r"^(%[\w$.-]+(?:\s*,\s*%[\w$.-]+)*)(?::(\d+))?\s*=\s*(.*)$")
_NAME = re.compile(r'^"?([\w.]+)"?')
_OPERAND = re.compile(r"%[\w$.-]+(?:#\d+)?")
_FUNC = re.compile(r"^func\.func\s+(?:public\s+|private\s+)?@([\w$.-]+)\((.*)$")
_ARG = re.compile(r"(%[\w$.-]+):\s*tensor<([^<>]*)>")
_CALLEE = re.compile(r"call\s+@([\w$.-]+)\(")
_CUSTOM = re.compile(r"custom_call\s+@([\w.$-]+)")


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


def _shape(spec: str) -> tuple[tuple[int, ...], str] | None:
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


def _empty(shape: tuple[int, ...]) -> Value:
    return _made(shape, lambda index: frozenset())


def _made(shape: tuple[int, ...], atoms_of: Any) -> Value:
    size = int(np.prod(shape, dtype=np.int64))
    if size > TRACKED_ELEMENTS:
        return Value(shape, atoms_of(None))
    array = np.empty(size, dtype=object)
    for i in range(size):
        array[i] = atoms_of(i)
    return Value(shape, array.reshape(shape))


def _moved(value: Value, shape: tuple[int, ...], move: Any) -> Value:
    """`value` rearranged by `move` (a NumPy function of an array of its shape)."""
    known = move(value.known) if value.known is not None else None
    if not value.fine or int(np.prod(shape, dtype=np.int64)) > TRACKED_ELEMENTS:
        return Value(shape, value.all_atoms(), known)
    return Value(shape, move(value.atoms), known)


@dataclass
class Frame:
    """One call being followed: a draw, or a function holding draws."""

    name: str
    parent: Frame | None
    number: int
    exempt: bool  # inside fold_in: draws from a key without using it up

    def within(self, other: Frame) -> bool:
        return any(frame is other for frame in self.chain())

    def chain(self) -> list[Frame]:
        """This frame and those it is in, innermost first."""
        frames, frame = [], self
        while frame is not None:
            frames.append(frame)
            frame = frame.parent
        return frames

    @property
    def in_jax_random(self) -> bool:
        """Whether this frame is one of JAX's random functions, or inside one."""
        return any(frame.is_jax_random for frame in self.chain())

    def draw(self) -> Frame:
        """The draw this frame is part of: the outermost of JAX's own random functions it
        is in (a hash's rounds are one draw, however many turns its loop takes; so are a
        distribution's, whose rejection loop hashes its key again), or itself."""
        for frame in reversed(self.chain()):
            if frame.is_jax_random:
                return frame
        return self

    @property
    def is_a_hash(self) -> bool:
        return _base_name(self.name) in HASHES

    @property
    def title(self) -> str:
        """The outermost of JAX's random functions this frame is in, as JAX's random module
        calls it (`_normal_3` → normal)."""
        named = [f for f in self.chain() if f.parent is not None and f.is_jax_random]
        frame = named[-1] if named else self
        if frame.parent is None:
            return TOP_LEVEL
        return _base_name(frame.name).strip("_") or frame.name

    @property
    def is_jax_random(self) -> bool:
        return self.is_a_hash or _base_name(self.name) in jax_random_functions()


def _base_name(name: str) -> str:
    """A function's name without the number the exporter adds (`_normal_3` → `_normal`)."""
    return re.sub(r"(_\d+)+$", "", name)


@functools.cache
def jax_random_functions() -> frozenset[str]:
    """The names JAX's own random functions have in an exported program (`_normal`,
    `_threefry_split`, `threefry2x32`, …): the private functions of its random modules."""
    import sys

    import jax.random  # noqa: F401  (its modules, for their names)

    # jax._src.random and jax._src.prng up to 0.9; a package of modules (…random.core,
    # …random.threefry2x32, …) from 0.10 on.
    modules = [
        module
        for name, module in list(sys.modules.items())
        if module is not None and name.startswith(("jax._src.random", "jax._src.prng"))
    ]
    return frozenset(
        {
            name
            for module in modules
            for name, value in vars(module).items()
            if name.startswith("_") and callable(value) and not isinstance(value, type)
        }
        | {"threefry2x32"}
    )


@dataclass(frozen=True)
class Reuse:
    """A key's words drawn from by two calls (their names, as JAX's functions are called),
    or, `by_hand`, computed with outside JAX's random functions (`first` made the key,
    `second` is where the learner's code computed with it)."""

    first: str
    second: str
    by_hand: bool = False


# Where the learner's function computes outside any call.
TOP_LEVEL = "its top level"
# Atoms are tuples whose first item says what they are: a key argument's word, a word of a
# key JAX made (split, fold_in), a pick of one at an index not known, or anything else.
KEY, MADE_KEY, PICKED, COMPUTED = "key", "made key", "picked", "computed"
# JAX's random functions whose results are keys.
KEY_MAKERS = re.compile(r"split|fold_in")
# The functions that hash a key's words into bits: threefry's rounds, and the op an rbg
# key's words go to (`stablehlo.rng_bit_generator`, followed as a frame of that name).
HASHES = frozenset({"threefry2x32", "rng_bit_generator"})


def _is_key(atom: tuple) -> bool:
    return atom[0] in (KEY, MADE_KEY) or (atom[0] == PICKED and _is_key(atom[2]))


def _folding_in(frame: Frame) -> bool:
    """Whether the nearest of JAX's random functions around `frame` is a fold_in (which
    reads a key without using it up), not a draw inside a function named like one."""
    for outer in frame.chain():
        if outer.is_jax_random and not outer.is_a_hash:
            return bool(FOLD_IN.search(outer.name))
    return False


def _atoms_key(value: Value) -> tuple:
    """A value's atoms, place by place, as a dict key."""
    if not value.fine:
        return (value.shape, value.atoms)
    return (value.shape, tuple(value.atoms.ravel()))


def _picked_word(atom: tuple) -> tuple:
    """The word a pick (of a pick…) may be; `atom` itself where it is no pick."""
    while atom[0] == PICKED:
        atom = atom[2]
    return atom


def _same_draw(earlier: Frame, frame: Frame) -> bool:
    """Whether `frame` is the draw `earlier`, or further in it."""
    return earlier is frame or (earlier.parent is not None and frame.within(earlier))


class KeyFlow:
    """Follows a program's key arguments through it (see the module's docstring)."""

    def __init__(self, functions: dict[str, Function], keys: frozenset[int]) -> None:
        self.functions = functions
        self.keys = keys
        self.consumed: dict[Any, Frame] = {}
        self.maybe_consumed: dict[Any, Frame] = {}  # words that a draw's picks may have been
        self.folded: dict[tuple, list[Value]] = {}  # fold_in's results, by key and data
        self.reuses: list[Reuse] = []
        self.made_by: dict[tuple, str] = {}  # a made key's first two items: what made it
        self.numbers = itertools.count()
        self.depth = 0

    def run(self, entry: str = "main") -> list[Reuse]:
        function = self.functions[entry]
        root = Frame(entry, None, next(self.numbers), False)
        arguments = []
        for position, (_, spec) in enumerate(function.arguments):
            parsed = _shape(spec)
            shape = parsed[0] if parsed else ()
            arguments.append(
                _made(shape, lambda i, p=position: frozenset({(KEY, p, i)}))
                if position in self.keys
                else _empty(shape)
            )
        self._call(function, arguments, root)
        return self.reuses

    # -- consumption ---------------------------------------------------------------------

    def _consume(self, atoms: frozenset, frame: Frame) -> None:
        """`frame` computes with `atoms`. Inside fold_in it only reads them: a key used up
        before is still reused there, and is not used up by it."""
        reading = frame.exempt and _folding_in(frame)
        frame = frame.draw()
        if not frame.is_jax_random:
            made = [atom for atom in atoms if _is_key(atom)]
            if made:
                self._found(Reuse(self._origin(made[0]), frame.title, by_hand=True))
            return
        for atom in atoms:
            # A pick that may be words another draw surely drew from is a reuse, whatever
            # the choice: the data (a condition, a place) decides it, the learner's code
            # chose what it picks among (`jnp.where(c, words, other)`). Picks by two draws
            # alone prove nothing (a loop's counter picks anew each turn).
            word = _picked_word(atom)
            if word is not atom:
                surely = self.consumed.get(word)
                if surely is not None and not _same_draw(surely, frame):
                    self._found(Reuse(surely.title, frame.title))
                if not reading:
                    self.maybe_consumed.setdefault(word, frame)
            else:
                maybe = self.maybe_consumed.get(atom)
                if maybe is not None and not _same_draw(maybe, frame):
                    self._found(Reuse(maybe.title, frame.title))
            earlier = self.consumed.get(atom)
            if earlier is None:
                if not reading:
                    self.consumed[atom] = frame
            elif _same_draw(earlier, frame):
                continue  # the same draw, further in (a hash's rounds, turn after turn)
            else:
                self._found(Reuse(earlier.title, frame.title))

    def _batch_of_one_key(self, operands: list[Value], title: str) -> None:
        """A draw begun on a batch of keys (`jax.vmap` of a random function) in which one
        key's words stand twice (`jnp.stack([key, key])`, `jnp.broadcast_to(key, …)`):
        one draw, the same numbers in both places."""
        if not operands or not operands[0].fine or len(operands[0].shape) < 2:
            return
        seen: set[Any] = set()
        for atoms in operands[0].atoms.ravel():
            for atom in atoms:
                if _is_key(atom) and atom in seen:
                    self._found(Reuse(title, title))
                    return
                seen.add(atom)

    def _origin(self, atom: tuple) -> str:
        """What made the key an atom is a word of."""
        if atom[0] == PICKED:
            return self._origin(atom[2])
        return self.made_by.get(atom[:2], "its key argument")

    def _found(self, reuse: Reuse) -> None:
        if reuse not in self.reuses:
            self.reuses.append(reuse)

    def _computed(self, shape: tuple[int, ...], operands: list[Value], frame: Frame) -> Value:
        """The result of an op that computes with its operands: they are consumed, and
        the result's elements are atoms of their own (a key's, where JAX's split or
        fold_in made them)."""
        atoms = frozenset().union(*(v.all_atoms() for v in operands)) if operands else frozenset()
        self._consume(atoms, frame)
        if not atoms:
            return _empty(shape)
        maker = next(
            (f for f in frame.chain() if f.is_jax_random and KEY_MAKERS.search(f.name)), None
        )
        kind = MADE_KEY if maker is not None else COMPUTED
        number = next(self.numbers)
        if maker is not None:
            self.made_by[(kind, number)] = maker.title
        return _made(shape, lambda i: frozenset({(kind, number, i)}))

    # -- calls and blocks ----------------------------------------------------------------

    def _call(self, function: Function, arguments: list[Value], frame: Frame) -> list[Value]:
        self.depth += 1
        if self.depth > 200:
            raise RecursionError("a program that calls itself")
        try:
            return self._block(function.body, arguments, frame)
        finally:
            self.depth -= 1

    def _block(
        self, block: Block, arguments: list[Value], frame: Frame, outer: dict | None = None
    ) -> list[Value]:
        """`block` run on `arguments`; a region also sees the values around it (`outer`)."""
        scope: dict[str, Value] = {**(outer or {})}
        scope.update(zip(block.arguments, arguments, strict=False))
        return self._ops(block.ops, scope, frame)

    def _ops(self, ops: list[Op], scope: dict[str, Value], frame: Frame) -> list[Value]:
        for op in ops:
            if op.name in ("return", "func.return", "stablehlo.return"):
                return [self._get(scope, name) for name in _operands(op)]
            results = self._op(op, scope, frame)
            for name, value in zip(op.results, results, strict=False):
                scope[name] = value
                if name.endswith("#0"):
                    scope[name[:-2]] = value
        return []

    @staticmethod
    def _get(scope: dict[str, Value], name: str) -> Value:
        if name in scope:
            return scope[name]
        return scope.get(name.split("#")[0] + "#0", _empty(()))

    def _op(self, op: Op, scope: dict[str, Value], frame: Frame) -> list[Value]:
        operands = [self._get(scope, name) for name in _operands(op)]
        shapes = _result_shapes(op)
        if op.name == "stablehlo.while":
            return self._loop(op, operands, scope, frame)
        if op.name in ("stablehlo.case", "stablehlo.if"):
            return self._branches(op, operands, scope, frame)
        callee = _CALLEE.search(op.line)
        if op.name in ("call", "func.call") and callee and callee.group(1) in self.functions:
            name = callee.group(1)
            jaxs = _base_name(name) in jax_random_functions()
            folds = jaxs and bool(FOLD_IN.search(name))
            if jaxs and not frame.in_jax_random and not frame.exempt:
                self._batch_of_one_key(operands, _base_name(name).strip("_"))
            # fold_in of the same words with the same data makes the same key again.
            data = operands[1].known if folds and len(operands) > 1 else None
            same = (
                (_atoms_key(operands[0]), np.asarray(data).tobytes()) if data is not None else None
            )
            if same in self.folded:
                return self.folded[same]
            inner = Frame(name, frame, next(self.numbers), frame.exempt or folds)
            used_up = len(self.consumed)
            results = self._call(self.functions[name], operands, inner)
            if same is not None and len(self.consumed) == used_up:  # it only read the key
                self.folded[same] = results
            return results
        if op.name == "stablehlo.constant":
            return [_constant(op, shapes[0] if shapes else ())]
        if op.name == "stablehlo.iota" and shapes:
            return [_iota(op, shapes[0])]
        if op.name == "stablehlo.rng_bit_generator":  # an rbg key's hash: a draw of its own
            inner = Frame("rng_bit_generator", frame, next(self.numbers), frame.exempt)
            return [self._computed(shape, operands, inner) for shape in shapes or [()]]
        if op.name == "stablehlo.custom_call":
            custom = _CUSTOM.search(op.line)
            if custom and custom.group(1) in PLACEMENT_CALLS and operands:
                return [operands[0]]
        if op.name in MOVES and operands and shapes:
            moved = _move(op, operands, shapes[0])
            if moved is not None:
                return [moved]
        if op.name == "stablehlo.dynamic_slice" and shapes:
            return [self._dynamic_slice(op, operands, shapes[0])]
        if op.name in _FOLDED and shapes and all(v.known is not None for v in operands):
            folded = _fold(op, operands, shapes[0])
            if folded is not None:
                self._consume(frozenset().union(*(v.all_atoms() for v in operands)), frame)
                return [folded]
        if op.name in _AT_KNOWN_PLACES and shapes:
            placed = _AT_KNOWN_PLACES[op.name](op, operands, shapes[0])
            if placed is not None:
                return [placed]
        if op.name == "stablehlo.select" and shapes and operands[0].known is not None:
            chosen = _chosen(operands, shapes[0])
            if chosen is not None:
                return [chosen]
        if op.name in PICKS and shapes:
            alike = _alike_choices(op, operands, shapes[0])
            if alike is not None:
                return [alike]
            if op.name == "stablehlo.select" and len(operands) == 3:
                return [self._choice(shapes[0], operands[1:])]
            return [self._picked(shape, operands) for shape in shapes]
        return [self._computed(shape, operands, frame) for shape in shapes or [()]]

    def _loop(
        self, op: Op, operands: list[Value], scope: dict[str, Value], frame: Frame
    ) -> list[Value]:
        names = _loop_names(op)
        condition = Block(names, op.regions[0].ops)
        body = Block(names, op.regions[1].ops)
        words = frozenset(a for v in operands for a in v.all_atoms() if _is_key(a))
        consumed_before, seen = set(self.consumed), [operands]
        carried, placed, spread = operands, _placements(operands, words), True
        for turn in range(MAX_TURNS):
            goes_on = self._block_quietly(condition, carried, frame, scope)
            if goes_on and goes_on[0].known is not None:
                if not bool(goes_on[0].known.all()):
                    return carried  # the judge followed it to its end
            elif turn >= TURNS and not spread:
                break  # the last turn took the key's words to no place they had not been
            # A loop's counter is new on each turn: picks made with it are not reuse.
            carried = self._block(body, carried, frame, scope) or carried
            seen.append(carried)
            reached = _placements(carried, words)
            spread, placed = bool(reached - placed), placed | reached
        # Cut short: any turn's carry may be the last. A key's words the loop did not use up
        # stay wherever any turn put them (words moved along a buffer, turn by turn).
        unused = words - (set(self.consumed) - consumed_before)
        return [
            _with_words_seen(value, states, unused)
            for value, states in zip(carried, zip(*seen, strict=True), strict=True)
        ]

    def _block_quietly(
        self, block: Block, arguments: list[Value], frame: Frame, outer: dict[str, Value]
    ) -> list[Value]:
        """A loop's condition: it decides whether the loop goes on, and draws from nothing."""
        consumed, maybe, reuses = dict(self.consumed), dict(self.maybe_consumed), list(self.reuses)
        try:
            return self._block(block, arguments, frame, outer)
        finally:
            self.consumed, self.maybe_consumed, self.reuses = consumed, maybe, reuses

    def _branches(
        self, op: Op, operands: list[Value], scope: dict[str, Value], frame: Frame
    ) -> list[Value]:
        before, maybe_before = dict(self.consumed), dict(self.maybe_consumed)
        after: dict[Any, Frame] = {}
        maybe_after: dict[Any, Frame] = {}
        outcomes: list[list[Value]] = []
        for region in op.regions:
            self.consumed, self.maybe_consumed = dict(before), dict(maybe_before)
            inner = Frame(f"{frame.name}.branch", frame, next(self.numbers), frame.exempt)
            outcomes.append(self._ops(region.ops, dict(scope), inner))
            after.update(self.consumed)
            maybe_after.update(self.maybe_consumed)
        self.consumed, self.maybe_consumed = after, maybe_after
        # Which branch runs is the data's choice: each result is a choice by a condition
        # among the branches' results (a key returned by one is that key, maybe).
        outcomes = [got for got in outcomes if got]
        return (
            [
                self._choice(shape, [got[i] for got in outcomes if i < len(got)])
                for i, shape in enumerate(_result_shapes(op) or [v.shape for v in outcomes[0]])
            ]
            if outcomes
            else []
        )

    def _dynamic_slice(self, op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value:
        source, starts = operands[0], operands[1:]
        if all(s.known is not None for s in starts) and len(starts) == len(source.shape):
            begin = [
                int(np.clip(int(np.asarray(s.known).reshape(-1)[0]), 0, dim - size))
                for s, dim, size in zip(starts, source.shape, shape, strict=True)
            ]
            index = tuple(slice(b, b + size) for b, size in zip(begin, shape, strict=True))
            return _moved(source, shape, lambda array: array[index])
        return _alike_choices(op, operands, shape) or self._picked(shape, [source])

    def _choice(self, shape: tuple[int, ...], sides: list[Value]) -> Value:
        """One of `sides`, place by place, by a condition the judge does not work out (a
        select, a cond's branches): each element any of theirs at that place."""
        size = int(np.prod(shape, dtype=np.int64))
        if size > TRACKED_ELEMENTS or any(side.shape != shape for side in sides):
            return self._picked(shape, sides)
        number = next(self.numbers)
        places = [side.element_atoms() for side in sides]
        atoms = np.empty(shape, dtype=object)
        for index in np.ndindex(*shape):
            atoms[index] = frozenset(
                (PICKED, number, atom) for place in places for atom in place[index]
            )
        return Value(shape, atoms)

    def _picked(self, shape: tuple[int, ...], operands: list[Value]) -> Value:
        """Words chosen from `operands` at places or by a condition the judge does not work
        out: each result is any of them, under a pick of its own."""
        number = next(self.numbers)
        atoms = frozenset().union(*(v.all_atoms() for v in operands))
        return Value(shape, frozenset((PICKED, number, atom) for atom in atoms))


def _with_words_seen(value: Value, states: tuple[Value, ...], unused: frozenset) -> Value:
    """`value`, each element also holding the words of `unused` keys it held in any of
    `states` (the same carried value, turn by turn)."""
    kept = [s for s in states if s.shape == value.shape]
    if not value.fine or not all(s.fine for s in kept):
        words = frozenset().union(*(s.all_atoms() & unused for s in kept))
        return Value(value.shape, value.all_atoms() | words, value.known)
    atoms = value.atoms.copy()
    for state in kept:
        for index, held in np.ndenumerate(state.atoms):
            if held & unused:
                atoms[index] = atoms[index] | (held & unused)
    return Value(value.shape, atoms, value.known)


def _placements(values: list[Value], words: frozenset) -> set[tuple[int, int, Any]]:
    """Where the words of `words` are in a loop's carry: (value, element, word) triples."""
    placed = set()
    for number, value in enumerate(values):
        if not value.fine:
            placed |= {(number, -1, word) for word in value.all_atoms() & words}
            continue
        for element, atoms in enumerate(value.atoms.ravel()):
            placed |= {(number, element, word) for word in atoms & words}
    return placed


def _chosen(operands: list[Value], shape: tuple[int, ...]) -> Value | None:
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


def _alike_choices(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
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


def _loop_names(op: Op) -> list[str]:
    inside = op.line[op.line.find("(") + 1 : op.line.find(")")]
    return [part.split("=")[0].strip() for part in inside.split(",") if "=" in part]


def _operands(op: Op) -> list[str]:
    head = op.line
    if op.name == "stablehlo.while":  # (%iterArg = %c, …): the values after each `=`
        inside = head[head.find("(") + 1 : head.find(")")]
        return [part.split("=")[1].strip() for part in inside.split(",") if "=" in part]
    head = head.split(" : ")[0] if " : " in head else head
    if op.regions:
        head = head.split("({")[0].split("{")[0]
    head = re.sub(r"\bdense<[^>]*>", "", head)
    return _OPERAND.findall(head)


def _result_shapes(op: Op) -> list[tuple[int, ...]]:
    line = op.line
    tail = line.rsplit("->", 1)[1] if "->" in line else line.rsplit(" : ", 1)[-1]
    shapes = []
    for spec in _TENSOR.findall(tail):
        parsed = _shape(spec)
        shapes.append(parsed[0] if parsed else ())
    if op.name != "stablehlo.while" and "->" not in line and len(op.results) == 1:
        shapes = shapes[-1:]
    return shapes[: max(len(op.results), 1)]


def _constant(op: Op, shape: tuple[int, ...]) -> Value:
    """A constant, its integer values known where it is one number or a list of them."""
    value = _empty(shape)
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


def _iota(op: Op, shape: tuple[int, ...]) -> Value:
    """0, 1, 2, … along the op's dimension: known, as a constant is."""
    value = _empty(shape)
    dimension = re.search(r"dim\s*=\s*(\d+)", op.line)
    if dimension and shape and int(np.prod(shape, dtype=np.int64)) <= TRACKED_ELEMENTS:
        value.known = np.indices(shape)[int(dimension.group(1))].astype(np.int64)
    return value


def _wrapped(known: np.ndarray, op: Op) -> np.ndarray | None:
    """`known` as the op's result type holds it (an int32 sum wraps past 2**31); None for
    a type the judge does not work out (floats)."""
    specs = _TENSOR.findall(op.line.rsplit("->", 1)[-1])
    parsed = _shape(specs[-1]) if specs else None
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


def _move(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
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
        return None if dims is None else _moved(source, shape, lambda a: np.flip(a, tuple(dims)))
    if name == "stablehlo.pad":
        return _padded(op, operands, shape)
    if name == "stablehlo.reshape":
        return _moved(source, shape, lambda a: np.reshape(a, shape))
    if name == "stablehlo.slice":
        match = re.search(r"\[([\d:, ]*)\]", op.line)
        if match is None:
            return None
        index = []
        for part in match.group(1).split(","):
            numbers = [int(n) for n in part.strip().split(":")]
            index.append(slice(numbers[0], numbers[1], numbers[2] if len(numbers) > 2 else 1))
        return _moved(source, shape, lambda a: a[tuple(index)])
    if name == "stablehlo.transpose":
        order = _brackets(op.line, "dims")
        return None if order is None else _moved(source, shape, lambda a: np.transpose(a, order))
    if name == "stablehlo.broadcast_in_dim":
        dims = _brackets(op.line, "dims")
        if dims is None:
            return None

        def broadcast(a: np.ndarray) -> np.ndarray:
            expanded = [1] * len(shape)
            for axis, size in zip(dims, np.shape(a), strict=True):
                expanded[axis] = size
            return np.broadcast_to(np.reshape(a, expanded), shape)

        return _moved(source, shape, broadcast)
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
        and _operands(region.ops[0]) == [region.arguments[1]]
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
        atoms[int(row)] = update.reshape(shape[1:])
    return Value(shape, atoms, None)


# Ops that choose words at places the judge may work out: there, they move them.
_AT_KNOWN_PLACES = {
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
_FOLDED = {
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


def _fold(op: Op, operands: list[Value], shape: tuple[int, ...]) -> Value | None:
    known = [np.broadcast_to(v.known, shape) for v in operands]  # type: ignore[arg-type]
    try:
        if op.name == "stablehlo.compare":
            direction = re.search(r"compare\s+(\w+)", op.line)
            if direction is None or direction.group(1) not in _COMPARE:
                return None
            result = _COMPARE[direction.group(1)](*known).astype(np.int64)
        else:
            result = np.asarray(_FOLDED[op.name](*known), dtype=np.int64)
    except (ValueError, TypeError):
        return None
    atoms = frozenset().union(*(v.all_atoms() for v in operands))
    if atoms:
        return None  # computed from a key's words: not a constant
    wrapped = _wrapped(result, op)
    if wrapped is None:
        return None
    return Value(shape, _empty(shape).atoms, wrapped)


def reused_keys(text: str, keys: frozenset[int]) -> list[Reuse]:
    """The keys the program in `text` (StableHLO) draws from twice, each as the two calls
    that drew from it, and those it computes with outside JAX's random functions; `keys`:
    the positions of its key arguments. A program the judge cannot follow (an op's form
    it does not read) shows no reuse: it never fails a right answer (JAX's own checker,
    in the learner's process, still runs)."""
    try:
        return KeyFlow(parse(text), keys).run()
    except (IndexError, ValueError, KeyError, TypeError):
        return []
