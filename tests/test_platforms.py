"""Grading where classes are: Gradescope's default image, Classroom 50, plain GitHub Actions,
and the class report (its numbers, its escaping, and the page in a real browser)."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kata.cli import cli
from kata.instructor import class_report

from .helpers import MINI, REPO

# The six submissions of a made-up class: per exercise, its score and its checks as
# (name, outcome, diagnosis, measured speedup). "02_b" is missing from s3.
IN_PLACE = "an in-place write on a JAX array"
CONCRETE = "a Python `if` on a traced value"


def check(name, outcome="passed", diagnosis=None, speedup=None):
    return {
        "name": name,
        "task": None,
        "outcome": outcome,
        "score": 0.5 if outcome == "passed" else 0.0,
        "max": 0.5,
        "speed": name == "speed",
        "speedup": speedup,
        "diagnosis": diagnosis,
        "message": "" if outcome == "passed" else f"{outcome}: {diagnosis or 'assert'}",
    }


def entry(name, exercises):
    scored = {
        exercise_id: {
            "score": sum(c["score"] for c in checks),
            "max": 1.0,
            "concept": "c",
            "note": None if checks else "missing: no file submitted",
            "checks": checks,
        }
        for exercise_id, checks in exercises.items()
    }
    total = sum(e["score"] for e in scored.values())
    return {"submission": name, "total": total, "max": 2.0, "seconds": 1.0, "notes": [],
            "exercises": scored}  # fmt: skip


def six_submissions():
    failed = "failed"
    return [
        entry("s1", {"01_a": [check("c1"), check("c2")],
                     "02_b": [check("speed", speedup=20.0), check("s2")]}),
        entry("s2", {"01_a": [check("c1"), check("c2", failed, IN_PLACE)],
                     "02_b": [check("speed", speedup=12.0), check("s2")]}),
        entry("s3", {"01_a": [check("c1", failed, IN_PLACE), check("c2", failed, IN_PLACE)],
                     "02_b": []}),
        entry("s4", {"01_a": [check("c1"), check("c2")],
                     "02_b": [check("speed", failed, speedup=2.0), check("s2")]}),
        entry("s5", {"01_a": [check("c1", failed, CONCRETE), check("c2")],
                     "02_b": [check("speed", speedup=30.0), check("s2")]}),
        entry("s6", {"01_a": [check("c1"), check("c2")],
                     "02_b": [check("speed", speedup=15.0), check("s2")]}),
    ]  # fmt: skip


def test_class_numbers_of_six_made_up_submissions():
    numbers = class_report.class_numbers(six_submissions())
    assert (numbers["submissions"], numbers["max_score"]) == (6, 2.0)
    scores = numbers["scores"]  # totals 2, 1.5, 0, 1.5, 1.5, 2
    assert (scores["mean"], scores["median"], scores["min"], scores["max"]) == (
        1.4167,
        1.5,
        0.0,
        2.0,
    )
    counts = [b["count"] for b in scores["histogram"]]
    assert counts == [1, 0, 0, 0, 0, 0, 0, 3, 0, 2]  # 0.2-wide bins; 2.0 is in the last
    exercises = {e["id"]: e for e in numbers["exercises"]}
    assert (exercises["01_a"]["solved"], exercises["01_a"]["share"]) == (3, 0.5)
    assert (exercises["02_b"]["solved"], exercises["02_b"]["share"]) == (4, 0.6667)
    assert (exercises["01_a"]["mean_score"], exercises["02_b"]["mean_score"]) == (0.6667, 0.75)
    checks = {(c["exercise"], c["check"]): c for c in numbers["checks"]}
    assert (checks["01_a", "c1"]["passed"], checks["01_a", "c1"]["ran"]) == (4, 6)
    assert (checks["02_b", "speed"]["passed"], checks["02_b", "speed"]["ran"]) == (4, 5)
    assert checks["02_b", "speed"]["share"] == 0.8
    assert [(d["cause"], d["count"]) for d in numbers["diagnoses"]] == [
        (IN_PLACE, 3),
        (CONCRETE, 1),
    ]
    assert numbers["diagnoses"][0]["example"]["submission"] == "s2"
    (speedups,) = numbers["speedups"]
    assert (speedups["count"], speedups["min"], speedups["median"], speedups["max"]) == (
        5,
        2.0,
        15.0,
        30.0,
    )


HOSTILE_NAME = "<script>alert('name')</script>&\"x\".zip"
HOSTILE_MESSAGE = "</pre><img src=x onerror=alert(1)>" + "y" * 100_000


def hostile_class():
    submissions = six_submissions()
    submissions[1]["submission"] = HOSTILE_NAME
    submissions[1]["exercises"]["01_a"]["checks"][1]["message"] = HOSTILE_MESSAGE
    submissions[2]["exercises"]["01_a"]["checks"][0]["diagnosis"] = "<b onclick=x>bold</b>"
    return submissions


def test_the_report_escapes_everything_a_submission_wrote():
    page = class_report.render_html(class_report.class_numbers(hostile_class()), "<i>t</i>")
    assert "<script" not in page and "<img" not in page and "<b " not in page
    assert "&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;" in page
    assert "&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert len(page) < 60_000  # the huge message is cut to an example's length
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched from anywhere


def chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and not os.environ.get("CI"):
        pytest.skip("chromium is not installed (CI installs it: .ci/run)")
    assert found, "CI needs chromium: apt-get install -y chromium"
    return found


def test_the_report_reads_in_a_real_browser(tmp_path):
    browser = chromium()
    page = tmp_path / "report.html"
    page.write_text(class_report.render_html(class_report.class_numbers(hostile_class())))
    shot = tmp_path / "report.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1100,1600"]
    shown = subprocess.run(
        [browser, *flags, f"--screenshot={shot}", page.as_uri()],
        capture_output=True, timeout=120,
    )  # fmt: skip
    assert shot.stat().st_size > 10_000, shown.stderr
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    assert len(re.findall(r"<rect class=\"bin\"", dom)) == class_report.HISTOGRAM_BINS
    assert len(re.findall(r"class=\"share-bar\"", dom)) == 2 + 4  # 2 exercises, 4 checks
    assert len(re.findall(r"<circle class=\"speedup\"", dom)) == 5
    assert "6 submissions · mean 1.4167 · median 1.5" in dom
    assert "<script" not in dom and "<img" not in dom
    assert HOSTILE_NAME.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in dom


# Classroom 50 ---------------------------------------------------------------------


def assert_classroom50_result(document: dict) -> None:
    """The `classroom50/result/v1` fields and types that Classroom 50's collector checks."""
    assert document["schema"] == "classroom50/result/v1"
    for field in ("score", "max-score"):
        value = document[field]
        assert isinstance(value, int) and not isinstance(value, bool) and value >= 0
    assert document["score"] <= document["max-score"]
    assert isinstance(document["tests"], list) and document["tests"]
    for test in document["tests"]:
        assert isinstance(test["test-name"], str) and test["test-name"]
        assert isinstance(test["passed"], bool)
        for field in ("score", "max-score"):
            assert isinstance(test[field], int) and not isinstance(test[field], bool)
        assert 0 <= test["score"] <= test["max-score"]
    assert document["score"] == sum(t["score"] for t in document["tests"])
    assert document["max-score"] == sum(t["max-score"] for t in document["tests"])


RUNNER_ENV = {
    "CLASSROOM": "jax-101",
    "ASSIGNMENT": "kata",
    "SUBMISSION_TAG": "submit/2026-06-01T14-32-05Z-a1b2c3d",
    "COMMIT_URL": "https://github.com/org/repo/commit/abc",
    "RELEASE_URL": "https://github.com/org/repo/releases/tag/submit%2F1",
}


def test_classroom50_format_follows_the_schema(tmp_path):
    shutil.copy(MINI / "exercises" / "01_demo.py", tmp_path)  # fails all three checks
    shutil.copy(MINI / "solutions" / "02_other.py", tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "kata", "--course", str(MINI), "check", "--cold", "--dir",
         str(tmp_path), "--format", "classroom50"],
        capture_output=True, text=True, timeout=300, env={**os.environ, **RUNNER_ENV},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert_classroom50_result(document)
    assert (document["score"], document["max-score"]) == (100, 200)
    demo, other = document["tests"]
    assert (demo["passed"], demo["score"], demo["checks-passed"]) == (False, 0, "0 of 3")
    assert (other["passed"], other["score"], other["points"]) == (True, 100, 1.0)
    assert document["submission"] == RUNNER_ENV["SUBMISSION_TAG"]
    assert document["review"] == RUNNER_ENV["COMMIT_URL"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", document["datetime"])


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundle")
    archive = folder / "autograder.zip"
    made = CliRunner().invoke(cli, ["--course", str(MINI), "gradescope-bundle", str(archive)])
    assert made.exit_code == 0, made.output
    with zipfile.ZipFile(archive) as bundle:
        bundle.extractall(folder / "source")
    return folder / "source"


def test_classroom50_autograder_grades_a_student_checkout(bundle_dir, tmp_path):
    autograders = tmp_path / "jax-101" / "autograders" / "kata"
    shutil.copytree(bundle_dir, autograders)
    shutil.copy(REPO / "classroom" / "autograder.py", autograders)
    student = tmp_path / "student"
    (student / "exercises").mkdir(parents=True)
    shutil.copy(MINI / "solutions" / "01_demo.py", student / "exercises")
    shutil.copy(MINI / "exercises" / "02_other.py", student / "exercises")
    (student / "conftest.py").write_text("raise SystemExit('not graded')\n")
    done = subprocess.run(
        [sys.executable, str(autograders / "autograder.py")],
        cwd=student, capture_output=True, text=True, timeout=300,
        env={**os.environ, **RUNNER_ENV},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads((student / "result.json").read_text())
    assert_classroom50_result(document)
    assert (document["score"], document["classroom"]) == (100, "jax-101")


def workflow_steps(text: str) -> list[dict[str, str]]:
    """The steps of a one-job workflow, read line by line (no YAML library needed)."""
    steps: list[dict[str, str]] = []
    for line in text.splitlines():
        item = re.match(r"^      - (\w[\w-]*): (.*)$", line)
        field = re.match(r"^        (\w[\w-]*): (.*)$", line)
        if item:
            steps.append({item.group(1): item.group(2)})
        elif field and steps:
            steps[-1][field.group(1)] = field.group(2)
    return steps


def test_the_github_actions_workflow_grades_uploads_and_summarises():
    text = (REPO / "classroom" / "grade.yml").read_text()
    assert "\t" not in text and re.search(r"^jobs:\n  grade:\n    runs-on: ", text, re.M)
    steps = workflow_steps(text)
    uses = [s["uses"] for s in steps if "uses" in s]
    assert {u.split("@")[0] for u in uses} == {
        "actions/checkout", "actions/setup-python", "actions/upload-artifact"
    }  # fmt: skip
    assert not any("classroom-resources" in u for u in uses)
    commands = [shlex.split(s["run"]) for s in steps if "run" in s]
    (grade,) = [c for c in commands if c[0] == "kata"]
    # The command parses against the real CLI: every option it names exists.
    context = cli.make_context("kata", grade[1:], resilient_parsing=True)
    sub = cli.get_command(context, grade[1])
    parsed = sub.make_context(grade[1], grade[2:]).params
    assert parsed["output_format"] == "junit" and parsed["summary_path"] == Path(
        "$GITHUB_STEP_SUMMARY"
    )
    (upload,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["if"] == "always()" and str(parsed["out_path"]) in text.split("path:")[-1]


def test_the_markdown_summary_is_a_table_of_exercises_and_points(tmp_path):
    shutil.copy(MINI / "solutions" / "01_demo.py", tmp_path)
    summary, out = tmp_path / "summary.md", tmp_path / "junit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "kata", "--course", str(MINI), "check", "--cold", "--dir",
         str(tmp_path), "--format", "junit", "--out", str(out), "--summary", str(summary)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert out.read_text().startswith("<?xml")
    lines = summary.read_text().splitlines()
    assert lines[0] == "## kata: 1 / 2 points"
    assert "`01_demo`" in lines[4] and lines[4].endswith("| 3 of 3 | 1 / 1 |")
    assert "`02_other`" in lines[5] and "0 / 1" in lines[5]


# Files that cannot be written ---------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["check", "--format", "classroom50", "--out", "{missing}/result.json"], "does not exist"),
        (["check", "--format", "junit", "--out", "{tmp}"], "is a directory"),
        (["grade", "{sub}", "--out", "{missing}/grades.csv"], "does not exist"),
        (["grade", "{sub}", "--out", "{tmp}/g.csv", "--json", "{missing}/g.json"], "not exist"),
        (["grade", "{sub}", "--out", "{tmp}/g.csv", "--report", "{missing}/r.html"], "not exist"),
    ],
)
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, arguments, said):
    places = {"missing": tmp_path / "nowhere", "tmp": tmp_path, "sub": MINI / "solutions"}
    filled = [a.format(**places) for a in arguments]
    result = CliRunner().invoke(cli, ["--course", str(MINI), *filled])
    assert result.exit_code == 2, result.output
    (line,) = result.output.splitlines()
    assert line.startswith("kata: ") and said in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    from kata.instructor import outputs

    def full_disk(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(outputs.OutputError, match="No space left"):
        outputs.write_atomically(tmp_path / "report.html", "<html>")
    assert list(tmp_path.iterdir()) == []
