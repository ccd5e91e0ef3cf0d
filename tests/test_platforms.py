"""Grading where classes are: Gradescope's default image, Classroom 50, plain GitHub Actions.
(The class report has its own tests: tests/test_class_report.py.)"""

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
from kata.course import load_course

from .helpers import MINI, REPO

# Classroom 50 ---------------------------------------------------------------------


# What Classroom 50's runner does with an autograder's result.json before it publishes it
# (foundation50/classroom50, cli/gh-teacher/skeleton/dotgithub/scripts/runner.py:
# finalize_result, validate_result; the score collector applies the same rules). It stamps
# the fields it alone may say (who owns the repository, the assignment's mode, when it was
# submitted), then refuses any result that breaks a rule below: the submission then counts
# as an error, with no score and no feedback.
RUNNER_STAMPS = {
    "owner": "alice",
    "assignment_type": "individual",
    "datetime": "2026-06-01T14:32:05Z",
    "graded_at": "2026-06-01T14:33:00Z",
}
RUNNER_ENV = {
    "CLASSROOM": "jax-101",
    "ASSIGNMENT": "kata",
    "SUBMISSION_TAG": "submit/2026-06-01T14-32-05Z-a1b2c3d",
    "USERNAME": "alice",
    "OWNER": "alice",
    "ASSIGNMENT_TYPE": "individual",
    "COMMIT_URL": "https://github.com/org/jax-101-kata-alice/commit/abc",
    "RELEASE_URL": "https://github.com/org/jax-101-kata-alice/releases/tag/submit%2F1",
    "REVIEW_URL": "https://github.com/org/jax-101-kata-alice/compare/a...abc",
}
# The runner shows at most this much of a test's output in the release body.
RUNNER_MAX_CAPTURED_CHARS = 2000


def non_negative_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def runner_accepts(written: dict) -> dict:
    """`written` as Classroom 50's runner stamps and validates it; fails on any rule it
    breaks. Returns the document the runner publishes."""
    document = {**written, **RUNNER_STAMPS}
    assert document["schema"] == "classroom50/result/v1"
    assert document["classroom"] == RUNNER_ENV["CLASSROOM"]
    assert document["assignment"] == RUNNER_ENV["ASSIGNMENT"]
    assert document["submission"].startswith("submit/")
    for field in ("commit", "release", "review", "datetime"):
        assert isinstance(document[field], str) and document[field], field
    assert non_negative_int(document["score"]) and non_negative_int(document["max-score"])
    assert document["score"] <= document["max-score"]
    assert isinstance(document["tests"], list)
    for test in document["tests"]:
        assert isinstance(test, dict)
        assert isinstance(test["test-name"], str) and test["test-name"]
        assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in test["test-name"])
        assert isinstance(test["passed"], bool)
        assert non_negative_int(test["score"]) and non_negative_int(test["max-score"])
        assert test["score"] <= test["max-score"]
    assert "submitted_by" not in written, "the runner's to say"
    assert len(json.dumps(document)) < 10 * 2**20  # the collector's ceiling
    # kata's own invariants: the points add up, and every test not passed says why.
    assert document["score"] == sum(t["score"] for t in document["tests"])
    assert document["max-score"] == sum(t["max-score"] for t in document["tests"])
    for test in document["tests"]:
        if not test["passed"]:
            assert 0 < len(test["message"]) <= RUNNER_MAX_CAPTURED_CHARS, test
    return document


def test_classroom50_format_follows_the_runners_rules_with_messages(tmp_path):
    shutil.copy(MINI / "exercises" / "01_demo.py", tmp_path)  # fails all three checks
    shutil.copy(MINI / "solutions" / "02_other.py", tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "kata", "--course", str(MINI), "check", "--cold", "--dir",
         str(tmp_path), "--format", "classroom50"],
        capture_output=True, text=True, timeout=300, env={**os.environ, **RUNNER_ENV},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    document = runner_accepts(json.loads(done.stdout))
    assert (document["score"], document["max-score"]) == (100, 200)
    demo, other = document["tests"]
    assert (demo["passed"], demo["score"], demo["checks-passed"]) == (False, 0, "0 of 3")
    assert demo["note"] == "not started (the file is the stub as given)"  # so it earns nothing
    assert (other["passed"], other["score"], other["points"]) == (True, 100, 1.0)
    assert "message" not in other
    # What, why and how to fix it, as `kata check` says it, with no grader's path.
    assert "✗" in demo["message"] and "fix:" in demo["message"], demo["message"]
    assert str(tmp_path) not in done.stdout
    assert document["submission"] == RUNNER_ENV["SUBMISSION_TAG"]
    assert document["review"] == RUNNER_ENV["REVIEW_URL"]


def test_a_long_message_keeps_to_the_runners_limit():
    from kata.reporting import formats

    assert formats._clipped("x" * 5000) == "x" * 1999 + "…"
    assert formats._fenced("a ```` b").startswith("`````text\n")


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundle")
    archive = folder / "autograder.zip"
    made = CliRunner().invoke(cli, ["--course", str(MINI), "gradescope-bundle", str(archive)])
    assert made.exit_code == 0, made.output
    with zipfile.ZipFile(archive) as bundle:
        bundle.extractall(folder / "source")
    return folder / "source"


def test_classroom50_runner_runs_the_autograder_in_a_student_checkout(bundle_dir, tmp_path):
    """As the runner does: the bundle extracted in its runtime folder, the autograder run
    with the student's checkout as its working folder and the runner's environment."""
    bundle = tmp_path / "classroom50-runtime" / RUNNER_ENV["ASSIGNMENT"]
    shutil.copytree(bundle_dir, bundle)
    shutil.copy(REPO / "classroom" / "autograder.py", bundle)
    student = tmp_path / "student"
    (student / "exercises").mkdir(parents=True)
    shutil.copy(MINI / "solutions" / "01_demo.py", student / "exercises")
    shutil.copy(MINI / "exercises" / "02_other.py", student / "exercises")
    (student / "conftest.py").write_text("raise SystemExit('not graded')\n")
    (student / "release-body.md").write_text("a stale body from an earlier run\n")
    env = {**os.environ, **RUNNER_ENV, "CLASSROOM50_BUNDLE_DIR": str(bundle)}
    done = subprocess.run(
        [sys.executable, str(bundle / "autograder.py")],
        cwd=student, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = runner_accepts(json.loads((student / "result.json").read_text()))
    assert (document["score"], document["classroom"]) == (100, "jax-101")
    body = (student / "release-body.md").read_text()
    assert "stale" not in body
    assert body.startswith("## kata: 1 / 2 points")
    assert "**1 of 2 exercises passed" in body  # kata check's verdict
    (other,) = [t for t in document["tests"] if not t["passed"]]
    assert other["message"] in body and "✗ answer: is 42" in body
    assert str(tmp_path) not in body and str(tmp_path) not in json.dumps(document)


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


def grade_yml_steps() -> tuple[str, list[dict[str, str]]]:
    text = (REPO / "classroom" / "grade.yml").read_text()
    assert "\t" not in text and re.search(r"^jobs:\n  grade:\n    runs-on: ", text, re.M)
    return text, workflow_steps(text)


def test_the_github_actions_workflow_grades_uploads_and_summarises():
    text, steps = grade_yml_steps()
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


def test_the_workflow_installs_this_kata_and_the_bundles_pinned_versions():
    """Never whatever the package index has that day: kata at this version, and the
    requirements.txt of the Gradescope bundle, every dependency pinned with ==."""
    import kata
    from kata.instructor.bundle_pins import PINS

    text, steps = grade_yml_steps()
    (install,) = [shlex.split(s["run"]) for s in steps if "pip" in s.get("run", "")]
    assert install == [
        "python", "-m", "pip", "install", "kata-jax==$KATA_VERSION",
        "-r", ".github/kata-requirements.txt",
    ]  # fmt: skip
    assert f'KATA_VERSION: "{kata.__version__}"' in text
    # The bundle's requirements.txt: every package pinned for each Python it may meet.
    assert "3.12" in PINS
    for pins in PINS.values():
        assert all("==" in pin for pin in pins), pins
        assert {"jax", "jaxlib", "optax"} <= {pin.split("==")[0] for pin in pins}


@pytest.mark.slow
def test_the_workflow_grades_a_kata_init_folder_that_holds_no_solutions(tmp_path):
    _, steps = grade_yml_steps()
    (grade,) = [shlex.split(s["run"]) for s in steps if s.get("run", "").startswith("kata ")]
    template = tmp_path / "template"
    made = CliRunner().invoke(cli, ["init", str(template)])
    assert made.exit_code == 0, made.output
    assert not (template / "solutions").exists() and not (template / "pyproject.toml").exists()
    summary = tmp_path / "step-summary.md"
    command = [a.replace("$GITHUB_STEP_SUMMARY", str(summary)) for a in grade[1:]]
    done = subprocess.run(
        [sys.executable, "-m", "kata", *command], cwd=template, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # the stubs fail: a red cross until solved
    assert (template / "kata-junit.xml").read_text().startswith("<?xml")
    body = summary.read_text()
    exercises = len(load_course(template).exercises)
    assert body.startswith("## kata: ") and f"0 of {exercises} exercises passed" in body
    assert str(template) not in body


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
    from kata.reporting import outputs

    def full_disk(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(outputs.OutputError, match="No space left"):
        outputs.write_atomically(tmp_path / "report.html", "<html>")
    assert list(tmp_path.iterdir()) == []
