"""Grading a class: synthetic submissions, hostile ones included, and every output format."""

import csv
import html
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kata.cli import cli
from kata.course import load_course
from kata.instructor import gradebook
from kata.results import Limits

from .helpers import MINI

GOOD_DRAW = (MINI / "solutions" / "01_demo.py").read_text().split("def draw", 1)[1]
HOSTILE = {
    "syntax_error": "def double(x)\n    return x\n",
    "endless_loop": "def double(x):\n    while True:\n        pass\n",
    "memory_bomb": "def double(x):\n    hog = bytearray(64 * 2**30)\n    return x * 2\n",
    "os_exit": "import os\n\ndef double(x):\n    os._exit(0)\n",
    "prints_100_mb": (
        "import sys\n\ndef double(x):\n    sys.stdout.write('x' * 100_000_000)\n    return x * 2\n"
    ),
}


def make_class(root: Path) -> dict[str, Path]:
    """A class of submissions: correct, partial, hostile, zipped and oddly nested."""
    solutions, stubs = MINI / "solutions", MINI / "exercises"
    paths = {}

    def folder(name: str, files: dict[str, str]) -> Path:
        path = root / name
        for relative, text in files.items():
            (path / relative).parent.mkdir(parents=True, exist_ok=True)
            (path / relative).write_text(text)
        paths[name] = path
        return path

    folder("correct", {f.name: f.read_text() for f in solutions.glob("*.py")})
    folder("partial", {"01_demo.py": (stubs / "01_demo.py").read_text(),
                       "02_other.py": (solutions / "02_other.py").read_text()})  # fmt: skip
    folder("only_one", {"02_other.py": (solutions / "02_other.py").read_text()})
    folder("nested", {"hw/kata/01_demo.py": (solutions / "01_demo.py").read_text(),
                      "02_other.py": (solutions / "02_other.py").read_text(),
                      "junk/notes.txt": "hello"})  # fmt: skip
    folder("forces_passes", {
        "01_demo.py": (stubs / "01_demo.py").read_text(),
        "conftest.py": "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n",
        "checks/test_01_demo.py": "def test_nothing():\n    pass\n",
    })  # fmt: skip
    for name, code in HOSTILE.items():
        folder(name, {"01_demo.py": "import jax\n\n" + code + "\ndef draw" + GOOD_DRAW,
                      "02_other.py": (solutions / "02_other.py").read_text()})  # fmt: skip
    zipped = root / "zipped.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for f in solutions.glob("*.py"):
            archive.write(f, f"submission/{f.name}")
        archive.writestr("../../escape/01_demo.py", "not this one")
    paths["zipped"] = zipped
    return paths


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    paths = make_class(root / "submissions")
    out, json_path = root / "grades.csv", root / "grades.json"
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", *map(str, paths.values()), "--out", str(out),
         "--json", str(json_path), "--report", str(root / "report.html"), "--jobs", "2",
         "--timeout", "5"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with out.open() as stream:
        rows = {short_name(row["submission"]): row for row in csv.DictReader(stream)}
    entries = {short_name(e["submission"]): e for e in gradebook.read_entries(json_path)}
    return rows, entries, root


def short_name(submission: str) -> str:
    """A submission's folder name (the gradebook names each by its whole path)."""
    return Path(submission).name.removesuffix(".zip")


@pytest.mark.slow
def test_the_class_report_and_the_json_gradebook_carry_the_same_numbers(graded_class):
    rows, _, root = graded_class
    numbers = json.loads((root / "grades.json").read_text())["class"]
    assert numbers["submissions"] == len(rows)
    causes = [c["label"] for c in numbers["causes"]]
    page = (root / "report.html").read_text()
    assert f"{len(rows)} students" in page and "<script" not in page
    assert all(html.escape(cause) in page for cause in causes)
    # A student is named by the whole path the instructor gave.
    kinds = {c["kind"]: [Path(s["name"]).name for s in c["students"]] for c in numbers["causes"]}
    assert kinds["timed out"] == ["endless_loop"] and kinds["crashed"] == ["os_exit"]
    assert kinds["out of memory"] == ["memory_bomb"]
    assert len(page) < 200_000  # 100 MB printed by one submission stays out of it


@pytest.mark.parametrize(
    ("submission", "demo", "other", "note"),
    [
        ("correct", "1", "1", ""),
        ("zipped", "1", "1", ""),
        ("nested", "1", "1", ""),
        ("partial", "0", "1", ""),
        ("only_one", "0", "1", "01_demo: missing"),
        ("forces_passes", "0", "0", "02_other: missing"),
        ("syntax_error", "0", "1", "SyntaxError"),
        ("endless_loop", "0", "1", ""),
        ("memory_bomb", "0", "1", ""),
        ("os_exit", "0", "1", ""),
        ("prints_100_mb", "1", "1", ""),
    ],
)
def test_each_submission_gets_its_grade_and_reason(graded_class, submission, demo, other, note):
    rows, _, _ = graded_class
    row = rows[submission]
    assert (row["01_demo"], row["02_other"]) == (demo, other), row
    assert row["max"] == "2"
    assert note in row["notes"]


@pytest.mark.parametrize(
    ("submission", "outcome", "reason"),
    [
        ("endless_loop", "failed", "Timeout"),
        ("memory_bomb", "failed", "MemoryError"),
        ("os_exit", "crashed", "exited with code 0 in the middle"),
    ],
)
def test_hostile_code_costs_only_its_own_checks(graded_class, submission, outcome, reason):
    _, entries, _ = graded_class
    first = entries[submission]["exercises"]["01_demo"]["checks"][0]
    assert first["outcome"] == outcome and reason in first["message"], first
    assert entries[submission]["exercises"]["02_other"]["score"] == 1


def test_resume_grades_only_what_is_missing(graded_class, tmp_path):
    rows, _, root = graded_class
    out = tmp_path / "grades.csv"
    shutil.copy(root / "grades.csv", out)
    extra = tmp_path / "latecomer"
    shutil.copytree(MINI / "solutions", extra)
    submissions = [str(root / "submissions" / "correct"), str(extra)]
    refused = CliRunner().invoke(
        cli, ["--course", str(MINI), "grade", *submissions, "--out", str(out)]
    )
    assert refused.exit_code == 2 and "--resume" in refused.output
    resumed = CliRunner().invoke(
        cli, ["--course", str(MINI), "grade", *submissions, "--out", str(out), "--resume"]
    )
    assert resumed.exit_code == 0, resumed.output
    with out.open() as stream:
        names = [short_name(row["submission"]) for row in csv.DictReader(stream)]
    assert names.count("correct") == 1 and names.count("latecomer") == 1
    assert len(names) == len(rows) + 1


def test_an_interrupted_run_keeps_the_rows_already_graded(tmp_path):
    course = load_course(MINI)
    paths = [shutil.copytree(MINI / "solutions", tmp_path / f"s{n}") for n in range(3)]
    out = tmp_path / "grades.csv"

    def interrupt(_graded):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        plan = gradebook.plan_class(course, paths, out, None, None)
        gradebook.grade_class(
            course, plan, out=out, json_path=None, jobs=1, limits=Limits(), on_graded=interrupt
        )
    with out.open() as stream:
        assert len(list(csv.DictReader(stream))) == 1


def test_zip_entries_are_never_written_outside_the_submission(graded_class):
    _, _, root = graded_class
    assert not (root / "escape").exists()


def check_format(course: Path, folder: Path, fmt: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kata", "--course", str(course), "check", "--dir", str(folder),
         "--format", fmt],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def partial_work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("partial")
    shutil.copy(MINI / "exercises" / "01_demo.py", folder)
    shutil.copy(MINI / "solutions" / "02_other.py", folder)
    return folder


def test_json_format_carries_verdicts_and_points(partial_work):
    done = check_format(MINI, partial_work, "json")
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert (document["score"], document["max_score"]) == (1.0, 2.0)
    demo = document["exercises"][0]
    assert demo["id"] == "01_demo" and not demo["passed"]
    assert {c["outcome"] for c in demo["checks"]} == {"failed"}


def test_junit_format_parses_and_counts_right(partial_work):
    done = check_format(MINI, partial_work, "junit")
    suites = ET.fromstring(done.stdout)
    assert (suites.get("tests"), suites.get("failures"), suites.get("errors")) == ("4", "3", "0")
    demo = suites.find("testsuite[@name='01_demo']")
    assert len(demo.findall("testcase")) == 3 and len(demo.findall("testcase/failure")) == 3


def assert_gradescope_results(document: dict) -> None:
    """The fields and types of Gradescope's autograder results specification."""
    assert isinstance(document["score"], float | int)
    assert isinstance(document["execution_time"], float | int)
    assert isinstance(document["output"], str)
    assert document["visibility"] in ("hidden", "after_due_date", "after_published", "visible")
    for test in document["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], float | int) and isinstance(test["max_score"], float | int)
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed")
        assert all(isinstance(tag, str) for tag in test["tags"])
        assert test["visibility"] in ("hidden", "after_due_date", "after_published", "visible")
    for entry in document.get("leaderboard", []):
        assert isinstance(entry["name"], str) and isinstance(entry["value"], float | int)
    assert abs(document["score"] - sum(t["score"] for t in document["tests"])) < 1e-6


def test_gradescope_format_follows_the_specification(partial_work):
    document = json.loads(check_format(MINI, partial_work, "gradescope").stdout)
    assert_gradescope_results(document)
    assert document["score"] == 1.0
    assert {t["status"] for t in document["tests"][:3]} == {"failed"}
    # 01_demo's `draw` rests on what the learner's process reports alone: no points.
    (draw,) = [t for t in document["tests"] if "draw" in t["name"]]
    assert draw["max_score"] == 0 and draw["output"].startswith("Feedback only, worth no points")


def test_a_check_on_the_learners_word_alone_earns_no_points_in_a_class(graded_class):
    """Solved, 01_demo's points are `double`'s: `draw` judges what the learner's process
    reported, so a forgery of that report is worth nothing."""
    _, entries, _ = graded_class
    checks = {c["name"]: c for c in entries["correct"]["exercises"]["01_demo"]["checks"]}
    draw = checks["draw: two different numbers from one key, no key reused"]
    assert draw["outcome"] == "passed" and draw["feedback_only"] and draw["max"] == 0
    assert sum(c["score"] for c in checks.values()) == 1


def test_gradescope_bundle_grades_an_upload(tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    archive = tmp_path / "autograder.zip"
    made = CliRunner().invoke(cli, ["--course", str(MINI), "gradescope-bundle", str(archive)])
    assert made.exit_code == 0, made.output
    with zipfile.ZipFile(archive) as bundle:
        names = bundle.namelist()
        assert "setup.sh" in names and "run_autograder" in names
        assert not any(name.startswith("course/solutions") for name in names)
        bundle.extractall(root / "source")
    upload = root / "submission" / "my-homework"
    upload.mkdir(parents=True)
    shutil.copy(MINI / "solutions" / "01_demo.py", upload)
    (root / "submission" / "conftest.py").write_text("raise SystemExit('no')\n")
    env = {"AUTOGRADER_ROOT": str(root), "KATA_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}
    subprocess.run(
        ["bash", str(root / "source" / "run_autograder")], env=env, check=True, timeout=300
    )
    document = json.loads((root / "results" / "results.json").read_text())
    assert_gradescope_results(document)
    assert document["score"] == 1.0  # 01_demo solved, 02_other missing


def test_memory_a_fork_shares_counts_once_past_the_limit():
    """What a run holds is read cheaply (RssAnon + RssShmem, a shared page in each process)
    and, past the limit, by proportional share, so that a forked learner's process and its
    starter do not count the judge's pages again (kata.supervisor.memory.tree_held_bytes)."""
    import numpy as np

    from kata.supervisor.memory import tree_held_bytes

    held = np.ones(32 * 2**20 // 8)  # 32 MiB, touched
    child = os.fork()
    if child == 0:
        time.sleep(5)
        os._exit(0)
    try:
        time.sleep(0.2)
        doubled = tree_held_bytes(os.getpid(), limit=2**62)
        once = tree_held_bytes(os.getpid())
        assert doubled - once > 24 * 2**20, (doubled, once)
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
    del held
