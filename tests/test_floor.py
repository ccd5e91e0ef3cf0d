"""The course on the oldest versions kata allows (constraints/floor.txt) grades as it does on
the newest: `kata verify` passes there, and one class of known wrong answers scores the same,
check by check, on both. A check that flips between versions for the same file is a defect
in its threshold or its reference.

The floor environment is another interpreter (`KATA_FLOOR_PYTHON`, which .ci/run builds with
`pip install -e . -c constraints/floor.txt`); without it these tests skip, and under CI fail.
"""

import ast
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from kata.course import load_course

from .helpers import REPO

pytestmark = pytest.mark.slow

FLOOR_VARIABLE = "KATA_FLOOR_PYTHON"
COURSE = load_course(REPO)


@pytest.fixture(scope="module")
def floor_python() -> str:
    python = os.environ.get(FLOOR_VARIABLE)
    if not python:
        message = f"no floor environment: set {FLOOR_VARIABLE} (.ci/run builds one)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python


def test_the_floor_environment_holds_the_floor(floor_python):
    """Else every other test here proves nothing about the floor."""
    wanted = {}
    for line in (REPO / "constraints" / "floor.txt").read_text().splitlines():
        text = line.split("#")[0].strip()
        if text:
            requirement = Requirement(text)
            wanted[requirement.name] = (str(requirement.specifier), str(requirement.marker or ""))
    probe = (
        "import json, sys, importlib.metadata as m\n"
        "from packaging.markers import Marker\n"
        "wanted = json.loads(sys.argv[1])\n"
        "print(json.dumps({n: m.version(n) for n, (_, marker) in wanted.items()"
        " if not marker or Marker(marker).evaluate()}))\n"
    )
    done = subprocess.run(
        [floor_python, "-c", probe, json.dumps(wanted)], capture_output=True, text=True, check=True
    )
    installed = json.loads(done.stdout)
    assert installed, done.stdout
    for name, version in installed.items():
        assert wanted[name][0] == f"=={version}", (name, version)


def test_verify_passes_on_the_floor(floor_python):
    done = subprocess.run(
        [floor_python, "-m", "kata", "--course", str(REPO), "verify"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


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
        reference = (COURSE.solutions_dir / f"{listing.stem}.py").read_text()
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
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
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


# The class is graded twice: 11 submissions, 199 CPU-seconds on the floor (measured: 182 s
# user, 16 s system), about as much on the newest; some 3.5 minutes on 2 cores of their
# own, 25 minutes on this project's shared machine at load average 20.
@pytest.mark.timeout(1800)
def test_a_class_of_wrong_answers_scores_the_same_on_the_floor_and_the_newest(
    floor_python, tmp_path
):
    submissions = mixed_class(tmp_path / "class")
    newest = verdicts(sys.executable, submissions, tmp_path / "newest")
    floor = verdicts(floor_python, submissions, tmp_path / "floor")
    assert newest.keys() == floor.keys()
    flipped = {
        key: {"newest": newest[key], "floor": floor[key]}
        for key in newest
        if newest[key][:2] != floor[key][:2]
    }
    assert not flipped, json.dumps({" / ".join(k): v for k, v in flipped.items()}, indent=1)
