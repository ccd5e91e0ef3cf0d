"""Which keys a program draws from, read by the judge from the program itself.

JAX's key-reuse checker runs where the learner's code runs, and only sees typed keys: a key
unwrapped and wrapped again (`jax.random.wrap_key_data(jax.random.key_data(k))`), rebuilt
from its bits (`jax.random.key(...)`) or used as a legacy uint32 `PRNGKey` is new to it. In
the exported program (StableHLO, kata.checking.exported_program.ExportedProgram) every one of
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
key stands twice draws it twice. Names are the learner's to choose: a helper named like one
of JAX's random functions (`_normal`, `threefry2x32`, `_fold_in`) that hands one key to two
random functions is a reuse, since JAX's own never do (`JAXS_OWN_TWO_DRAWS` but one pair).
A program the judge cannot follow is refused (`UnfollowedKeys`), never read as no reuse:
a form it does not read, a function calling itself, a draw in a while loop's condition, a
loop going on past MAX_TURNS turns (following one turn of a split and a draw costs ~15 ms
of the judge's CPU; the course's checks give loops of a few turns), or one whose end it
cannot work out still moving keys' words to new places after MAX_TURNS.

Not followed (a learner's code can hide a reuse there, on purpose): two picks at places
from the same words. Read as a reuse though right:
`jax.random.binomial` (JAX's own code splits its key twice), and a draw from `keys[0]`
beside one from `keys[i]` at an index the judge cannot work out (`i` may be 0, for all it
can tell).

The program's text is read, and what each op that only moves or chooses words gives is
worked out, by kata.checking.stablehlo_ops; here the keys are followed through calls,
loops and branches to the draws that use them.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from kata.checking.stablehlo_ops import (
    AT_KNOWN_PLACES,
    FOLDED,
    MOVES,
    PICKS,
    PLACEMENT_CALLS,
    TRACKED_ELEMENTS,
    Block,
    Function,
    Op,
    Value,
    alike_choices,
    constant,
    empty,
    fold,
    iota,
    loop_names,
    made,
    move_words,
    operand_names,
    parse,
    rearranged,
    result_shapes,
    selected,
    shape_of,
)

# Loop turns followed where the judge cannot work out the end: at least two (the second
# shows what the first left for it), then on while the keys' words reach new places; at
# most MAX_TURNS, where it works out the end too, and a loop that needs more is refused.
TURNS = 2
MAX_TURNS = 64
FOLD_IN = re.compile(r"fold_in")
# What stands for fold_in's data where the judge cannot work it out (never a real value's
# bytes: those are a multiple of 4).
UNKNOWN_DATA = b"?"
_CALLEE = re.compile(r"call\s+@([\w$.-]+)\(")
_CUSTOM = re.compile(r"custom_call\s+@([\w.$-]+)")


class UnfollowedKeys(Exception):
    """Where in a program the judge cannot follow its keys; it refuses the program rather
    than read what it cannot follow as no reuse."""


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

    @functools.cached_property
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

    @functools.cached_property
    def is_jax_random(self) -> bool:
        return self.is_a_hash or _base_name(self.name) in jax_random_functions()


def _assert_is_a_fold_in(name: str, functions: dict[str, Function]) -> None:
    """A function named as JAX's fold_in is read as one (it reads a key without using it
    up) only where it is one by its content: the tree of functions it calls is the one
    JAX's own fold_in calls in this JAX (`_jaxs_fold_in`). A learner's function of that
    name that draws, or hashes twice, would hide a reuse behind fold_in's exemption:
    refused, whatever its name."""
    if _call_tree(name, functions) != _jaxs_fold_in():
        called = ", ".join(_callees(functions[name].body)) or "nothing"
        raise UnfollowedKeys(
            f"`{name}` is named as JAX's fold_in but calls {called}, not what JAX's own "
            "calls: a function of your own may not take the name of one of JAX's random "
            "functions; rename it"
        )


@functools.cache
def _jaxs_fold_in() -> tuple:
    """The tree of functions JAX's own fold_in calls in an exported program, in this JAX:
    `_threefry_fold_in` → `threefry2x32` → `closed_call` on 0.10.2, → `None` on 0.5.3.
    Read from JAX itself, once a process (an export of one fold_in)."""
    import jax
    from jax import export

    program = export.export(jax.jit(lambda key: jax.random.fold_in(key, 3)))(jax.random.key(0))
    functions = parse(program.mlir_module())
    return _call_tree(next(n for n in functions if FOLD_IN.search(n)), functions)


def _call_tree(name: str, functions: dict[str, Function], depth: int = 8) -> tuple:
    """`name`'s base name and, in order, the trees of the functions it calls (to `depth`)."""
    called = _callees(functions[name].body) if name in functions and depth else []
    return (_base_name(name), tuple(_call_tree(c, functions, depth - 1) for c in called))


def _callees(block: Block) -> list[str]:
    """The functions `block`'s ops call, regions included, once each call."""
    found = []
    for op in block.ops:
        callee = _CALLEE.search(op.line)
        if op.name in ("call", "func.call") and callee:
            found.append(callee.group(1))
        for region in op.regions:
            found += _callees(region)
    return found


def _folded_as(operands: list[Value]) -> tuple[Any, bytes] | None:
    """Which key a fold_in of `operands` (the key's words, the data) makes, as far as the
    judge can tell: its words and its data, or, where the data is not worked out, its
    words and UNKNOWN_DATA, which every such fold_in of those words shares."""
    if len(operands) < 2:
        return None
    data = operands[1].known
    folded = UNKNOWN_DATA if data is None else np.asarray(data).tobytes()
    return _atoms_key(operands[0]), folded


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


# The random functions JAX's own hand one key's words to inside one draw (measured over
# every function of jax.random, JAX 0.5.3 and 0.10.2: poisson computes both its samplers
# and selects; binomial splits its key twice, and reads as a reuse).
JAXS_OWN_TWO_DRAWS = frozenset({frozenset({"poisson_knuth", "poisson_rejection"})})
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


def _inner_draw(frame: Frame) -> Frame | None:
    """The first of JAX's random functions inside the draw `frame` is part of (the
    outermost), on the way to `frame`; that draw itself where there is none between, and
    None where `frame` is in none."""
    within = [outer for outer in frame.chain() if outer.is_jax_random]
    return within[-2] if len(within) > 1 else (within[0] if within else None)


def _inner_title(frame: Frame) -> str:
    """A draw inside a function named like one of JAX's, as JAX's random module calls it."""
    return _base_name(frame.name).strip("_") or frame.name


def _same_draw(earlier: Frame, frame: Frame) -> bool:
    """Whether `frame` is the draw `earlier`, or further in it."""
    return earlier is frame or (earlier.parent is not None and frame.within(earlier))


class KeyFlow:
    """Follows a program's key arguments through it (see the module's docstring)."""

    def __init__(self, functions: dict[str, Function], keys: frozenset[int]) -> None:
        self.functions = functions
        self.keys = keys
        self.consumed: dict[Any, Frame] = {}
        # Each key word's first draw one level into the draw that used it (`_inner_draw`).
        self.drawn_in: dict[Any, Frame] = {}
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
            parsed = shape_of(spec)
            shape = parsed[0] if parsed else ()
            arguments.append(
                made(shape, lambda i, p=position: frozenset({(KEY, p, i)}))
                if position in self.keys
                else empty(shape)
            )
        self._call(function, arguments, root)
        return self.reuses

    # -- consumption ---------------------------------------------------------------------

    def _consume(self, atoms: frozenset, frame: Frame) -> None:
        """`frame` computes with `atoms`. Inside fold_in it only reads them: a key used up
        before is still reused there, and is not used up by it."""
        reading = frame.exempt and _folding_in(frame)
        self._drawn_once_within(atoms, _inner_draw(frame))
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

    def _drawn_once_within(self, atoms: frozenset, inner: Frame | None) -> None:
        """A function named like one of JAX's random functions is taken for one draw; JAX's
        own hand one key's words to two of their random functions only as
        `JAXS_OWN_TWO_DRAWS` says. So two others inside one draw, reading the same words,
        are a helper of the learner's named like JAX's (`_normal`, `threefry2x32`,
        `_fold_in`) drawing twice: a reuse."""
        if inner is None:
            return
        for atom in atoms:
            if not _is_key(atom):
                continue
            first = self.drawn_in.setdefault(atom, inner)
            if first is inner or first.draw() is not inner.draw():
                continue
            if FOLD_IN.search(first.name) and FOLD_IN.search(inner.name):
                continue  # each only reads the key (fold_in of the same data: `folded`)
            titles = (_inner_title(first), _inner_title(inner))
            if frozenset(titles) not in JAXS_OWN_TWO_DRAWS:
                self._found(Reuse(*titles))

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
            return empty(shape)
        maker = next(
            (f for f in frame.chain() if f.is_jax_random and KEY_MAKERS.search(f.name)), None
        )
        kind = MADE_KEY if maker is not None else COMPUTED
        number = next(self.numbers)
        if maker is not None:
            self.made_by[(kind, number)] = maker.title
        return made(shape, lambda i: frozenset({(kind, number, i)}))

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
                return [self._get(scope, name) for name in operand_names(op)]
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
        return scope.get(name.split("#")[0] + "#0", empty(()))

    def _op(self, op: Op, scope: dict[str, Value], frame: Frame) -> list[Value]:
        operands = [self._get(scope, name) for name in operand_names(op)]
        shapes = result_shapes(op)
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
            # fold_in of the same words with the same data makes the same key again; with
            # data the judge cannot work out, the keys are not known to differ, and are read
            # as one (`fold_in(k, d)` twice with a traced d that is always 0 is one key).
            same = _folded_as(operands) if folds else None
            if folds:
                _assert_is_a_fold_in(name, self.functions)
            if same in self.folded:
                return self.folded[same]
            inner = Frame(name, frame, next(self.numbers), frame.exempt or folds)
            used_up = len(self.consumed)
            results = self._call(self.functions[name], operands, inner)
            if same is not None and len(self.consumed) == used_up:  # it only read the key
                self.folded[same] = results
            return results
        if op.name == "stablehlo.constant":
            return [constant(op, shapes[0] if shapes else ())]
        if op.name == "stablehlo.iota" and shapes:
            return [iota(op, shapes[0])]
        if op.name == "stablehlo.rng_bit_generator":  # an rbg key's hash: a draw of its own
            inner = Frame("rng_bit_generator", frame, next(self.numbers), frame.exempt)
            return [self._computed(shape, operands, inner) for shape in shapes or [()]]
        if op.name == "stablehlo.custom_call":
            custom = _CUSTOM.search(op.line)
            if custom and custom.group(1) in PLACEMENT_CALLS and operands:
                return [operands[0]]
        if op.name in MOVES and operands and shapes:
            moved = move_words(op, operands, shapes[0])
            if moved is not None:
                return [moved]
        if op.name == "stablehlo.dynamic_slice" and shapes:
            return [self._dynamic_slice(op, operands, shapes[0])]
        if op.name in FOLDED and shapes and all(v.known is not None for v in operands):
            folded = fold(op, operands, shapes[0])
            if folded is not None:
                self._consume(frozenset().union(*(v.all_atoms() for v in operands)), frame)
                return [folded]
        if op.name in AT_KNOWN_PLACES and shapes:
            placed = AT_KNOWN_PLACES[op.name](op, operands, shapes[0])
            if placed is not None:
                return [placed]
        if op.name == "stablehlo.select" and shapes and operands[0].known is not None:
            chosen = selected(operands, shapes[0])
            if chosen is not None:
                return [chosen]
        if op.name in PICKS and shapes:
            alike = alike_choices(op, operands, shapes[0])
            if alike is not None:
                return [alike]
            if op.name == "stablehlo.select" and len(operands) == 3:
                return [self._choice(shapes[0], operands[1:])]
            return [self._picked(shape, operands) for shape in shapes]
        return [self._computed(shape, operands, frame) for shape in shapes or [()]]

    def _loop(
        self, op: Op, operands: list[Value], scope: dict[str, Value], frame: Frame
    ) -> list[Value]:
        names = loop_names(op)
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
                if turn == MAX_TURNS - 1:
                    raise UnfollowedKeys(f"a loop goes on past {MAX_TURNS} turns")
            elif turn >= TURNS and not spread:
                break  # the last turn took the key's words to no place they had not been
            elif turn == MAX_TURNS - 1:
                raise UnfollowedKeys(
                    f"a loop still moves a key's words to new places after {MAX_TURNS} turns"
                )
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
        kept = self._state()
        try:
            decided = self._block(block, arguments, frame, outer)
            used_up = itertools.islice(reversed(self.consumed), len(self.consumed) - len(kept[0]))
            if any(_is_key(atom) for atom in used_up) or len(self.reuses) > len(kept[3]):
                raise UnfollowedKeys("a while loop's condition draws from a key")
            return decided
        finally:
            self._restore(kept)

    def _state(self) -> tuple[dict, dict, dict, list]:
        """What following a part of the program changes: what each draw used up, and the
        reuses found."""
        return (
            dict(self.consumed),
            dict(self.maybe_consumed),
            dict(self.drawn_in),
            list(self.reuses),
        )

    def _restore(self, state: tuple[dict, dict, dict, list]) -> None:
        consumed, maybe, drawn_in, reuses = state
        self.consumed, self.maybe_consumed = dict(consumed), dict(maybe)
        self.drawn_in, self.reuses = dict(drawn_in), list(reuses)

    def _branches(
        self, op: Op, operands: list[Value], scope: dict[str, Value], frame: Frame
    ) -> list[Value]:
        before = self._state()
        after: dict[Any, Frame] = {}
        maybe_after: dict[Any, Frame] = {}
        drawn_after: dict[Any, Frame] = {}
        outcomes: list[list[Value]] = []
        for region in op.regions:
            reuses = self.reuses
            self._restore(before)
            self.reuses = reuses
            inner = Frame(f"{frame.name}.branch", frame, next(self.numbers), frame.exempt)
            outcomes.append(self._ops(region.ops, dict(scope), inner))
            after.update(self.consumed)
            maybe_after.update(self.maybe_consumed)
            drawn_after.update(self.drawn_in)
        self.consumed, self.maybe_consumed, self.drawn_in = after, maybe_after, drawn_after
        # Which branch runs is the data's choice: each result is a choice by a condition
        # among the branches' results (a key returned by one is that key, maybe).
        outcomes = [got for got in outcomes if got]
        return (
            [
                self._choice(shape, [got[i] for got in outcomes if i < len(got)])
                for i, shape in enumerate(result_shapes(op) or [v.shape for v in outcomes[0]])
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
            return rearranged(source, shape, lambda array: array[index])
        return alike_choices(op, operands, shape) or self._picked(shape, [source])

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


def reused_keys(text: str, keys: frozenset[int]) -> list[Reuse]:
    """The keys the program in `text` (StableHLO) draws from twice, each as the two calls
    that drew from it, and those it computes with outside JAX's random functions; `keys`:
    the positions of its key arguments. Raises UnfollowedKeys, saying where, for a program
    the judge cannot follow (an op's form it does not read, a function calling itself, a
    draw in a loop's condition, a loop it cannot follow to where its keys' words stop)."""
    try:
        return KeyFlow(parse(text), keys).run()
    except (IndexError, ValueError, KeyError, TypeError, RecursionError) as error:
        raise UnfollowedKeys(f"{type(error).__name__}: {error}") from error
