"""One class of known wrong answers graded on the newest JAX and on the floor, check by check.

    python tools/same_class_on_the_floor.py FLOOR_PYTHON

FLOOR_PYTHON is the interpreter of an environment built from constraints/floor.txt (.ci/run
builds `.floor-venv` and runs this after the test suite). The class holds every entry of
tests/mistakes/ once, packed into as few submissions as hold them; it is graded with `kata
grade` by this Python and by FLOOR_PYTHON, and every check whose outcome or points differ
is named. Exits 1 if any does: a check that flips between versions for the same file is a
defect in its threshold or its reference. Measured: 12 submissions, 100 exercise files,
~200 CPU-s on each side for 12 exercises.
"""

from __future__ import annotations

import ast
import json
import runpy
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


def mixed_class(root: Path) -> list[Path]:
    """Every known wrong answer of tests/mistakes/ in as few submissions as hold them: a
    file is the reference solution with several mistakes appended, never two that redefine
    the same name (each would hide the other)."""
    files: dict[int, dict[str, str]] = {}
    for listing in sorted((REPO / "tests" / "mistakes").glob("*.py")):
        reference = (REPO / "solutions" / f"{listing.stem}.py").read_text()
        packed: list[tuple[set[str], list[str]]] = []
        for entry in runpy.run_path(str(listing)).get("MISTAKES", []):
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


def verdicts(python: str, submissions: list[Path], out: Path) -> dict[tuple[str, ...], tuple]:
    """Each check's outcome and points, by submission, exercise and check."""
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
        )
        for entry in graded
        for exercise, scored in entry["exercises"].items()
        for check in scored["checks"]
    }


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    floor_python = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="kata-floor-class-") as folder:
        root = Path(folder)
        submissions = mixed_class(root / "class")
        newest = verdicts(sys.executable, submissions, root / "newest")
        floor = verdicts(floor_python, submissions, root / "floor")
    flipped = {
        " / ".join(key): {"newest": newest.get(key), "floor": floor.get(key)}
        for key in newest.keys() | floor.keys()
        if (newest.get(key) or ())[:2] != (floor.get(key) or ())[:2]
    }
    print(f"{len(newest)} verdicts on the newest, {len(floor)} on the floor, {len(flipped)} differ")
    if flipped:
        print(json.dumps(flipped, indent=1))
        sys.exit(1)


if __name__ == "__main__":
    main()
