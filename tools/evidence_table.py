"""Per exercise, how many checks rest on each kind of evidence, read from the checks' source.

    python tools/evidence_table.py          # the README's table rows, in Markdown

A check rests on the strongest evidence it asks for (docs/writing-checks.md): it passes
only if every assertion holds, and one that the learner's process cannot write is enough
to keep a wrong answer from the point. What a check asks for is read from its source and
the source of the check file's own functions it calls, transitively:

- exported program: `.exported(`, `.equation_count(`, `assert_each_key_used_once`, or a
  program a helper exported and the judge deserializes (`ExportedProgram.from_bytes(`);
- outside measurement: `.speed_vs(`, or the judge's own clock (`time.perf_counter`);
- the learner's process's word: `count_compilations(`, or a call of one of the file's
  `@in_learner_process` helpers (other than `forget_compiled_programs`, which only empties
  a cache), where the check asks for none of the above. A conservative count: a helper that
  returns values the judge compares with its own reference (16's models, 14's functions of
  the judge's) is counted here too, since the source cannot tell those from a measurement;
- value under a transformation: `.jit(`, `.vmap(`, `.grad(`, `.eagerly(`,
  `.keys_checked(` on `ex`;
- value: anything else (the learner's functions called plainly, judged against the
  check's own reference).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROGRAM, OUTSIDE, WORD, TRANSFORMED, VALUE = (
    "exported program",
    "outside measurement",
    "the learner's process's word",
    "value under jit/vmap/grad/disable_jit",
    "value",
)
KINDS = (VALUE, TRANSFORMED, PROGRAM, OUTSIDE, WORD)
PROGRAM_SIGNS = (
    ".exported(",
    ".equation_count(",
    "assert_each_key_used_once",
    "ExportedProgram.from_bytes(",
)
OUTSIDE_SIGNS = (".speed_vs(", "time.perf_counter")
WORD_SIGNS = ("count_compilations(",)
TRANSFORMED_SIGNS = (".jit(", ".vmap(", ".grad(", ".eagerly(", ".keys_checked(")
SETUP_HELPERS = {"forget_compiled_programs"}


def _is_helper(node: ast.FunctionDef) -> bool:
    return any(ast.unparse(d).endswith("in_learner_process") for d in node.decorator_list)


def classify_file(path: Path) -> dict[str, str]:
    """Each check of a check file (its test function's name) and the kind of evidence it
    rests on."""
    tree = ast.parse(path.read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    helpers = {name for name, node in functions.items() if _is_helper(node)}

    def reached(name: str, seen: set[str]) -> tuple[str, set[str]]:
        """The source a function runs on the judge's side, and the helpers it calls."""
        seen.add(name)
        node = functions[name]
        source, called = ast.unparse(node), set()
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

    kinds = {}
    for name in functions:
        if not name.startswith("test_"):
            continue
        source, called = reached(name, set())
        if any(sign in source for sign in PROGRAM_SIGNS):
            kinds[name] = PROGRAM
        elif any(sign in source for sign in OUTSIDE_SIGNS):
            kinds[name] = OUTSIDE
        elif any(sign in source for sign in WORD_SIGNS) or called - SETUP_HELPERS:
            kinds[name] = WORD
        elif any(sign in source for sign in TRANSFORMED_SIGNS):
            kinds[name] = TRANSFORMED
        else:
            kinds[name] = VALUE
    return kinds


def evidence_counts(repo: Path = REPO) -> dict[str, Counter[str]]:
    """Per exercise (by its check file), how many checks rest on each kind of evidence."""
    return {
        path.stem.removeprefix("test_"): Counter(classify_file(path).values())
        for path in sorted((repo / "checks").glob("test_*.py"))
    }


def markdown(counts: dict[str, Counter[str]]) -> str:
    exercises = list(counts)
    numbers = [e.split("_")[0] for e in exercises]
    lines = [
        f"| evidence | checks ({numbers[0]}–{numbers[-1]}) | in all |",
        "|---|---|---:|",
    ]
    for kind in KINDS:
        row = [counts[e][kind] for e in exercises]
        cells = ", ".join(str(n) if n else "–" for n in row)
        lines.append(f"| {kind} | {cells} | {sum(row)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown(evidence_counts()) + "\n")
