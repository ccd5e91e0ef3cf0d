"""The layout of src/kata (docs/architecture.md): a room (folder) per process role or side,
each importing only the rooms below it, no import circle among its modules, and rooms small
enough to read: at most 12 modules a folder, 800 lines a module, a fifth of kata a room."""

import ast
from pathlib import Path

import pytest

from .helpers import REPO

KATA = REPO / "src" / "kata"
# Top to bottom: a room imports only those after it. The modules at kata's top level are the
# foundation every room stands on (the course, results, versions, the grading platform).
ROOMS = (
    "cli",  # the command line: declares the commands
    "notebook",  # the %kata magics: the course in Jupyter or Colab
    "instructor",  # verify, grade a class, Gradescope, shards
    "reporting",  # what a grading becomes: text, JSON, JUnit, scores, uploads taken in
    "learning",  # the learner's session: progress, hints, recap, watching
    "supervisor",  # the trusted process that runs a grading and reads its verdicts
    "servers",  # kata's long-lived processes: the warm worker and the chip holder
    "judge",  # pytest in the run's container
    "checking",  # the check API, in the judge
    "learner_side",  # the process that imports the learner's code
    "isolation",  # containers, Landlock, limits, pausing, caches
    "handoffs",  # what crosses between processes: wire, events, seals, the chip's socket
    "diagnosis",  # JAX's errors in PyTorch terms
    "",  # the foundation
)
# What starts a process or loads kata as a whole: they may reach any room.
ENTRY_POINTS = {"__init__.py", "__main__.py"}


def room_of(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and (KATA / parts[1]).is_dir() else ""


def imported(module: Path) -> set[str]:
    """Every kata module or package `module` imports, lazily or not."""
    found = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kata"):
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("kata")}
    return found


def dotted(module: Path) -> str:
    parts = ("kata", *module.relative_to(KATA).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(KATA.rglob("*.py"))


def test_every_folder_of_kata_is_a_room():
    folders = {p.name for p in KATA.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(ROOMS) - {""}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: str(m.relative_to(KATA)))
def test_a_module_imports_only_its_room_and_those_below(module):
    if module.name in ENTRY_POINTS and module.parent == KATA:
        return
    here = ROOMS.index(room_of(dotted(module)))
    above = {name for name in imported(module) if ROOMS.index(room_of(name)) < here}
    assert not above, sorted(above)


def test_no_module_imports_itself_back():
    """No import circle, lazy imports included: a circle hides which module stands on
    which."""
    known = {dotted(m): m for m in MODULES}
    graph = {}
    for name, path in known.items():
        targets = {t if t in known else t.rpartition(".")[0] for t in imported(path)}
        graph[name] = {t for t in targets if t in known and t not in (name, "kata")}
    graph["kata"] = set()
    visiting, done, circles = [], set(), []

    def visit(node: str) -> None:
        if node in done:
            return
        if node in visiting:
            circles.append(visiting[visiting.index(node) :])
            return
        visiting.append(node)
        for target in sorted(graph[node]):
            visit(target)
        visiting.pop()
        done.add(node)

    for node in sorted(graph):
        visit(node)
    assert not circles, circles


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("module", MODULES, ids=lambda m: str(m.relative_to(KATA)))
def test_a_module_is_read_in_one_sitting(module):
    assert lines(module) <= 800


def test_rooms_stay_small_enough_to_read():
    total = sum(lines(m) for m in MODULES)
    for room in ROOMS:
        folder = KATA / room
        modules = sorted(folder.glob("*.py"))
        assert len(modules) <= 12 + len(ENTRY_POINTS & {m.name for m in modules}), room
        assert sum(lines(m) for m in modules) <= total / 5, room


# A function read at a glance, a class in one sitting: lines of code, its docstring aside.
FUNCTION_LINES, CLASS_LINES = 60, 300
# Each exception, with why it stays whole; one that shrinks under its bound leaves the list.
LARGER = {
    "checking/key_use.py:KeyFlow": "one walk over a program: every op kind reads and writes "
    "the same state (atoms, frames, keys folded)",
    "checking/key_use.py:_op": "the dispatch over StableHLO's op kinds, a short branch each",
    "checking/learner_calls.py:LearnerFunction": "the check API's one handle on a learner's "
    "function: a method per request a check may make",
    "checking/stablehlo_ops.py:move_words": "one short case per op that only moves words",
    "cli/instructor.py:grade_command": "kata grade's options, checked one clause each",
    "diagnosis/diagnose_spelling.py:torch_spelling": "the order in which a torch spelling is "
    "recognised, one clause a kind",
    "instructor/gradebook.py:grade_class": "a class's recipe, step by step",
    "isolation/seccomp.py:seccomp_program": "one BPF program, read top to bottom",
    "servers/worker.py:serve": "the worker's accept loop, a clause a request",
    "supervisor/runner.py:_ChildRun": "one child process of a run: its events, read and settled",
}


def code_lines(node: ast.AST) -> int:
    """Lines of `node` (a function or class), its docstring aside."""
    count = node.end_lineno - node.lineno + 1
    first = node.body[0] if node.body else None
    value = first.value if isinstance(first, ast.Expr) else None
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        count -= first.end_lineno - first.lineno + 1
    return count


def oversized() -> dict[str, int]:
    """Each function over FUNCTION_LINES and class over CLASS_LINES, by `path:name`."""
    found = {}
    for module in MODULES:
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            functions = (ast.FunctionDef, ast.AsyncFunctionDef)
            bound = FUNCTION_LINES if isinstance(node, functions) else CLASS_LINES
            if isinstance(node, (*functions, ast.ClassDef)) and code_lines(node) > bound:
                found[f"{module.relative_to(KATA)}:{node.name}"] = code_lines(node)
    return found


def test_functions_and_classes_stay_small_enough_to_read():
    found = oversized()
    assert set(found) - set(LARGER) == set(), {k: found[k] for k in set(found) - set(LARGER)}
    assert set(LARGER) - set(found) == set(), "back under the bound: remove it from LARGER"
