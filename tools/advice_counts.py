"""What advice each known wrong answer gets: LEADS, VAGUE, WRONG or RAW.

Grades every entry of tests/mistakes/ (the reference solution with the entry's code
appended, its first `fails` check alone: the check whose verdict the learner reads first)
and sorts what that check showed when the learner's code raised:

- LEADS: a diagnosis holding the entry's declared `advice` (the cause's name or its fix);
- VAGUE: the words the grader adds when no rule's evidence holds (what the check saw,
  no guess), where the entry declares `advice: None`;
- WRONG: a diagnosis naming another cause than the entry's `advice` (or any, where it
  declares None);
- RAW: the exception's text alone, with no explanation.

A check's own assertion (the learner's code returned a wrong value) speaks for itself and
is counted apart, as CHECK.

    python tools/advice_counts.py               # counts, then each entry that is not LEADS
    python tools/advice_counts.py --save F      # also write each entry's first check to F
    python tools/advice_counts.py --from F      # sort a saved run (an older commit's) anew
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MISTAKES = REPO / "tests" / "mistakes"
# The exceptions through which a check speaks in its own words.
CHECK_WORDS = ("AssertionError", "Failed", None)


def entries() -> list[tuple[str, dict]]:
    return [
        (path.stem, entry)
        for path in sorted(MISTAKES.glob("*.py"))
        for entry in runpy.run_path(str(path)).get("MISTAKES", [])
    ]


def first_checks() -> dict[str, dict]:
    """Each entry's first failing check as the learner reads it, by `exercise: name`."""
    from kata.course import load_course
    from kata.grading.processes import grading_environment
    from kata.grading.runner import grade
    from kata.grading.warm import WarmGrader, start_worker, stop_worker, wait_for_worker
    from kata.results import Limits

    course = load_course(REPO)
    env = grading_environment(course.state_dir)
    seen = {}
    with tempfile.TemporaryDirectory() as root:
        # One warm worker for every run: each forks it instead of starting JAX anew.
        socket_path = Path(root) / "w.sock"
        start_worker(socket_path, REPO, env)
        wait_for_worker(socket_path, seconds=120)
        warm = WarmGrader(socket_path, REPO, env)
        for number, (exercise_id, entry) in enumerate(entries()):
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
            seen[f"{exercise_id}: {entry['name']}"] = {
                "passed": check is None or check.passed,
                "exception": check and check.exception,
                "message": check.message[:400] if check else "",
                "diagnosis": check and check.diagnosis,
            }
            print(f"{number}: {exercise_id}: {entry['name'][:60]}", file=sys.stderr)
        stop_worker(socket_path)
    return seen


def kind(entry: dict, seen: dict) -> str:
    if seen["passed"]:
        return "PASSED"
    diagnosis = seen["diagnosis"]
    if diagnosis is None:
        return "CHECK" if seen["exception"] in CHECK_WORDS else "RAW"
    advice = entry.get("advice", "")
    if diagnosis.get("rule") == "unexplained":
        return "VAGUE" if advice is None else "WRONG"
    said = f"{diagnosis['cause']} {diagnosis['fix']}"
    return "LEADS" if advice and advice in said else "WRONG"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="write each entry's first check here")
    parser.add_argument("--from", dest="saved", type=Path, help="sort a saved run")
    options = parser.parse_args()
    seen = json.loads(options.saved.read_text()) if options.saved else first_checks()
    if options.save:
        options.save.write_text(json.dumps(seen, indent=1))
    counts: Counter[str] = Counter()
    for exercise_id, entry in entries():
        key = f"{exercise_id}: {entry['name']}"
        if key not in seen:
            continue
        found = kind(entry, seen[key])
        counts[found] += 1
        if found != "LEADS" and found != "CHECK":
            said = seen[key]["diagnosis"] or {"cause": seen[key]["message"][:160]}
            print(f"{found:6} {key}\n       {said['cause'][:200]}")
    print(" ".join(f"{k}={counts[k]}" for k in ("LEADS", "VAGUE", "WRONG", "RAW", "CHECK")))


if __name__ == "__main__":
    main()
