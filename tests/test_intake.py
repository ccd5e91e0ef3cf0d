"""What a student's upload is taken as (kata.reporting.intake), how points are earned
(kata.reporting.scoring), and how a death by signal or by memory is told."""

import io
import json
import os
import signal
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from kata.course import load_course, original_stub
from kata.instructor.verify import _stub_problems
from kata.reporting.intake import (
    ARCHIVE_BYTES,
    FILE_LIMIT_BYTES,
    NOT_RUN_AS_GIVEN,
    NOTHING_SUBMITTED,
    declared_checks,
    grade_upload,
    hide_paths,
    relative_to_upload,
    take_in,
)
from kata.reporting.report import summary_line
from kata.reporting.scoring import AS_GIVEN, score_exercise, split_hundredths, total
from kata.results import CheckResult, ExerciseResult, Grading, Limits, Outcome
from kata.supervisor import memory, runner

from .helpers import MINI, REPO, clone_course

COURSE = load_course(MINI)
GOOD = (MINI / "solutions" / "01_demo.py").read_bytes()


def write(folder, files):
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


def zipped(files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def test_an_upload_is_summed_up_in_one_line(tmp_path):
    upload = write(tmp_path / "upload", {
        "hw/01_demo.py": GOOD,
        "02-other (1).py": "ANSWER = 42\n",
        "notes.txt": "my notes",
        "__MACOSX/._01_demo.py": "noise",
        "conftest.py": "raise SystemExit",
    })  # fmt: skip
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == ["01_demo.py"]
    assert intake.missing == []  # 02_other.py is there, under a wrong name
    line = intake.summary(len(COURSE.exercises))
    assert line.startswith("Graded 1 of 2 exercise files (hw/01_demo.py).")
    assert "02-other (1).py (misnamed: name it 02_other.py)" in line
    assert "Other files, not graded: conftest.py, notes.txt." in line and "MACOSX" not in line
    assert intake.problem("02_other.py") == (
        "not graded: your 02-other (1).py is misnamed: name it 02_other.py"
    )
    assert str(tmp_path) not in line


def test_a_file_over_the_limit_is_named_not_called_missing(tmp_path):
    upload = write(tmp_path / "upload", {"01_demo.py": b"#" * (FILE_LIMIT_BYTES + 1)})
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert intake.missing == ["02_other.py"]
    assert intake.ignored == ["01_demo.py (over 1024 KiB)"]
    assert intake.problem("01_demo.py") == "not graded: your 01_demo.py is over 1024 KiB"
    assert intake.problem("02_other.py").startswith("missing: there is no 02_other.py")


def test_a_named_pipe_is_named_never_read(tmp_path):
    """Opening a pipe to read it waits for a writer that never comes."""
    upload = write(tmp_path / "upload", {"02_other.py": "ANSWER = 42\n"})
    os.mkfifo(upload / "01_demo.py")
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert intake.ignored == ["01_demo.py (not a plain file)"]
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == ["02_other.py"]


def test_a_zip_inside_the_upload_is_opened_and_cannot_escape(tmp_path):
    archive = zipped({"work/01_demo.py": GOOD, "../../escape/02_other.py": "ANSWER = 42\n"})
    upload = write(tmp_path / "upload", {"homework.zip": archive})
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert intake.taken == {
        "01_demo.py": "homework.zip:work/01_demo.py",
        "02_other.py": "homework.zip:escape/02_other.py",
    }
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == ["01_demo.py", "02_other.py"]
    assert not (tmp_path / "escape").exists()


def test_a_loose_file_wins_over_one_in_an_archive(tmp_path):
    upload = write(tmp_path / "upload", {
        "01_demo.py": GOOD, "old.zip": zipped({"01_demo.py": "old"}),
    })  # fmt: skip
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert (tmp_path / "files" / "01_demo.py").read_bytes() == GOOD
    assert intake.ignored == ["old.zip:01_demo.py (another 01_demo.py was graded: 01_demo.py)"]


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"a.tar.gz": b"\x1f\x8b"}, "a.tar.gz (an archive kata does not open: upload a .zip)"),
        ({"a.zip": zipped({"inner.zip": b"PK"})}, "a.zip:inner.zip (an archive inside an archive"),
        ({"a.zip": b"not a zip"}, "a.zip (a .zip that could not be opened"),
        ({"a.zip": zipped({f"f{n}.txt": "" for n in range(1001)})}, "over 1000 files in it"),
    ],
)
def test_an_archive_not_opened_is_named(tmp_path, files, said):
    intake = take_in(COURSE, write(tmp_path / "upload", files), tmp_path / "files")
    assert any(said in item for item in intake.ignored), intake.ignored
    assert said.split(" (")[0] in intake.summary(2)


def zipped_link(name, target):
    """A .zip holding `name` as a symbolic link to `target` (as `zip -y` stores one)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo(name)
        info.create_system = 3  # Unix: the mode's file type is read
        info.external_attr = (0o120777) << 16
        archive.writestr(info, target)
    return buffer.getvalue()


def folder_link(upload, name):
    (upload / "elsewhere").mkdir(parents=True, exist_ok=True)
    os.symlink(upload / "elsewhere", upload / name)


def file_link(upload, name):
    os.symlink("/etc/hostname", upload / name)


# What a student uploads meant as 01_demo.py and kata does not grade: what it is said to
# be, where (in the summary and in 01_demo.py's row).
NOT_GRADED = {
    "a folder": ({"01_demo.py/notes.txt": "x"}, None, "01_demo.py/ (a folder, not a file"),
    "a folder deeper": ({"hw/01_demo.py/a.py": "x"}, None, "hw/01_demo.py/ (a folder"),
    "a folder misnamed": ({"01_Demo.py/a.txt": "x"}, None, "01_Demo.py/ (a folder"),
    "a folder in a zip": (
        {"hw.zip": zipped({"work/01_demo.py/x.txt": "x"})}, None,
        "hw.zip:work/01_demo.py/ (a folder",
    ),
    "an empty folder in a zip": (
        {"hw.zip": zipped({"01_demo.py/": ""})}, None, "hw.zip:01_demo.py/ (a folder",
    ),
    "a link": ({}, lambda up: file_link(up, "01_demo.py"), "01_demo.py (a link"),
    "a link to a folder": ({}, lambda up: folder_link(up, "01_demo.py"), "01_demo.py (a link"),
    "a link in a zip": ({"hw.zip": zipped_link("01_demo.py", "/etc/passwd")}, None,
                        "hw.zip:01_demo.py (a link"),
    "another case": ({"01_DEMO.PY": GOOD}, None, "01_DEMO.PY (misnamed: name it 01_demo.py)"),
    "a .py.txt": ({"01_demo.py.txt": GOOD}, None, "01_demo.py.txt (misnamed"),
    "no suffix": ({"01_demo": GOOD}, None, "01_demo (misnamed"),
    "a trailing space": ({"01_demo.py ": GOOD}, None, "01_demo.py  (misnamed"),
    "a notebook": ({"01_demo.ipynb": "{}"}, None, "01_demo.ipynb (a notebook: kata grades"),
    "a pdf": ({"01-demo.pdf": "%PDF"}, None, "01-demo.pdf (a .pdf file: kata grades 01_demo"),
    "empty": ({"01_demo.py": ""}, None, "01_demo.py (empty)"),
    "blank": ({"01_demo.py": "\n  \n"}, None, "01_demo.py (empty)"),
    "empty in a zip": ({"hw.zip": zipped({"01_demo.py": ""})}, None, "hw.zip:01_demo.py (empty)"),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(NOT_GRADED))
def test_what_was_meant_as_an_exercise_file_is_said_why_it_was_not_graded(tmp_path, kind):
    files, make, said = NOT_GRADED[kind]
    upload = write(tmp_path / "upload", files | {"02_other.py": "ANSWER = 42\n"})
    if make:
        make(upload)
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == ["02_other.py"]
    assert intake.missing == [], "not missing: something was there, and it is said why"
    assert said in intake.summary(2), intake.summary(2)
    shown, why = said.split(" (", 1)
    why = why.removesuffix(")")
    assert intake.problem("01_demo.py").startswith(f"not graded: your {shown} is {why}")
    # The exercise's row says it: the gradebook's notes do not say it twice.
    assert not any(shown in note for note in intake.notes()), intake.notes()


@pytest.mark.parametrize(
    "files",
    [
        {"01_demo.py": "", "hw/01_demo.py": GOOD},
        {"01_DEMO.py": "x", "hw/01_demo.py": GOOD},
        {"01_demo.ipynb": "{}", "01_demo.py": GOOD},
    ],
)
def test_a_right_file_is_graded_beside_what_is_not(tmp_path, files):
    intake = take_in(COURSE, write(tmp_path / "upload", files), tmp_path / "files")
    assert (tmp_path / "files" / "01_demo.py").read_bytes() == GOOD
    assert "01_demo.py" not in intake.not_graded and intake.ignored
    assert intake.problem("02_other.py").startswith("missing: there is no 02_other.py")
    assert [note.removeprefix("ignored: ") for note in intake.notes()] == intake.ignored


def test_a_file_that_cannot_be_read_is_said_and_the_rest_graded(tmp_path, monkeypatch):
    upload = write(tmp_path / "upload", {"01_demo.py": GOOD, "02_other.py": "ANSWER = 42\n"})
    opened = Path.open

    def refusing(path, *args, **kwargs):
        if path.name == "01_demo.py" and "upload" in path.parts:
            raise PermissionError(13, "Permission denied")
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refusing)
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert intake.unreadable is None and list(intake.taken) == ["02_other.py"]
    assert intake.problem("01_demo.py") == (
        "not graded: your 01_demo.py is unreadable: Permission denied"
    )


@pytest.mark.parametrize("inside", [False, True], ids=["the upload", "inside the upload"])
def test_an_archive_that_cannot_be_opened_is_said_without_the_graders_path(
    tmp_path, monkeypatch, inside
):
    """An OSError's own words name the whole path on the grading machine; what the student
    and the instructor read names only the archive, as the upload has it."""
    upload = write(tmp_path / "upload", {"hw.zip": zipped({"01_demo.py": GOOD})})

    def refusing(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", os.fspath(path))

    monkeypatch.setattr(zipfile, "ZipFile", refusing)
    intake = take_in(COURSE, upload if inside else upload / "hw.zip", tmp_path / "files")
    said = " ".join([intake.summary(len(COURSE.exercises)), *intake.notes()])
    assert "hw.zip" in said and "Permission denied" in said, said
    assert str(tmp_path) not in said


def test_of_two_copies_the_one_not_graded_names_the_one_graded(tmp_path):
    upload = write(tmp_path / "upload", {"b/01_demo.py": "# b\n", "a/01_demo.py": GOOD,
                                         "a/deeper/01_demo.py": "# deep\n"})  # fmt: skip
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert intake.taken["01_demo.py"] == "a/01_demo.py"
    assert sorted(intake.ignored) == [
        "a/deeper/01_demo.py (another 01_demo.py was graded: a/01_demo.py)",
        "b/01_demo.py (another 01_demo.py was graded: a/01_demo.py)",
    ]


def test_a_missing_file_names_the_archive_kata_did_not_open(tmp_path):
    upload = write(tmp_path / "upload", {"02_other.py": "ANSWER = 42\n", "hw.tar.gz": b"\x1f"})
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert intake.problem("01_demo.py") == (
        "missing: there is no 01_demo.py in your upload; kata did not open hw.tar.gz"
    )


@pytest.mark.parametrize(
    "files",
    [
        {"01_demo.py/01_demo.py": GOOD},
        {"01_demo/01_demo.py": GOOD},
        {"01_demo.py/x.txt": "x", "hw/01_demo.py": GOOD},
        {"hw.zip": zipped({"01_demo.py/01_demo.py": GOOD})},
    ],
)
def test_a_folder_named_like_an_exercise_graded_needs_no_word(tmp_path, files):
    intake = take_in(COURSE, write(tmp_path / "upload", files), tmp_path / "files")
    assert (tmp_path / "files" / "01_demo.py").read_bytes() == GOOD
    assert intake.ignored == [] and intake.notes() == []


def test_files_not_meant_as_an_exercise_are_only_extra(tmp_path):
    files = {"01_demo.py": GOOD, "02_other.py": "ANSWER = 42\n", "report.pdf": "%PDF",
             "notes.txt": "n", "plots/loss.png": "png", "._01_demo.py": "mac"}  # fmt: skip
    upload = write(tmp_path / "upload", files)
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert intake.ignored == [] and intake.not_graded == {}
    assert sorted(intake.extra) == ["notes.txt", "plots/loss.png", "report.pdf"]


def test_a_zip_bomb_reads_no_more_than_the_archive_limit(tmp_path):
    # Highly compressible members: the archive is small, what it claims is not.
    members = {f"big{n}.txt": b"0" * FILE_LIMIT_BYTES for n in range(40)}
    upload = write(tmp_path / "upload", {"bomb.zip": zipped(members)})
    assert (upload / "bomb.zip").stat().st_size < ARCHIVE_BYTES // 100
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert any("not opened further: over 32 MiB" in item for item in intake.ignored)


def test_an_unreadable_upload_says_so(tmp_path):
    (tmp_path / "upload.zip").write_bytes(b"garbage")
    intake = take_in(COURSE, tmp_path / "upload.zip", tmp_path / "files")
    assert intake.summary(2).startswith("Your upload could not be read: upload.zip is not")
    assert intake.missing == ["01_demo.py", "02_other.py"]


@pytest.mark.parametrize(
    ("files", "nothing"),
    [
        ({}, True),
        ({"notes.txt": "n", "__MACOSX/._x": "mac"}, True),
        ({"02_other.ipynb": "{}"}, False),  # meant as 02's file: its row says why
        ({"hw.tar.gz": b"\x1f"}, False),  # may hold them: each row names the archive
        ({"02_other.py": "ANSWER = 42\n"}, False),
    ],
)
def test_an_upload_with_no_exercise_file_says_nothing_submitted_once(tmp_path, files, nothing):
    (tmp_path / "upload").mkdir()
    intake = take_in(COURSE, write(tmp_path / "upload", files), tmp_path / "files")
    assert intake.nothing_submitted == nothing
    assert (NOTHING_SUBMITTED in intake.notes()) == nothing
    line = intake.summary(len(COURSE.exercises))
    assert line.startswith("Nothing submitted") == nothing, line
    if nothing:
        assert "Missing" not in line and "01_demo.py, 02_other.py" in line, line


def test_paths_are_shown_relative_to_the_upload(tmp_path):
    files = tmp_path / "scratch" / "files"
    document = {"tests": [{"output": f'File "{files}/01_demo.py", line 3\n{files}'}]}
    shown = hide_paths(document, {files: "", REPO: "course"})
    assert shown == {"tests": [{"output": 'File "01_demo.py", line 3\n.'}]}


# A file that is its stub as given -------------------------------------------------------


@pytest.fixture
def engine(monkeypatch):
    """The engine stood in for: the exercises each grading was asked to run, each result a
    stand-in verdict (a file changed from its stub, here)."""
    asked = []

    def grade(course, exercises, source, *_, **__):
        asked.append([e.id for e in exercises])
        return Grading(source, [ExerciseResult(e, [passing(e)]) for e in exercises])

    def passing(exercise):
        return CheckResult("c", exercise.id, "c", outcome=Outcome.PASSED)

    monkeypatch.setattr(runner, "grade", grade)
    return asked


def stubs_of(course):
    return {e.filename: original_stub(course, e) for e in course.exercises}


def test_a_stub_as_given_is_not_started_and_its_checks_are_not_run(tmp_path, engine):
    """Line endings and trailing blank space are an editor's, not the student's: a stub
    saved with CRLF and trailing spaces is still the stub as given."""
    stubs = stubs_of(COURSE)
    edited = stubs["01_demo.py"].replace("\n", "  \r\n")
    upload = write(tmp_path / "upload", {**stubs, "01_demo.py": edited})
    graded = grade_upload(COURSE, upload, tmp_path / "files", lambda _: Limits())
    assert engine == [[]], "no check of a stub as given is run"
    for result in graded.grading.results:
        assert result.as_given and result.problem is None
        declared = declared_checks(COURSE, result.exercise)
        assert [c.id for c in result.checks] == [c.id for c in declared] and declared
        assert {(c.outcome, c.message) for c in result.checks} == {
            (Outcome.NOT_RUN, NOT_RUN_AS_GIVEN)
        }
        score = score_exercise(result.exercise, result)
        assert (score.points, score.note) == (0.0, AS_GIVEN)
        # The course's points and check count, as a grading of the file would give them.
        assert sum(c.max_points for c in score.checks) == result.exercise.points
    assert "(0 of 4 checks)" in summary_line(graded.grading)


def test_a_file_changed_from_its_stub_is_graded(tmp_path, engine):
    stubs = stubs_of(COURSE)
    upload = write(tmp_path / "upload", {**stubs, "02_other.py": stubs["02_other.py"] + "# x\n"})
    graded = grade_upload(COURSE, upload, tmp_path / "files", lambda _: Limits())
    assert engine == [["02_other"]]
    demo, other = graded.grading.results
    assert demo.as_given and not other.as_given and other.passed


@pytest.mark.parametrize(
    "collected_otherwise",
    [
        "\n@pytest.mark.parametrize('n', [1, 2])\ndef test_more(ex, n):\n    pass\n",
        "\nclass TestMore:\n    def test_it(self, ex):\n        pass\n",
        "\npytestmark = pytest.mark.task('double')\n",
        "\nTASK = 'double'\n\n@pytest.mark.task(TASK)\ndef test_named(ex):\n    pass\n",
    ],
)
def test_a_stub_whose_checks_no_reading_tells_is_run_and_still_earns_nothing(
    tmp_path, engine, collected_otherwise
):
    course = load_course(clone_course(MINI, tmp_path / "course"))
    with course.check_file(course.exercises[0]).open("a") as checks_file:
        checks_file.write(collected_otherwise)
    assert declared_checks(course, course.exercises[0]) is None
    upload = write(tmp_path / "upload", stubs_of(course))
    graded = grade_upload(course, upload, tmp_path / "files", lambda _: Limits())
    assert engine == [["01_demo"]]
    demo, other = graded.grading.results
    assert demo.as_given and other.as_given and demo.checks[0].passed
    assert score_exercise(demo.exercise, demo).points == 0.0


COLLECTED = """
import json, sys
from pathlib import Path
import pytest
from kata.course import load_course
from kata.judge.pytest_plugin import check_name, task_of
from kata.supervisor.runner import pytest_config_file

course = load_course(Path(sys.argv[1]))
found = []

class Collected:
    def pytest_collection_modifyitems(self, items):
        found.extend(items)

checks = [str(course.check_file(e)) for e in course.exercises]
arguments = [*checks, "--collect-only", "-q", "-p", "no:cacheprovider",
             "-c", str(pytest_config_file(course)), "--rootdir", str(course.root)]
assert pytest.main(arguments, plugins=[Collected()]) == 0
print(json.dumps([[i.nodeid, check_name(i), task_of(i), bool(i.get_closest_marker("speed"))]
                  for i in found]))
"""


@pytest.mark.parametrize("root", [REPO, MINI], ids=["course", "mini"])
def test_the_checks_a_stub_is_held_to_are_those_the_judge_collects(root):
    """What `declared_checks` reads from each check file is what pytest collects and the
    judge names (its id, name, task and speed mark), for every check of the course."""
    course = load_course(root)
    done = subprocess.run(
        [sys.executable, "-c", COLLECTED, str(root)], capture_output=True, text=True, cwd=root
    )
    assert done.returncode == 0, done.stderr
    collected = json.loads(done.stdout.splitlines()[-1])
    declared = [
        [c.id, c.name, c.task, c.speed]
        for exercise in course.exercises
        for c in declared_checks(course, exercise)
    ]
    assert declared == collected and len(collected) > 3


# Points ------------------------------------------------------------------------------


def checks(*outcomes_by_task):
    made = []
    for task, outcomes in outcomes_by_task:
        for n, outcome in enumerate(outcomes):
            made.append(CheckResult(f"{task}{n}", "01_demo", f"{task}{n}", task, outcome=outcome))
    return made


P, F = Outcome.PASSED, Outcome.FAILED


def test_a_task_earns_its_points_only_when_all_its_checks_pass():
    exercise = COURSE.exercises[0]
    # A stub passes the checks that are true of doing nothing: it earns nothing for them.
    stubby = ExerciseResult(exercise, checks(("a", [P, F, F]), ("b", [P, P]), ("c", [F])))
    score = score_exercise(exercise, stubby)
    assert score.points == 0.33  # task b alone: a third of a point, in whole hundredths
    assert [c.max_points for c in score.checks] == [0.12, 0.11, 0.11, 0.17, 0.16, 0.33]
    assert sum(round(c.max_points * 100) for c in score.checks) == 100
    untouched = ExerciseResult(exercise, checks(("a", [P, F]), ("b", [F, P])))
    assert score_exercise(exercise, untouched).points == 0.0


def test_a_check_on_the_learners_word_alone_earns_and_holds_back_nothing():
    """Its verdict stands; its points go to the checks that rest on evidence the learner's
    code cannot write, and a task of such checks alone goes to the other tasks."""
    exercise = COURSE.exercises[0]

    def scored(*outcomes_by_task, word=()):
        made = checks(*outcomes_by_task)
        for check in made:
            check.feedback_only = check.id in word
        return score_exercise(exercise, ExerciseResult(exercise, made))

    failed_word = scored(("a", [P, F]), ("b", [P]), word={"a1"})
    assert failed_word.points == 1.0 and failed_word.checks[1].points == 0.0
    assert [c.max_points for c in failed_word.checks] == [0.5, 0.0, 0.5]
    forged = scored(("a", [F, P]), ("b", [P]), word={"a1"})
    assert forged.points == 0.5, "a word check passed while its task's other check failed"
    word_task = scored(("a", [P]), ("b", [F, P]), word={"b0", "b1"})
    assert word_task.points == 1.0 and [c.max_points for c in word_task.checks] == [1.0, 0, 0]
    partial = replace(exercise, partial_credit=True)
    made = checks(("a", [P, F, P]))
    made[2].feedback_only = True
    assert score_exercise(partial, ExerciseResult(partial, made)).points == 0.5


def test_the_stub_as_given_earns_nothing_whatever_its_checks_say():
    exercise = COURSE.exercises[0]
    untouched = ExerciseResult(exercise, checks(("a", [P]), ("b", [P, F])), as_given=True)
    score = score_exercise(exercise, untouched)
    assert (score.points, score.note) == (0.0, AS_GIVEN)
    assert [(c.points, c.max_points) for c in score.checks] == [(0, 0.5), (0, 0.25), (0, 0.25)]


def test_verify_fails_a_task_only_feedback_checks_tell_from_its_stub():
    """Edited anywhere, such a stub would earn the task's share: `kata verify` names it. A
    task of feedback checks alone has no share, and one the stub fails on a check worth
    points is sound."""
    exercise = COURSE.exercises[0]
    made = checks(("a", [P, F]), ("b", [F, F]), ("c", [P, F]))
    for check in made:
        check.feedback_only = check.id in {"a1", "b0", "b1"}
    problems = _stub_problems(ExerciseResult(exercise, made))
    assert [p.message for p in problems] == [
        "the stub passes every check of task 'a' that earns points; only 'a1', on the "
        "learner's process's word alone, fails it: add a check the stub fails on evidence "
        "the grader holds (docs/writing-checks.md)"
    ]


def test_partial_credit_is_the_instructors_choice():
    exercise = replace(COURSE.exercises[0], partial_credit=True)
    result = ExerciseResult(exercise, checks(("a", [P, F, F]), ("b", [P, P]), ("c", [F])))
    assert score_exercise(exercise, result).points == 0.12 + 0.33


def test_partial_credit_is_read_from_course_toml(tmp_path):
    manifest = (MINI / "course.toml").read_text()
    (tmp_path / "course.toml").write_text("[grading]\npartial_credit = true\n" + manifest)
    assert all(e.partial_credit for e in load_course(tmp_path).exercises)
    assert not any(e.partial_credit for e in COURSE.exercises)


@pytest.mark.parametrize(("points", "parts"), [(1.0, 3), (1.0, 7), (2.5, 4), (12.0, 129)])
def test_shares_are_hundredths_that_add_up(points, parts):
    shares = split_hundredths(round(points * 100), parts)
    assert sum(shares) == round(points * 100) and max(shares) - min(shares) <= 1


def test_totals_show_at_most_two_decimals():
    exercise = COURSE.exercises[0]
    result = ExerciseResult(exercise, checks(*[(f"t{n}", [P]) for n in range(7)]))
    scored = [score_exercise(exercise, result)] * 3
    assert total(scored) == (3.0, 3.0)


# Deaths -------------------------------------------------------------------------------

END_AS = """
import os, signal, sys
from kata.checking.learner_connection import _end_as
pid = os.fork()
if pid == 0:
    os.kill(os.getpid(), signal.{name})
_, status = os.waitpid(pid, 0)
_end_as(status)
"""


@pytest.mark.parametrize("name", ["SIGKILL", "SIGSEGV", "SIGTERM"])
def test_the_judge_ends_by_the_signal_that_ended_the_learner(name):
    """Re-raising SIGKILL used to raise OSError (a handler cannot be set for it), and every
    check of an out-of-memory learner said `OSError: [Errno 22] Invalid argument`."""
    done = subprocess.run([sys.executable, "-c", END_AS.format(name=name)], capture_output=True)
    assert done.returncode == -getattr(signal, name), done.stderr
    assert b"OSError" not in done.stderr


def test_memory_cgroups_are_found_from_proc(tmp_path, monkeypatch):
    v1 = tmp_path / "memory" / "job"
    v1.mkdir(parents=True)
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (v1 / "memory.limit_in_bytes").write_text(str(768 * 10**6))
    (tmp_path / "memory" / "memory.oom_control").write_text("oom_kill 0\n")
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(str(2**63 - 4096))
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/job\n1:cpu:/\n")
    monkeypatch.setattr(memory, "CGROUP_ROOT", tmp_path)
    inner, outer = memory.memory_cgroups(proc)
    assert (inner.oom_kills(), inner.limit_bytes()) == (3, 768 * 10**6)
    assert (outer.folder, outer.limit_bytes()) == (tmp_path / "memory", None)


MEMORY_CGROUP = "/sys/fs/cgroup/memory"


def join_cgroup(group: str) -> None:
    with open(f"{group}/cgroup.procs", "w") as procs:
        procs.write(str(os.getpid()))


@pytest.mark.skipif(
    not (os.geteuid() == 0 and os.access(MEMORY_CGROUP, os.W_OK)),
    reason="needs root and a writable cgroup v1 memory controller to make a small container",
)
def test_a_container_oom_kill_is_told_with_its_limit(tmp_path):
    """A process in a 64 MiB cgroup allocates past it: the kernel kills it with SIGKILL,
    and the witness, in the same cgroup, names the limit it met."""
    script = f"""
import os, signal, sys
from kata.supervisor.memory import OomWitness
open("{MEMORY_CGROUP}/kata-test-oom-%d/cgroup.procs" % os.getppid(), "w").write(str(os.getpid()))
witness = OomWitness()
pid = os.fork()
if pid == 0:
    hog = bytearray(256 * 2**20)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), witness.limit_met())
"""
    group = f"{MEMORY_CGROUP}/kata-test-oom-{os.getpid()}"
    os.mkdir(group)
    try:
        with open(f"{group}/memory.limit_in_bytes", "w") as limit:
            limit.write(str(64 * 2**20))
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert done.stdout.split() == [str(-signal.SIGKILL), str(64 * 2**20)], done.stderr
    finally:
        os.rmdir(group)


def test_a_grading_is_shown_relative_to_the_upload(tmp_path):
    files = (tmp_path / "files").resolve()
    check = CheckResult(
        "c", "01_demo", "c", outcome=F,
        message=f"{files}/01_demo.py line 3: {MINI}/checks/test_01_demo.py",
        location={"file": f"{files}/01_demo.py", "line": 3}, notes=[f"in {files}"],
    )  # fmt: skip
    grading = Grading(files, [ExerciseResult(COURSE.exercises[0], [check], problem=str(files))])
    (shown,) = relative_to_upload(grading, COURSE).results
    assert shown.problem == "."
    assert shown.checks[0].message == "01_demo.py line 3: course/checks/test_01_demo.py"
    assert shown.checks[0].location == {"file": "01_demo.py", "line": 3}
    assert shown.checks[0].notes == ["in ."]


def test_a_missing_file_is_told_in_words_for_whoever_graded_it(tmp_path):
    from kata.supervisor.runner import grade

    other = COURSE.exercises[1]
    (upload,) = grade(COURSE, [other], tmp_path).results
    assert upload.problem == "missing: there is no 02_other.py in the folder graded"
    course = load_course(clone_course(MINI, tmp_path / "course"))
    (course.exercises_dir / "02_other.py").unlink()
    (own,) = grade(course, [course.exercises[1]], course.exercises_dir).results
    assert (
        own.problem == "there is no exercises/02_other.py; `kata reset 02_other` restores the stub"
    )


# `double` grows 8 MiB at a time, as a leak does; `draw` (the solution's) still works.
LEAKING_DOUBLE = (
    "\ndef double(x):\n    held = []\n    while True:\n        held += [bytearray(2**23)]\n"
)


def test_a_run_past_kata_s_memory_limit_is_stopped_and_told(tmp_path):
    from kata.supervisor.runner import grade

    leaking = (
        "\ndef double(x):\n    held = []\n    while True:\n        held.append(bytearray(2**23))\n"
    )
    (tmp_path / "01_demo.py").write_bytes(GOOD + leaking.encode())
    limits = Limits(resident_bytes=400 * 2**20, check_seconds=60)
    (result,) = grade(COURSE, [COURSE.exercises[0]], tmp_path, limits).results
    outcomes = {c.name: (c.outcome, c.message) for c in result.checks}
    assert outcomes["double: doubles eagerly"] == (
        Outcome.CRASHED, "out of memory (limit 400 MiB): your code held more, and was stopped"
    )  # fmt: skip
    assert outcomes["draw: two different numbers from one key, no key reused"][0] == P


def test_a_link_is_named_and_never_followed(tmp_path):
    secret = write(tmp_path / "grader", {"01_demo.py": "the grader's own file"})
    upload = tmp_path / "upload"
    upload.mkdir()
    (upload / "01_demo.py").symlink_to(secret / "01_demo.py")
    intake = take_in(COURSE, upload, tmp_path / "files")
    assert not (tmp_path / "files" / "01_demo.py").exists()
    assert intake.ignored == ["01_demo.py (a link: upload the file itself)"]


@pytest.mark.skipif(
    not (os.geteuid() == 0 and os.access(MEMORY_CGROUP, os.W_OK)),
    reason="needs root and a writable cgroup v1 memory controller to make a small container",
)
@pytest.mark.xfail(
    strict=True,
    reason="as root on cgroup v1 the run's own cgroup (kata.isolation.container) counts the OOM "
    "kill, and v1 counts it in no ancestor: the witness, reading only its ancestors, misses it",
)
def test_a_container_oom_kill_is_told_to_the_student_with_the_containers_limit(tmp_path):
    """No kata limit this time (--resident-mib 0): the container's OOM killer ends the
    leaking check, and results.json says out of memory with the container's limit."""
    leaking = (
        "\ndef double(x):\n    held = []\n    while True:\n        held += [bytearray(2**23)]\n"
    )
    upload = write(tmp_path / "upload", {"01_demo.py": GOOD + leaking.encode()})
    group = f"{MEMORY_CGROUP}/kata-test-container-{os.getpid()}"
    os.mkdir(group)
    try:
        with open(f"{group}/memory.limit_in_bytes", "w") as limit:
            limit.write(str(600 * 2**20))
        command = [sys.executable, "-m", "kata.instructor.gradescope", "grade", str(MINI)]
        command += [str(upload), str(tmp_path / "results.json"), "--resident-mib", "0"]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=600,
            preexec_fn=lambda: join_cgroup(group),
        )
    finally:
        os.rmdir(group)
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    outputs = {t["name"]: " ".join(t["output"].split()) for t in results["tests"]}
    said = "out of memory (limit 600 MiB): the machine ran out of memory while your code ran"
    assert outputs["01_demo · double: doubles eagerly"].startswith(said), outputs
    assert results["score"] == 0.0  # draw rests on its process's word: no points; 02_other missing
