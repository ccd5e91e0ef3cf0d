"""One class of known wrong answers graded on the newest JAX and on the floor, check by check.

    python tools/same_class_on_the_floor.py FLOOR_PYTHON

FLOOR_PYTHON is the interpreter of an environment built from constraints/floor.txt (.ci/run
builds `.floor-venv` and runs this after the test suite). The class holds every entry of
tests/mistakes/ once, packed into as few submissions as hold them; it is graded with `kata
grade` by this Python and by FLOOR_PYTHON, and every check whose outcome or points differ
is graded again on both sides, and named. Exits 1 if any differs the same way both times: a
check that flips between versions for the same file is a defect in its threshold or its
reference. One that does not is named as a verdict left to a random draw or to the load.

Two keys of an entry narrow what is compared, each with its reason beside the entry:
`jax_from` (a mistake only from that JAX on: on older ones the same code is right, so the
entry is left out of the class), and `undecided` (checks whose verdict on this wrong answer
no threshold decides, such as a timing that sits between the eager and the compiled step's;
another check catches it, and those verdicts are not compared for the file holding it; nor
are the points of the other checks of its task, whose share it decides where the check that
catches the answer rests on the learner's process's word and is worth none).
Measured: 14 submissions, 151 exercise files, 8 min wall (~7 CPU-min on each side) for 16
exercises with both cores free.
"""

from __future__ import annotations

import ast
import json
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def defined_names(code: str) -> set[str]:
    tree = ast.parse(code)
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
    } | {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
         if isinstance(t, ast.Name)}  # fmt: skip


def compared_mistakes(listing: Path) -> list[dict]:
    """The entries of one tests/mistakes/ file that are wrong on every JAX kata allows."""
    return [e for e in runpy.run_path(str(listing)).get("MISTAKES", []) if "jax_from" not in e]


def mixed_class(root: Path) -> list[Path]:
    """Every known wrong answer of tests/mistakes/ in as few submissions as hold them: a
    file is the reference solution with several mistakes appended, never two that redefine
    the same name (each would hide the other)."""
    files: dict[int, dict[str, str]] = {}
    for listing in sorted((REPO / "tests" / "mistakes").glob("*.py")):
        reference = (REPO / "solutions" / f"{listing.stem}.py").read_text()
        packed: list[tuple[set[str], list[str]]] = []
        for entry in compared_mistakes(listing):
            names = defined_names(entry["code"])
            slot = next((s for s in packed if not s[0] & names), None)
            if slot is None:
                slot = (set(), [])
                packed.append(slot)
            slot[0].update(names)
            slot[1].append(entry["code"])
        for number, (_, codes) in enumerate(packed):
            files.setdefault(number, {})[listing.name] = "\n".join([reference, *codes])
    submissions = []
    for number, exercise_files in sorted(files.items()):
        folder = root / f"student{number:02d}"
        folder.mkdir(parents=True)
        for name, text in exercise_files.items():
            (folder / name).write_text(text)
        submissions.append(folder)
    return submissions


def check_names(exercise: str) -> dict[str, str]:
    """Each check function of `exercise` by the name a grade gives it (its docstring's first
    line, as kata's pytest plugin names it)."""
    tree = ast.parse((REPO / "checks" / f"test_{exercise}.py").read_text())
    return {
        node.name: (ast.get_docstring(node) or node.name).splitlines()[0]
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def undecided(submissions: list[Path]) -> set[tuple[str, str, str]]:
    """(submission, exercise, check name) of every verdict no threshold decides for the
    wrong answer that file holds (an entry's `undecided`)."""
    found = set()
    for listing in sorted((REPO / "tests" / "mistakes").glob("*.py")):
        names = check_names(listing.stem)
        for entry in compared_mistakes(listing):
            for folder in submissions:
                file = folder / listing.name
                if file.exists() and entry["code"] in file.read_text():
                    found |= {
                        (folder.name, listing.stem, names[c]) for c in entry.get("undecided", ())
                    }
    return found


def verdicts(python: str, submissions: list[Path], out: Path) -> dict[tuple[str, ...], tuple]:
    """Each check's outcome, points, message's first line and task, by submission, exercise
    and check."""
    out.mkdir()
    done = subprocess.run(
        [python, "-m", "kata", "--course", str(REPO), "grade", *map(str, submissions),
         "--out", str(out / "grades.csv"), "--json", str(out / "grades.json"), "--jobs", "2",
         # Time limits far above any check's time: what is compared is each verdict, and a
         # busy machine must not turn a slow one into a time-out on one side only (measured:
         # 07's `train` with a `step` that compiles on every call took over 60 s, the
         # default, on the newest and less on the floor, with load average 20 on 2 cores).
         "--timeout", "600", "--submission-timeout", "3600"],
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"kata grade failed on {python}:\n{done.stdout}{done.stderr}")
    graded = json.loads((out / "grades.json").read_text())["submissions"]
    return {
        (Path(entry["submission"]).name, exercise, check["name"]): (
            check["outcome"],
            check["score"],
            check["message"].splitlines()[0] if check["message"] else "",
            check["task"],
        )
        for entry in graded
        for exercise, scored in entry["exercises"].items()
        for check in scored["checks"]
    }


def differing(newest: dict, floor: dict, left_out: set) -> set[tuple[str, ...]]:
    """The verdicts whose outcome or points differ between the two gradings: only the
    outcome, in a task with a check `left_out` (`compared`)."""
    return {
        key
        for key in (newest.keys() | floor.keys()) - left_out
        if compared(key, newest, left_out) != compared(key, floor, left_out)
    }


def compared(key: tuple[str, ...], graded: dict, left_out: set) -> tuple:
    """What is compared of a verdict: its outcome, and its points unless a check of its
    task is left undecided, which then decides whether the task earns its share."""
    verdict = graded.get(key) or ()
    undecided_tasks = {(*k[:2], graded[k][3]) for k in left_out if k in graded}
    points_decided = not verdict or (*key[:2], verdict[3]) not in undecided_tasks
    return verdict[: 2 if points_decided else 1]


def regraded(submissions: list[Path], keys: set[tuple[str, ...]], root: Path) -> list[Path]:
    """Copies of the submissions holding only the exercise files `keys` name."""
    copies = []
    for folder in submissions:
        exercises = {key[1] for key in keys if key[0] == folder.name}
        if exercises:
            copy = root / folder.name
            copy.mkdir(parents=True)
            for exercise in exercises:
                shutil.copy(folder / f"{exercise}.py", copy / f"{exercise}.py")
            copies.append(copy)
    return copies


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    floor_python = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="kata-floor-class-") as folder:
        root = Path(folder)
        submissions = mixed_class(root / "class")
        left_out = undecided(submissions)
        newest = verdicts(sys.executable, submissions, root / "newest")
        floor = verdicts(floor_python, submissions, root / "floor")
        first = differing(newest, floor, left_out)
        # Each difference graded again on both sides: a version's flip comes back the same
        # way; a check's random draw or a load-bound timing (defects of another kind) need not.
        again = regraded(submissions, first, root / "again") if first else []
        newest_again = verdicts(sys.executable, again, root / "newest-again") if again else {}
        floor_again = verdicts(floor_python, again, root / "floor-again") if again else {}
    # Graded again as before on both sides: the same difference.
    flipped = {
        key
        for key in first
        if compared(key, newest_again, left_out) == compared(key, newest, left_out)
        and compared(key, floor_again, left_out) == compared(key, floor, left_out)
    }
    print(
        f"{len(newest)} verdicts on the newest, {len(floor)} on the floor, {len(left_out)} "
        f"left undecided by their entries, {len(flipped)} differ"
    )

    def shown(keys: set[tuple[str, ...]]) -> str:
        return json.dumps(
            {
                " / ".join(key): {
                    "newest": [newest.get(key), newest_again.get(key)],
                    "floor": [floor.get(key), floor_again.get(key)],
                }
                for key in sorted(keys)
            },
            indent=1,
        )

    if first - flipped:
        print(
            f"{len(first - flipped)} differed once and not the same way when graded again: a "
            "verdict left to a random draw or to the machine's load; make the check decide "
            "it\n" + shown(first - flipped)
        )
    if flipped:
        print(shown(flipped))
        sys.exit(1)


if __name__ == "__main__":
    main()
