"""What each check's pass rests on, read from the check file's source; and the checks that
rest on the learner's process's word alone, which decide a verdict but earn no points
(kata.reporting.scoring).

A check rests on the strongest evidence it asks for (docs/writing-checks.md): it passes
only if every assertion holds, and one that the learner's process cannot write is enough
to keep a wrong answer from the point. What a check asks for is read from its source and
the source of the check file's own functions it calls, transitively:

- exported program: `.exported(`, `.equation_count(`, `assert_each_key_used_once`, a
  program a helper exported and the judge deserializes (`ExportedProgram.from_bytes(`),
  or a learner's function under `.jit(`, `.vmap(` or `.grad(`, which the judge runs from
  its exported program (not kept there with `.in_its_process()`, nor called in a
  `count_compilations()` block, which counts what the learner's process compiles);
- outside measurement: `.speed_vs(`, the judge's own clock (`time.perf_counter`), or
  compile counts the kernel corroborates (a request costing the CPU only a compilation
  explains counts as one, whatever the learner's process reports; kata.learner_side.compile_counts)
  and nothing else of the learner's process's word: every `count_compilations()` block
  held only to upper bounds, over several calls (a `for` in it) or to none at all
  (`.count == 0`). Where the kernel's count of a process's CPU never ticks, such counts
  are the learner's process's word, unless the check holds them to the judge's wall clock
  instead (`.answered_too_fast_to_compile`: the requests it saw come back sooner than any
  compilation takes; `clock_counted_checks`);
- the learner's process's word: what its calls printed (`capsys`, `capfd`: a forgery
  prints what it likes), what a reply says of its arrays besides their values (where
  each device's block lies, `.placement`: read from JAX's array by that process's own
  code, which learner code can rewrite on the way out), any other count (a lower bound,
  or how many programs one first call compiled: one compilation or thirty cost alike),
  or a call of one of the file's `@in_learner_process` helpers (not
  `@builds_in_learner_process` ones, which only build an argument, such as an optimizer's
  state, without reading the learner's module, nor `forget_compiled_programs`, which only
  empties a cache), where the check asks for none of the above. A conservative count: a
  helper that returns values the judge compares with its own reference (16's models,
  14's functions of the judge's) is counted here too, since the source cannot tell those
  from a measurement;
- value under a transformation applied in the learner's process: `.eagerly(`,
  `.keys_checked(`, `.in_its_process(`;
- value: anything else (the learner's functions called plainly, judged against the
  check's own reference).

The last two kinds are the learner's process's word: whatever that process reports, a
forgery of it could report too (tests/test_relay_and_caches.py records the checks a relay
or a pre-filled cache gains). docs/writing-checks.md has the rule for check authors.
"""

from __future__ import annotations

import ast
import functools
import re
import threading
from pathlib import Path

from kata.cpu_clocks import cpu_clocks

PROGRAM, OUTSIDE, WORD, TRANSFORMED, VALUE = (
    "exported program",
    "outside measurement",
    "the learner's process's word",
    "value under a transformation in the learner's process",
    "value",
)
KINDS = (VALUE, TRANSFORMED, PROGRAM, OUTSIDE, WORD)
PROGRAM_SIGNS = (
    ".exported(",
    ".equation_count(",
    "assert_each_key_used_once",
    "ExportedProgram.from_bytes(",
)
# Stand in a check's source for each compile count the kernel does and does not
# corroborate (_count_blocks).
KERNEL_COUNTED = "# compilations the kernel corroborates"
WORD_COUNTED = "# compilations as the learner's process reports them"
OUTSIDE_SIGNS = (".speed_vs(", "time.perf_counter")
# What a check on compile counts reads where the kernel's clocks are dead: how many of its
# requests the judge's wall clock saw come back sooner than any compilation takes
# (kata.learner_side.compile_counts.Compilations).
CLOCK_COUNTED = ".answered_too_fast_to_compile"
# A learner's function under the judge's `jit`/`vmap`/`grad` is run here from its exported
# program (LearnerFunction.__call__), unless kept in the learner's process.
ROUTED = re.compile(r"(?<!jax)\.(jit|vmap|grad)\(")
KEPT_THERE = ".in_its_process("
TRANSFORMED_SIGNS = (".eagerly(", ".keys_checked(", KEPT_THERE)
SETUP_HELPERS = {"forget_compiled_programs"}
# What the learner's process printed reaches a check through pytest's capture fixtures
# (`capsys`, `capfd` and their binary forms); where an array's blocks lie, through the
# reply's `placement` (kata.handoffs.wire.Placed).
REPORTED_SIGNS = ("capsys", "capfd", ".placement")


def _count_blocks(node: ast.FunctionDef) -> tuple[int, int]:
    """How many `count_compilations()` blocks `node` holds whose count the kernel's CPU
    count corroborates, and how many it does not. Corroborated: its `count` held only to
    upper bounds (a compilation the process did not report still counts, so a lower bound
    gains) and its `reported` list unused, over several calls (a loop in the block) or
    held to none at all (`== 0`)."""
    corroborated = uncorroborated = 0
    for block in ast.walk(node):
        if not isinstance(block, ast.With):
            continue
        for item in block.items:
            call = item.context_expr
            if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "count_compilations"):
                continue
            seen = ast.unparse(item.optional_vars) if item.optional_vars else ""
            count = f"{seen}.count"
            bounds = [
                (type(op), ast.unparse(right))
                for compare in ast.walk(node)
                if isinstance(compare, ast.Compare) and ast.unparse(compare.left) == count
                for op, right in zip(compare.ops, compare.comparators, strict=True)
            ]
            upper = all(op in (ast.Eq, ast.LtE, ast.Lt) for op, _ in bounds)
            looped = any(isinstance(inner, ast.For) for inner in ast.walk(block))
            held = bool(bounds) and f"{seen}.reported" not in ast.unparse(node)
            if held and upper and (looped or all(bound == (ast.Eq, "0") for bound in bounds)):
                corroborated += 1
            else:
                uncorroborated += 1
    return corroborated, uncorroborated


def _is_helper(node: ast.FunctionDef) -> bool:
    return any(ast.unparse(d).endswith("in_learner_process") for d in node.decorator_list)


def is_builder(node: ast.FunctionDef) -> bool:
    """A helper that only builds an argument for the learner's code (an optimizer's state)
    with library code, never reading the learner's module (its first parameter)."""
    return any(ast.unparse(d).endswith("builds_in_learner_process") for d in node.decorator_list)


def _check_sources(path: Path) -> dict[str, tuple[str, set[str]]]:
    """Each check of a check file (its test function's name): the source it runs on the
    judge's side, the file's functions it calls included, and the helpers it calls."""
    tree = ast.parse(path.read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    # A builder grants nothing: the check judges what the learner's code returns for what
    # it built (tests/test_evidence_table.py holds each to leaving the module alone).
    helpers = {n for n, node in functions.items() if _is_helper(node) and not is_builder(node)}

    def reached(name: str, seen: set[str]) -> tuple[str, set[str]]:
        """The source a function runs on the judge's side, and the helpers it calls."""
        seen.add(name)
        node = functions[name]
        source, called = ast.unparse(node), set()
        corroborated, uncorroborated = _count_blocks(node)
        source += f"\n{KERNEL_COUNTED}" * corroborated + f"\n{WORD_COUNTED}" * uncorroborated
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                callee = call.func.id
                if callee in helpers:
                    called.add(callee)
                elif callee in functions and callee not in seen:
                    more, more_called = reached(callee, seen)
                    source += "\n" + more
                    called |= more_called
        return source, called

    return {name: reached(name, set()) for name in functions if name.startswith("test_")}


def classify_file(path: Path) -> dict[str, str]:
    """Each check of a check file (its test function's name) and the kind of evidence it
    rests on."""
    kinds = {}
    for name, (source, called) in _check_sources(path).items():
        # Calls in a `count_compilations()` block stay in the learner's process.
        counted = KERNEL_COUNTED in source or WORD_COUNTED in source
        routed = ROUTED.search(source) and KEPT_THERE not in source and not counted
        reported = any(sign in source for sign in REPORTED_SIGNS)
        if routed or any(sign in source for sign in PROGRAM_SIGNS):
            kinds[name] = PROGRAM
        elif any(sign in source for sign in OUTSIDE_SIGNS):
            kinds[name] = OUTSIDE
        elif WORD_COUNTED in source or called - SETUP_HELPERS or reported:
            kinds[name] = WORD
        elif KERNEL_COUNTED in source:
            kinds[name] = OUTSIDE
        elif any(sign in source for sign in TRANSFORMED_SIGNS):
            kinds[name] = TRANSFORMED
        else:
            kinds[name] = VALUE
    return kinds


def kernel_counted_checks(path: Path) -> set[str]:
    """The checks of a check file that rest on compile counts the kernel corroborates and
    on no other measurement."""
    kinds = classify_file(path)
    return {
        name
        for name, (source, _) in _check_sources(path).items()
        if kinds[name] == OUTSIDE and not any(sign in source for sign in OUTSIDE_SIGNS)
    }


def clock_counted_checks(path: Path) -> set[str]:
    """The checks of `kernel_counted_checks` that, where the kernel cannot count, hold their
    requests to the judge's wall clock instead (`CLOCK_COUNTED`): those stay outside
    measurements there."""
    sources = _check_sources(path)
    return {name for name in kernel_counted_checks(path) if CLOCK_COUNTED in sources[name][0]}


# A check resting on these grants no point: what it judges, the learner's process reported.
WORD_OF_THE_PROCESS = frozenset({WORD, TRANSFORMED})


def feedback_only(check_file: Path) -> frozenset[str]:
    """The checks of `check_file` (their test functions' names) that rest on the learner's
    process's word alone: each still passes or fails, and earns no points. Where the
    kernel's count of a process's CPU never ticks or cannot be read (kata.cpu_clocks), no
    compile count is corroborated by it: the checks resting on such counts are among them,
    but those that hold their requests to the judge's wall clock then (`CLOCK_COUNTED`)."""
    stat = check_file.stat()
    corroborated = bool(cpu_clocks().kernel)
    return _feedback_only(str(check_file), stat.st_mtime_ns, stat.st_size, corroborated)


# `ast.parse` in two threads at once fails on CPython 3.11 ("AST constructor recursion depth
# mismatch"), and `kata grade --jobs 2` runs two gradings in threads of one process.
_PARSING = threading.Lock()


@functools.lru_cache(maxsize=64)
def _feedback_only(path: str, _mtime_ns: int, _size: int, corroborated: bool) -> frozenset[str]:
    with _PARSING:
        kinds = classify_file(Path(path))
        uncorroborated = (
            set()
            if corroborated
            else kernel_counted_checks(Path(path)) - clock_counted_checks(Path(path))
        )
    word = {name for name, kind in kinds.items() if kind in WORD_OF_THE_PROCESS}
    return frozenset(word | uncorroborated)
