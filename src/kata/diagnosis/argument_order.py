"""Arguments out of order in JAX's functions that take functions: `lax.while_loop(body, cond,
init)` is told `lax.while_loop(cond_fun, body_fun, init_val)` takes the condition first, and
is shown the call rewritten in that order. The order is each function's signature's, read
when a call is judged; a table says only which places take a function, a list of functions,
positions or a value (`TAKES_FUNCTIONS`).

The rule states its evidence: an argument visibly of another place's kind, a place JAX's
message says got no function, or names that each name another's place. The rule table is
kata.diagnosis.diagnose.RULES.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any

from kata.diagnosis import library_api
from kata.diagnosis.diagnose_calls import parsed_line
from kata.diagnosis.diagnose_types import Diagnosis, Failure

# What a place of a call takes: a function, a loop's test (a function that returns a bool),
# a list of functions, positions (`argnums`, `in_axes`), names (`static_argnames`) or a value.
FUNCTION, TEST, FUNCTIONS = "function", "test", "functions"
POSITIONS, NAMES, VALUE = "positions", "names", "value"
CALLABLE = frozenset({FUNCTION, TEST})
ANYTHING = frozenset({FUNCTION, TEST, FUNCTIONS, POSITIONS, NAMES, VALUE})


@dataclass(frozen=True)
class TakesFunctions:
    """One of JAX's functions that take functions, whose arguments' order matters: what each
    parameter that holds a place takes (one the table leaves out takes a value), that order
    in words, and the keyword a spare argument by position was meant for (`jax.jit(f, 1)`:
    `static_argnums`). The parameters' names and order are the function's signature's, read
    when a call is judged; tests/test_diagnosis_real_errors.py checks each name given here
    against it, so a parameter JAX renames cannot leave the table behind."""

    path: str
    takes: dict[str, str]
    order: str
    by_name: dict[str, str] = field(default_factory=dict)  # what it is -> its keyword
    makes_a_function: bool = False  # returns one: `jax.grad(f)` as an argument is a function
    # Parameters that take a count (fori_loop's bounds): an int, or an expression that may
    # be one, so no argument is ruled out of them; one visibly no int is only unlikely there.
    counts: tuple[str, ...] = ()


DIFFERENTIATES = {"fun": FUNCTION, "argnums": POSITIONS}
TREE_MAP = {"f": FUNCTION, "tree": VALUE, "rest": VALUE}


TAKES_FUNCTIONS = (
    TakesFunctions(
        "jax.lax.while_loop",
        {"cond_fun": TEST, "body_fun": FUNCTION, "init_val": VALUE},
        "the condition first, then the body, then the start value",
    ),
    TakesFunctions(
        "jax.lax.fori_loop",
        {"lower": VALUE, "upper": VALUE, "body_fun": FUNCTION, "init_val": VALUE},
        "the bounds first, then the body, then the start value",
        counts=("lower", "upper"),
    ),
    TakesFunctions(
        "jax.lax.scan",
        {
            "f": FUNCTION,
            "init": VALUE,
            "xs": VALUE,
            "length": VALUE,
            "reverse": VALUE,
            "unroll": VALUE,
        },
        "the step first, then the start carry, then the sequence it steps over",
    ),
    TakesFunctions(
        "jax.lax.cond",
        {"pred": VALUE, "true_fun": FUNCTION, "false_fun": FUNCTION, "operands": VALUE},
        "the predicate first, then the two branches, then their operands",
    ),
    TakesFunctions(
        "jax.lax.switch",
        {"index": VALUE, "branches": FUNCTIONS, "operands": VALUE},
        "the index first, then the list of branches, then their operands",
    ),
    TakesFunctions(
        "jax.lax.map", {"f": FUNCTION, "xs": VALUE}, "the function first, then what it maps over"
    ),
    TakesFunctions(
        "jax.lax.associative_scan",
        {"fn": FUNCTION, "elems": VALUE, "reverse": VALUE, "axis": VALUE},
        "the combining function first, then the elements",
    ),
    TakesFunctions(
        "jax.vmap",
        {"fun": FUNCTION, "in_axes": POSITIONS, "out_axes": POSITIONS},
        "the function first, then `in_axes` and `out_axes`",
        makes_a_function=True,
    ),
    *(
        TakesFunctions(
            f"jax.{name}",
            DIFFERENTIATES,
            "the function first, then `argnums`",
            makes_a_function=True,
        )
        for name in ("grad", "value_and_grad", "jacfwd", "jacrev", "hessian")
    ),
    TakesFunctions(
        "jax.jit",
        {"fun": FUNCTION},
        "the function alone by position, its settings by name",
        by_name={POSITIONS: "static_argnums", NAMES: "static_argnames"},
        makes_a_function=True,
    ),
    TakesFunctions(
        "jax.checkpoint",
        {"fun": FUNCTION},
        "the function alone by position, `policy=` by name",
        by_name={FUNCTION: "policy"},
        makes_a_function=True,
    ),
    TakesFunctions(
        "jax.tree.map", TREE_MAP, "the function first, then the tree, then trees shaped like it"
    ),
    TakesFunctions(
        "jax.tree_util.tree_map",
        TREE_MAP,
        "the function first, then the tree, then trees shaped like it",
    ),
    TakesFunctions(
        "jax.tree.reduce",
        {"function": FUNCTION, "tree": VALUE, "initializer": VALUE, "is_leaf": FUNCTION},
        "the function first, then the tree, then the start value",
    ),
)


def takes_functions(function: object) -> TakesFunctions | None:
    """The table's row for one of JAX's functions that take functions (as imported here)."""
    return next((row for row in TAKES_FUNCTIONS if library_api.resolve(row.path) is function), None)


@dataclass(frozen=True)
class Place:
    """A place a call's arguments by position fill: its parameter's name (a setting's
    keywords, for a spare place) and what it takes."""

    names: tuple[str, ...]
    takes: frozenset[str]
    counts: bool = False  # takes a count: see TakesFunctions.counts
    # A setting taken by name only, given by position: its keyword for each kind of value
    # (`jax.jit`'s `static_argnums=` for positions, `static_argnames=` for names).
    by_name: tuple[tuple[str, str], ...] = ()

    @property
    def keyword(self) -> bool:
        return bool(self.by_name)


@dataclass(frozen=True)
class Argument:
    """An argument by position, as the line shows it: its text, what it can be (None where
    the line cannot tell, as for a name), the parameter its name says it is (`body` says
    `body_fun`, `nothing_saveable` of `jax.checkpoint_policies` says `policy`), whether its
    name is one given to functions (`step`, `loss_fn`), and whether it is visibly no count
    (a float, an array made, a container, a function)."""

    text: str
    kinds: frozenset[str] | None
    says: str | None = None
    named_as_a_function: bool = False
    no_count: bool = False


def _places(row: TakesFunctions, function: object, call: ast.Call) -> list[Place] | None:
    """The places a call's arguments by position fill, in order; None where they do not all
    have one, a keyword names one of them, or a required parameter is left empty (an
    argument missing: no order mends that)."""
    found = library_api.signature(function)
    if found is None:
        return None
    count = len(call.args)
    keywords = {k.arg for k in call.keywords}
    places: list[Place] = []
    required = 0  # places the signature requires, counted to the last
    for parameter in found.parameters.values():
        if parameter.name.startswith("_"):
            continue
        takes = frozenset({row.takes.get(parameter.name, VALUE)})
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            places.append(Place((parameter.name,), takes, parameter.name in row.counts))
            if parameter.default is parameter.empty and parameter.name not in keywords:
                required = len(places)
        elif parameter.kind is parameter.VAR_POSITIONAL:
            places += [Place((parameter.name,), takes)] * max(0, count - len(places))
    if row.by_name and len(places) < count:  # `jax.jit(f, 1)`: one spare place, by name
        settings = tuple(row.by_name.items())
        places.append(Place(tuple(row.by_name.values()), frozenset(row.by_name), by_name=settings))
    places = places[:count]
    if len(places) < count or required > count or keywords & {p.names[0] for p in places}:
        return None
    return places


# A name given to functions: `f`, `fn`, `step`, `body_fn`, `loss_fn`, `model`.
FUNCTION_NAME = re.compile(
    r"^(?:f|fn|fun|func|function)$|(?:^|_)(?:fn|fun|func|function|step|body|cond|loss|apply|"
    r"rule|model|net|layer|branch)(?:$|_)"
)
# A parameter's first word that says nothing of its place (`fun`, `f`, `in_axes`'s `in`).
GENERIC_WORDS = frozenset({"f", "fn", "fun", "func", "function", "rest", "operands", "in", "out"})


def _says(word: str, stem: str) -> bool:
    """Whether a word of a name says a parameter's first word: the word itself, or one that
    shares its first letters (`condition` for `cond`, `initial` for `init`, `policies` for
    `policy`)."""
    common = len(os.path.commonprefix([word, stem]))
    return word == stem or (common >= 4 and common >= min(len(word), len(stem)) - 2)


def _place_named(name: str, places: list[Place]) -> str | None:
    """The one parameter among the places that a name says it is (`body` or `loop_body`
    for `body_fun`, `init` for `init_val`), or None."""
    last = name.rpartition(".")[2].lower()
    words = [w for w in re.split(r"[^a-z]+", name.lower()) if w]
    said = {
        candidate
        for place in places
        for candidate in place.names
        if last == candidate
        or (
            (stem := candidate.split("_")[0]) not in GENERIC_WORDS
            and any(_says(word, stem) for word in words)
        )
    }
    return said.pop() if len(said) == 1 else None


# A lambda whose body computes a value (`lambda c: c + 1`, `lambda c: (i, x)`) is no
# loop's test; one that compares, or calls, may be.
COMPUTES_A_VALUE = (ast.BinOp, ast.Tuple, ast.List, ast.Dict)
# JAX's and NumPy's array functions (a call of theirs is an array), bar those that make a
# function.
ARRAY_MODULES = re.compile(r"^(?:jnp|np|numpy|jax\.numpy|jax\.random|jr|jrandom|random)\.")
MAKES_A_FUNCTION = frozenset({"vectorize", "frompyfunc", "partial"})


def _seen_kinds(node: ast.expr) -> frozenset[str] | None:
    """What an argument visibly is, as written: a lambda a function, a number a value (an
    int or None positions too), a list of lambdas functions; None where the line cannot
    tell (a name, a subscript, a call of the learner's own)."""
    if isinstance(node, ast.Lambda):
        return frozenset({FUNCTION}) if isinstance(node.body, COMPUTES_A_VALUE) else CALLABLE
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        node = node.operand  # `-1`
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return frozenset({VALUE, POSITIONS})
        return frozenset({VALUE, NAMES}) if isinstance(value, str) else frozenset({VALUE})
    if isinstance(node, (ast.Tuple, ast.List, ast.Dict)):
        items = node.values if isinstance(node, ast.Dict) else node.elts
        seen = [_seen_kinds(item) for item in items]
        known = [kinds for kinds in seen if kinds is not None]
        if known and all(kinds & CALLABLE for kinds in known) and not isinstance(node, ast.Dict):
            return frozenset({FUNCTIONS})  # `[lambda x: x, neg]`: branches
        if not items or len(known) < len(seen):
            return None
        return frozenset({VALUE}) | (frozenset.intersection(*known) & {POSITIONS, NAMES})
    if isinstance(node, (ast.BinOp, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.JoinedStr)):
        return frozenset({VALUE})
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        spelled = ast.unparse(node.func)
        name = spelled.rpartition(".")[2]
        if name in MAKES_A_FUNCTION:
            return CALLABLE
        resolved = library_api.called(f"{spelled}(", name)
        row = resolved and takes_functions(resolved[1])
        if row:
            return CALLABLE if row.makes_a_function else None
        return frozenset({VALUE}) if ARRAY_MODULES.match(spelled) else None
    if isinstance(node, ast.Attribute):  # `jnp.add`, `jax.nn.relu`: JAX's own, spelled so
        # (a bare name is the learner's: `grad` is as often a gradient as `jax.grad`)
        spelled = ast.unparse(node)
        resolved = library_api.called(f"{spelled}(", spelled.rpartition(".")[2])
        if resolved and callable(resolved[1]) and not isinstance(resolved[1], type):
            return CALLABLE
    return None


def _argument(text: str, node: ast.expr, places: list[Place]) -> Argument:
    """What the line shows of an argument: what it is, and for a name, what it says."""
    seen = _seen_kinds(node)
    named = isinstance(node, (ast.Name, ast.Attribute))
    spelled = ast.unparse(node)
    return Argument(
        ast.get_source_segment(text, node) or spelled,
        seen,
        _place_named(spelled, places) if named else None,
        named
        and seen is None
        and FUNCTION_NAME.search(spelled.rpartition(".")[2].lower()) is not None,
        seen is not None and POSITIONS not in seen,
    )


# JAX's words for a place that got no function: "lax.fori_loop: body_fun argument should
# be callable.", "lax.switch: branches argument should be a sequence of callables.";
# jax.vmap's, jax.grad's and jax.jit's "Expected a callable value, got 0"; jax.tree.map's
# "'dict' object is not callable".
NOT_CALLABLE_PLACE = re.compile(
    r"\b(\w+) argument should be (a sequence of callables|a? ?callable)"
)
# A function where JAX wanted an array: "Argument '<function double at 0x...>' of type
# '<class 'function'>' is not a valid JAX type" (`lax.map(xs, double)`).
FUNCTION_AS_A_VALUE = re.compile(r"Argument '<function (?:[\w.<>]+\.)?(\w+) at 0x")
NO_FUNCTION_FIRST = re.compile(
    r"Expected a callable value, got|^\w+: '[\w.]+' object is not callable"
)


def _told_by_the_error(message: str, places: list[Place], args: list[Argument]) -> bool:
    """Narrow what each argument can be by what JAX's message says its place got; False
    where that contradicts what the line shows (the message is about another call)."""
    told: dict[int, frozenset[str]] = {}
    for name, wanted in NOT_CALLABLE_PLACE.findall(message):
        lacks = frozenset({FUNCTIONS}) if "sequence" in wanted else CALLABLE
        told.update({i: lacks for i, p in enumerate(places) if name in p.names})
    if NO_FUNCTION_FIRST.search(message):
        first = next((i for i, p in enumerate(places) if p.takes & CALLABLE), None)
        if first is not None:
            told[first] = CALLABLE
    for i, lacks in told.items():
        kinds = (args[i].kinds or ANYTHING) - lacks
        says_callable = args[i].named_as_a_function or any(
            p.takes & CALLABLE for p in places if args[i].says in p.names
        )
        if not kinds or (lacks == CALLABLE and says_callable):
            return False  # `jax.tree.map(fn, tree)` with `fn` a dict: not an order slip
        args[i] = replace(args[i], kinds=kinds, no_count=POSITIONS not in kinds)
    for name in FUNCTION_AS_A_VALUE.findall(message):
        for i, arg in enumerate(args):
            if arg.text.rpartition(".")[2] == name:
                if arg.kinds is not None and not arg.kinds & CALLABLE:
                    return False
                args[i] = replace(arg, kinds=CALLABLE, no_count=True)
    return True


def _fits(arg: Argument, place: Place) -> bool:
    """Whether nothing known of the argument rules the place out."""
    return (arg.kinds is None or bool(arg.kinds & place.takes)) and (
        arg.says is None or arg.says in place.names
    )


def _belongs(arg: Argument, place: Place) -> bool:
    """Whether something known of the argument says it belongs in the place: an argument
    moved needs this, as a value moved into a function's place would only be a guess."""
    if not place.takes & (CALLABLE | {FUNCTIONS}) and not place.keyword:
        return _fits(arg, place)
    return (
        bool(arg.kinds and arg.kinds & place.takes)
        or arg.says in place.names
        or (arg.named_as_a_function and bool(place.takes & CALLABLE))
    )


def _out_of_order(args: list[Argument], places: list[Place]) -> bool:
    """Whether the call as written is wrong: an argument shown to be what its place does not
    take, a setting given by position, or two names each saying the other's place."""
    return any(
        (arg.kinds is not None and not arg.kinds & place.takes) or place.keyword
        for arg, place in zip(args, places, strict=True)
    ) or any(
        a.says in places[j].names and b.says in places[i].names
        for (i, a), (j, b) in itertools.combinations(enumerate(args), 2)
    )


def _best_order(args: list[Argument], places: list[Place]) -> tuple[int, ...] | None:
    """The order of the arguments (the place of each) that every argument fits, each moved
    one with a reason to be there; of those, the one with the fewest arguments unlikely where
    they go (a function's name in a value's place, a float as a bound), then the one that
    reorders least (the fewest pairs reversed). None where no order fits, or two fit
    equally."""
    if len(args) > 7:
        return None
    scored = []
    for order in itertools.permutations(range(len(args))):
        if not all(
            _fits(arg, places[k]) and (k == i and not places[k].keyword or _belongs(arg, places[k]))
            for i, (arg, k) in enumerate(zip(args, order, strict=True))
        ):
            continue
        unlikely = sum(
            (arg.kinds is None and arg.named_as_a_function != bool(places[k].takes & CALLABLE))
            or (arg.no_count and places[k].counts)
            for arg, k in zip(args, order, strict=True)
        )
        reversed_pairs = sum(a > b for a, b in itertools.combinations(order, 2))
        scored.append(((unlikely, reversed_pairs), order))
    scored.sort()
    if not scored or (len(scored) > 1 and scored[0][0] == scored[1][0]):
        return None
    return scored[0][1]


def _shown(spelled: str, row: TakesFunctions, function: object) -> str:
    """`lax.while_loop(cond_fun, body_fun, init_val)`: the parameters whose place matters,
    as the signature orders them, and `...` for other places it has."""
    found = library_api.signature(function)
    shown: list[str] = []
    left_out = False
    for parameter in found.parameters.values() if found else ():
        if parameter.name.startswith("_"):
            continue
        if parameter.name not in row.takes and parameter.name not in row.by_name.values():
            left_out = left_out or parameter.kind is not parameter.KEYWORD_ONLY
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in shown:
            shown.append("*")
        # A default shown where it reads as code (`xs=None`), else as `...` (`initializer`'s
        # sentinel object); none for a place by position only (`jax.jit`'s `fun`, whose
        # default makes `jax.jit(static_argnums=1)` a decorator).
        default = repr(parameter.default)
        if parameter.default is parameter.empty or parameter.kind is parameter.POSITIONAL_ONLY:
            default = ""
        elif not re.fullmatch(r"[\w.'-]+", default):
            default = "..."
        prefix = "*" if parameter.kind is parameter.VAR_POSITIONAL else ""
        shown.append(f"{prefix}{parameter.name}" + (f"={default}" if default else ""))
    return f"{spelled}({', '.join(shown + (['...'] if left_out else []))})"


def _rewritten(
    text: str, call: ast.Call, args: list[Argument], places: list[Place], order: tuple[int, ...]
) -> str:
    """The call with its arguments in their places: settings by name, keywords as written."""
    placed = [""] * len(args)
    for arg, k in zip(args, order, strict=True):
        by_name = places[k].by_name  # `jax.jit(f, 1)`: the keyword for that kind of value
        said = (kw for kind, kw in by_name if arg.says == kw or kind in (arg.kinds or ()))
        placed[k] = f"{next(said, places[k].names[0])}={arg.text}" if by_name else arg.text
    keywords = [ast.get_source_segment(text, k) or ast.unparse(k) for k in call.keywords]
    return f"{ast.get_source_segment(text, call.func)}({', '.join(placed + keywords)})"


def _reordered(
    text: str, call: ast.Call, row: TakesFunctions, function: object, message: str
) -> Diagnosis | None:
    """The diagnosis of a call whose arguments are shown out of order, with the one order
    they fit; None where the call looks right, or no order of its arguments mends it."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None  # `*args`, `**kwargs`: the places are not on the line
    places = _places(row, function, call)
    if not places:
        return None
    args = [_argument(text, node, places) for node in call.args]
    if not _told_by_the_error(message, places, args) or not _out_of_order(args, places):
        return None
    order = _best_order(args, places)
    if order is None:
        return None
    spelled = ast.get_source_segment(text, call.func) or ast.unparse(call.func)
    moved = [
        f"`{arg.text}` by position, where `{spelled}` has no place left"
        if place.keyword
        else f"`{arg.text}` as `{place.names[0]}`"
        for i, (arg, place) in enumerate(zip(args, places, strict=True))
        if order[i] != i or place.keyword
    ]
    return Diagnosis(
        f"arguments out of order for `{spelled}`: `{_shown(spelled, row, function)}` takes "
        f"{row.order}; this call passes {', '.join(moved)}.",
        f"in its order: `{_rewritten(text, call, args, places, order)}`.",
    )


def _calls_taking_functions(line: str) -> list[tuple[str, ast.Call, TakesFunctions, Any]]:
    """The line's calls of JAX's functions that take functions, spelled as JAX's (a
    learner's own `while_loop` is not one), with the text they were parsed from."""
    text, calls = parsed_line(line)
    found = []
    for call in calls:
        if not isinstance(call.func, (ast.Name, ast.Attribute)):
            continue
        spelled = ast.unparse(call.func)
        resolved = library_api.called(f"{spelled}(", spelled.rpartition(".")[2])
        row = resolved and takes_functions(resolved[1])
        if row:
            found.append((text, call, row, resolved[1]))
    return found


def arguments_out_of_order(f: Failure) -> Diagnosis | None:
    """A call of one of JAX's functions that take functions with its arguments out of order
    (`lax.while_loop(body, cond, x)`, `lax.fori_loop(0, n, x, body)`, `jax.tree.map(params,
    fn)`, `jax.jit(f, 1)`): the order its signature gives, and the call in that order. The
    failing line is read first, with what JAX's message says its places got; then the
    learner's lines that called it (a scan whose step failed), by what they show alone."""
    if f.is_a("AssertionError", "Failed"):
        return None
    lines = tuple(reversed(f.learner_lines)) or (f.source_line,)
    for depth, line in enumerate(lines):
        for text, call, row, function in _calls_taking_functions(line):
            found = _reordered(text, call, row, function, f.message if depth == 0 else "")
            if found:
                return found
    return None
