"""docs/evidence.md's table of evidence says what the checks' source says
(tools/evidence_table.py)."""

import ast
import re
import sys

from kata.supervisor.evidence import KINDS, VALUE, WORD, classify_file, is_builder

from .helpers import REPO

EVIDENCE = REPO / "docs" / "evidence.md"  # the evidence model, and its table

sys.path.insert(0, str(REPO / "tools"))
from evidence_table import caught_on_word_alone, evidence_counts, word_alone_line  # noqa: E402

# The evidence page's rows, in the table's order, by the kind of evidence each counts.
ROWS = (
    "a value, called plainly",
    "a value under a transformation",
    "a value under `jit`",
    "compiled code",
    "what a call printed",
)


def table_counts() -> list[list[int]]:
    text = EVIDENCE.read_text()
    rows = []
    for start in ROWS:
        line = next(line for line in text.splitlines() if line.startswith(f"| {start}"))
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append([0 if n == "–" else int(n) for n in re.split(r",\s*", cells[3])])
    return rows


def test_the_evidence_table_counts_what_the_checks_ask_for():
    counts = evidence_counts()
    derived = [[counts[exercise][kind] for exercise in counts] for kind in KINDS]
    update = "run python tools/evidence_table.py and update docs/evidence.md"
    assert table_counts() == derived, update


def test_every_check_is_counted_once():
    counts = evidence_counts()
    checks = sum(len(re.findall(r"^def test_", p.read_text(), re.MULTILINE))
                 for p in (REPO / "checks").glob("test_*.py"))  # fmt: skip
    assert sum(sum(c.values()) for c in counts.values()) == checks


def test_the_evidence_page_counts_the_wrong_answers_caught_on_the_learners_word_alone():
    line = word_alone_line(caught_on_word_alone())
    assert line in EVIDENCE.read_text(), f"docs/evidence.md should say: {line}"


def test_a_builder_never_reads_the_learners_module():
    """`@builds_in_learner_process` helpers count for nothing (a check on one is judged by
    what the learner's code returns for what it built): each leaves its first parameter, the
    learner's module, unused."""
    builders = 0
    for path in sorted((REPO / "checks").glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and is_builder(node):
                builders += 1
                module = node.args.args[0].arg
                read = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == module]
                assert not read, f"{path.name}: {node.name} reads the learner's module"
    assert builders, "no builder to hold to it"


def test_what_a_call_printed_is_the_learners_word_beside_a_value(tmp_path):
    """Read through either of pytest's capture fixtures, printed text is what the learner's
    process wrote: a check on it earns no points, even where it also holds a value."""
    checks = tmp_path / "test_prints.py"
    checks.write_text(
        "def test_value(ex):\n    assert ex.f(1) == 2\n\n"
        "def test_prints(ex, capsys):\n"
        "    assert ex.f(1) == 2\n    assert capsys.readouterr().out\n\n"
        "def test_prints_to_the_fd(ex, capfd):\n"
        "    ex.f(1)\n    assert capfd.readouterr().out\n"
    )
    kinds = classify_file(checks)
    assert kinds == {"test_value": VALUE, "test_prints": WORD, "test_prints_to_the_fd": WORD}
