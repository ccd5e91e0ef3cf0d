"""What advice each known wrong answer gets: LEADS, VAGUE, WRONG or RAW.

Grades every entry of tests/mistakes/ (the reference solution with the entry's code
appended, its first `fails` check alone: the check whose verdict the learner reads first)
and sorts what that check showed when the learner's code raised:

- LEADS: a diagnosis holding the entry's declared `advice` (the cause's name or its fix);
- VAGUE: generic words, naming no cause: those the grader adds when no rule's evidence
  holds (the library call the line makes and its signature, no guess), or a timeout's;
- WRONG: a rule's diagnosis without the entry's `advice`: it names another cause (any
  cause, where the entry declares None);
- RAW: the exception's text alone, with no explanation.

A check's own assertion (the learner's code returned a wrong value) speaks for itself and
is counted apart: FACTOR where it says what relates the wrong value to the right one (a
factor every element shares, a step's factor, a unit: kata.checking.expect.how_it_is_off
and the checks' own), else CHECK. Over the 298 entries, against the advice they declare: main
b8ed851 LEADS=59 VAGUE=2 WRONG=4 RAW=3 (CHECK=230); after issue #49's evidence rules and
signature reads LEADS=64 VAGUE=2 WRONG=0 RAW=0 (CHECK=232; two no-jit entries timed out in
the first run and spoke through their checks in the second: load decides which). Over 393
entries at 7db9845 (issue #58: a loop's rounds counted, dropped results named with their
line), LEADS=83 VAGUE=3 WRONG=0 RAW=1 FACTOR=10 CHECK=296 (10.5 minutes, both cores shared);
the RAW one is 08's `math.log2(0)` of an empty row, whose entry declares no advice.

    python tools/advice_counts.py               # counts, then each entry that is not LEADS
    python tools/advice_counts.py --save F      # also write each entry's first check to F
    python tools/advice_counts.py --from F      # sort a saved run (an older commit's) anew
    python tools/advice_counts.py --again F     # grade anew only what raised in run F: a
                                                # check's own assertion does not depend on
                                                # the diagnosis
    python tools/advice_counts.py --again F --only "05_prng: random_walk"   # those alone
"""

from __future__ import annotations

import argparse
import json
import re
import runpy
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MISTAKES = REPO / "tests" / "mistakes"
# The exceptions through which a check speaks in its own words (EndlessProgram: the
# grader's, an AssertionError, for a compiled program that never ends).
CHECK_WORDS = ("AssertionError", "Finding", "Failed", "EndlessProgram", None)
# Rules whose words name no cause: the library call and its signature (no rule's evidence
# held), a check that ran out of time.
GENERIC_RULES = ("library_call", "timeout")
# What a check's own words say when they name the relation of a wrong value to the right
# one (kata.checking.expect.how_it_is_off, how_the_step_is_off; 10's unit of time).
FACTOR_WORDS = re.compile(
    r"every value (?:is|has)|its step (?:is|goes)|expected value transposed|"
    r"where seconds were asked"
)


def entries() -> list[tuple[str, dict]]:
    return [
        (path.stem, entry)
        for path in sorted(MISTAKES.glob("*.py"))
        for entry in runpy.run_path(str(path)).get("MISTAKES", [])
    ]


def first_checks(kept: dict[str, dict]) -> dict[str, dict]:
    """Each entry's first failing check as the learner reads it, by `exercise: name`
    (those in `kept` as they are there)."""
    from kata.course import load_course
    from kata.results import Limits
    from kata.servers.warm import WarmGrader, start_worker, stop_worker, wait_for_worker
    from kata.supervisor.judge_process import grading_environment
    from kata.supervisor.runner import grade

    course = load_course(REPO)
    env = grading_environment(course.state_dir)
    seen = {}
    with tempfile.TemporaryDirectory() as root:
        # One warm worker for every run: each forks it instead of starting JAX anew.
        socket_path = Path(root) / "w.sock"
        start_worker(socket_path, REPO, env)
        wait_for_worker(socket_path, seconds=120)
        warm = WarmGrader(socket_path, REPO, env)
        try:
            for number, (exercise_id, entry) in enumerate(entries()):
                key = f"{exercise_id}: {entry['name']}"
                if key in kept:
                    seen[key] = kept[key]
                    continue
                folder = Path(root) / str(number)
                folder.mkdir()
                reference = (course.solutions_dir / f"{exercise_id}.py").read_text()
                (folder / f"{exercise_id}.py").write_text(reference + "\n" + entry["code"])
                first = entry["fails"][0]
                graded = grade(
                    course, [course.resolve(exercise_id)], folder, Limits(check_seconds=60),
                    warm=warm, only=[first],
                ).results[0]  # fmt: skip
                check = next((c for c in graded.checks if c.id.endswith(first)), None)
                seen[key] = {
                    "passed": check is None or check.passed,
                    "exception": check and check.exception,
                    "message": check.message[:2000] if check else "",
                    "line": check and check.location and check.location["code"],
                    "diagnosis": check and check.diagnosis,
                }
                print(f"{number}: {exercise_id}: {entry['name'][:60]}", file=sys.stderr)
        finally:
            stop_worker(socket_path)
    return seen


def kind(entry: dict, seen: dict) -> str:
    if seen["passed"]:
        return "PASSED"
    diagnosis = seen["diagnosis"]
    if diagnosis is None:
        if seen["exception"] not in CHECK_WORDS:
            return "RAW"
        return "FACTOR" if FACTOR_WORDS.search(seen["message"]) else "CHECK"
    if diagnosis.get("rule") in GENERIC_RULES:
        return "VAGUE"
    advice = entry.get("advice")
    return "LEADS" if advice and advice in f"{diagnosis['cause']} {diagnosis['fix']}" else "WRONG"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="write each entry's first check here")
    parser.add_argument("--from", dest="saved", type=Path, help="sort a saved run")
    parser.add_argument("--again", type=Path, help="grade anew what raised in this run")
    parser.add_argument(
        "--only", action="append", default=[], help="with --again: grade anew only entries "
        "whose `exercise: name` holds this (repeatable), keeping the rest of that run"
    )  # fmt: skip
    options = parser.parse_args()
    if options.saved:
        seen = json.loads(options.saved.read_text())
    else:
        earlier = json.loads(options.again.read_text()) if options.again else {}
        kept = {
            key: said
            for key, said in earlier.items()
            if said["passed"]
            or (said["exception"] in CHECK_WORDS and not said["diagnosis"])
            or (options.only and not any(fragment in key for fragment in options.only))
        }
        seen = first_checks(kept)
    if options.save:
        options.save.write_text(json.dumps(seen, indent=1))
    counts: Counter[str] = Counter()
    for exercise_id, entry in entries():
        key = f"{exercise_id}: {entry['name']}"
        if key not in seen:
            continue
        found = kind(entry, seen[key])
        counts[found] += 1
        if found not in ("LEADS", "CHECK", "FACTOR"):
            said = seen[key]["diagnosis"] or {"cause": seen[key]["message"][:160]}
            print(f"{found:6} {key}\n       {said['cause'][:200]}")
    kinds = ("LEADS", "VAGUE", "WRONG", "RAW", "FACTOR", "CHECK")
    print(" ".join(f"{k}={counts[k]}" for k in kinds))


if __name__ == "__main__":
    main()
