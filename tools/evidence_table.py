"""Per exercise, how many checks rest on each kind of evidence, read from the checks' source.

    python tools/evidence_table.py          # docs/evidence.md's table rows, in Markdown, and
                                            # its count of wrong answers caught on the
                                            # learner's process's word alone

What each check rests on is read from its source by kata.supervisor.evidence, which says how.
"""

from __future__ import annotations

import runpy
import sys
from collections import Counter
from pathlib import Path

from kata.supervisor.evidence import KINDS, WORD_OF_THE_PROCESS, classify_file

REPO = Path(__file__).resolve().parents[1]


def evidence_counts(repo: Path = REPO) -> dict[str, Counter[str]]:
    """Per exercise (by its check file), how many checks rest on each kind of evidence."""
    return {
        path.stem.removeprefix("test_"): Counter(classify_file(path).values())
        for path in sorted((repo / "checks").glob("test_*.py"))
    }


def caught_on_word_alone(repo: Path = REPO) -> dict[str, tuple[int, int]]:
    """Per exercise, how many of its known wrong answers (tests/mistakes/) fail only checks
    that rest on the learner's process's word, and how many it lists: the answers a
    forgery of that word could carry to the point."""
    caught = {}
    for path in sorted((repo / "checks").glob("test_*.py")):
        exercise, kinds = path.stem.removeprefix("test_"), classify_file(path)
        listed = runpy.run_path(str(repo / "tests" / "mistakes" / f"{exercise}.py"))["MISTAKES"]
        alone = sum(
            1 for mistake in listed if {kinds[c] for c in mistake["fails"]} <= WORD_OF_THE_PROCESS
        )
        caught[exercise] = (alone, len(listed))
    return caught


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


def word_alone_line(caught: dict[str, tuple[int, int]]) -> str:
    """docs/evidence.md's line: known wrong answers caught on the learner's process's word alone."""
    alone = sum(n for n, _ in caught.values())
    listed = sum(total for _, total in caught.values())
    cells = ", ".join(str(n) if n else "–" for n, _ in caught.values())
    return f"Known wrong answers caught on that word alone: {alone} of {listed} ({cells})."


if __name__ == "__main__":
    sys.stdout.write(markdown(evidence_counts()) + "\n\n")
    sys.stdout.write(word_alone_line(caught_on_word_alone()) + "\n")
