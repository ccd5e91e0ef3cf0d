"""Which of an exercise's checks a change to its reference solution can reach.

A right answer in tests/mistakes/ replaces one or two functions of the reference solution,
which every check already passes (`kata verify`). A check whose code, and whose learner's
functions' code, never meets a replaced name runs the reference unchanged, so it can only
pass again; grading it again proves nothing new. Read from the sources, erring towards
"reached": a name counts as met wherever it appears in a check (an attribute, a variable,
a string, as `getattr(ex, "name")` takes it), in a helper or fixture of the check file the
check names, and in a solution function that meets one.

    python tools/checks_reached.py    # per exercise: checks reached by each right answer
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# A check that reads a module's names this way can reach any of them.
ANY_NAME = {"dir", "vars", "__dict__", "inspect"}


def _top_level(tree: ast.Module) -> dict[str, ast.AST]:
    """Each name a module binds at its top level, and the statement that binds it."""
    bound: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound[node.name] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bound[(alias.asname or alias.name).split(".")[0]] = node
        else:
            for target in _targets(node):
                bound[target] = node
    return bound


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        found = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        found = [node.target]
    else:
        return []
    return [name.id for target in found for name in ast.walk(target) if isinstance(name, ast.Name)]


def _mentions(node: ast.AST) -> set[str]:
    """Every name, attribute and string (each word of it) that `node` holds."""
    found = set()
    for part in ast.walk(node):
        if isinstance(part, ast.Name):
            found.add(part.id)
        elif isinstance(part, ast.Attribute):
            found.add(part.attr)
        elif isinstance(part, ast.arg):
            found.add(part.arg)
        elif isinstance(part, ast.Constant) and isinstance(part.value, str):
            found.update(part.value.replace(".", " ").split())
    return found


def replaced_names(exercise: str, code: str) -> set[str]:
    """The reference's names that `code`, appended to it, binds anew, and the names of its
    functions that meet one of them (at any depth)."""
    reference = ast.parse((REPO / "solutions" / f"{exercise}.py").read_text())
    ours = _top_level(reference)
    theirs = _top_level(ast.parse(code))
    changed = {
        name
        for name, node in theirs.items()
        if name not in ours or ast.dump(node) != ast.dump(ours[name])
    }
    uses = {name: _mentions(node) for name, node in ours.items()}
    while True:
        more = {name for name, met in uses.items() if met & changed} - changed
        if not more:
            return changed
        changed |= more


def checks_reached(exercise: str, code: str) -> set[str]:
    """The check functions of `exercise` that can see `code` appended to its reference."""
    changed = replaced_names(exercise, code)
    checks = ast.parse((REPO / "checks" / f"test_{exercise}.py").read_text())
    helpers = _top_level(checks)
    reached = set()
    for name, node in helpers.items():
        if not name.startswith("test_"):
            continue
        seen, met, waiting = set(), set(), [node]
        while waiting:
            mentioned = _mentions(waiting.pop())
            met |= mentioned
            for helper in mentioned & helpers.keys() - seen:
                seen.add(helper)
                waiting.append(helpers[helper])
        if met & (changed | ANY_NAME):
            reached.add(name)
    return reached


def main() -> None:
    for path in sorted((REPO / "tests" / "mistakes").glob("*.py")):
        exercise = path.stem
        checks = ast.parse((REPO / "checks" / f"test_{exercise}.py").read_text())
        total = sum(name.startswith("test_") for name in _top_level(checks))
        for entry in runpy.run_path(str(path)).get("CORRECT", []):
            reached = checks_reached(exercise, entry["code"])
            print(f"{exercise} {len(reached):2}/{total} {entry['name'][:60]}")


if __name__ == "__main__":
    sys.exit(main())
