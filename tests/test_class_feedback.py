"""Feedback per student (`kata grade --feedback DIR`): a page and a text each, with what
`kata check` and `kata hint` would have told them, exercise by exercise, and nothing of
anyone else's: no other student's name, nothing of the reference solutions.

One small class of the mini course's exercises, graded once: a solution in the student's
own words, a file with a reused key and one that does not load, untouched stubs, a .zip
with one exercise, an empty folder, and a roster row with no submission.
"""

import re
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kata.cli import cli
from kata.instructor import feedback, students
from kata.reporting.scoring import AS_GIVEN

from .helpers import MINI, REPO
from .test_class_report import CLIPPED, Browser

STUBS = {f.name: f.read_text() for f in (MINI / "exercises").glob("*.py")}
SOLUTIONS = {f.name: f.read_text() for f in (MINI / "solutions").glob("*.py")}
OWN_WORDS = {
    "01_demo.py": "import jax\n\n\ndef double(x):\n    return x + x\n\n\ndef draw(key):\n"
    "    left, right = jax.random.split(key)\n"
    "    return jax.random.normal(left), jax.random.normal(right)\n",
    "02_other.py": "def answer():\n    return 6 * 7\n",
}
KEY_REUSED = (
    "import jax\n\n\ndef double(x):\n    return 2 * x\n\n\ndef draw(key):\n"
    "    one = two = key\n    return jax.random.normal(one), jax.random.normal(two)\n"
)
# Folder (or .zip) names, and what the roster says of each: none is a word of the page.
CLASS = {
    "student_ada": OWN_WORDS,
    "student_bo": {"01_demo.py": KEY_REUSED, "02_other.py": "def answer(:\n    return 6 * 7\n"},
    "student_cy": STUBS,
    "student_di.zip": {"02_other.py": "def answer():\n    return 40 + 2\n"},
    "student_ed": {},  # not on the roster
}
ROSTER = {
    "student_ada": ("s-101", "Ada Lovelace", "ada@example.org"),
    "student_bo": ("s-102", "Bo Beaumont", "bo@example.org"),
    "student_cy": ("s-103", "Cy Cyrano", "cy@example.org"),
    "student_di": ("s-104", "Di Dijkstra", "di@example.org"),
    "student_fi": ("s-106", "Fi Fibonacci", "fi@example.org"),  # no submission
}
EVERYONE = ["student_ada", "student_bo", "student_cy", "student_di", "student_ed", "student_fi"]


def make_class(folder: Path) -> list[Path]:
    paths = []
    for name, files in CLASS.items():
        path = folder / name
        if name.endswith(".zip"):
            with zipfile.ZipFile(path, "w") as archive:
                for filename, text in files.items():
                    archive.writestr(f"kata/{filename}", text)
        else:
            path.mkdir(parents=True)
            for filename, text in files.items():
                (path / filename).write_text(text)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("feedback-class")
    paths = make_class(root / "class")
    rows = [",".join(["submission", *students.ROSTER_COLUMNS])]
    rows += [",".join([name, *said]) for name, said in ROSTER.items()]
    (root / "roster.csv").write_text("\n".join(rows) + "\n")
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", *map(str, paths), "--roster", str(root / "roster.csv"),
         "--out", str(root / "grades.csv"), "--feedback", str(root / "feedback"),
         "--jobs", "2", "--timeout", "30"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return root


def read(graded: Path, name: str, suffix: str) -> str:
    return (graded / "feedback" / f"{name}{suffix}").read_text(encoding="utf-8")


def section(text: str, exercise_id: str) -> str:
    """One exercise's part of a feedback text: from its heading to the next blank line."""
    return text.split(f"\n{exercise_id} · ", 1)[1].split("\n\n", 1)[0]


def test_each_student_gets_a_page_and_a_text_of_their_own(graded):
    written = sorted(p.name for p in (graded / "feedback").iterdir())
    assert written == sorted(f"{name}{suffix}" for name in EVERYONE for suffix in (".html", ".txt"))
    for name in EVERYONE:
        page = read(graded, name, ".html")
        shown = ROSTER[name][1] if name in ROSTER else name
        assert f"<title>mini: feedback for {shown}</title>" in page
        assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
        assert "default-src 'none'" in page and "<script" not in page
        assert read(graded, name, ".txt").startswith(f"mini: feedback for {shown}\n")


def test_a_students_feedback_names_no_one_else(graded):
    for name in EVERYONE:
        others = [other for other in EVERYONE if other != name]
        words = others + [word for other in others for word in ROSTER.get(other, ())]
        for suffix in (".html", ".txt"):
            said = read(graded, name, suffix)
            assert not [word for word in words if word in said], (name, suffix)


def test_nothing_of_the_reference_solutions_reaches_any_feedback(graded):
    """Each line of a reference solution that no stub and no student's file holds (the
    class's own code may be quoted back to its author)."""
    own = {line.strip() for files in CLASS.values() for text in files.values()
           for line in text.splitlines()}  # fmt: skip
    own |= {line.strip() for text in STUBS.values() for line in text.splitlines()}
    reference = (
        {line.strip() for text in SOLUTIONS.values() for line in text.splitlines()} - own - {""}
    )
    assert {"return x * 2", "return 42", '"""Demo: the reference."""'} <= reference
    for page in (graded / "feedback").iterdir():
        text = page.read_text(encoding="utf-8")
        assert not [line for line in reference if line in text], page.name


def test_the_feedback_says_what_kata_check_and_kata_hint_would(graded):
    bo = read(graded, "student_bo", ".txt")
    # The key-reuse check rests on the learner's process's word: it earns and holds back
    # nothing, so double's task is 01's whole point (kata.reporting.scoring).
    assert "\n1 of 2 points\n" in bo
    demo = section(bo, "01_demo")
    assert "✓ double: doubles eagerly" in demo and "✗ draw: two different numbers" in demo
    assert "KeyReuseError: In jit, argument 0 is already consumed." in demo
    assert "why: a PRNG key used twice" in demo and "fix: split before every use" in demo
    # The hint answers that failure: its diagnosis, once, before the course's fixed hints.
    assert "Hint: 01_demo · draw · about your last failed check (draw: two different" in demo
    other = section(bo, "02_other")
    assert "does not load: SyntaxError" in other
    assert "Hint: 02_other · about your last failed check (loading the file)" in other
    cy = read(graded, "student_cy", ".txt")
    assert AS_GIVEN in section(cy, "01_demo") and AS_GIVEN in section(cy, "02_other")
    assert "Hint: 01_demo · double · hint 1 of 2: Double hint one." in cy
    assert "Hint: 02_other · hint 1 of 2: Only hint one." in cy
    ada = read(graded, "student_ada", ".txt")
    assert "2 of 2 points" in ada and "Hint" not in ada
    di = read(graded, "student_di", ".txt")
    assert "missing: there is no 01_demo.py in your upload" in section(di, "01_demo")
    assert "Hint: 01_demo" not in di, "no hint for a file never handed in"
    assert "Nothing submitted" in read(graded, "student_ed", ".txt")
    assert students.NO_SUBMISSION in read(graded, "student_fi", ".txt")


def test_no_feedback_names_a_folder_of_the_grading_machine(graded):
    places = [str(graded), str(MINI), str(REPO), "/tmp/"]
    for page in (graded / "feedback").iterdir():
        text = page.read_text(encoding="utf-8")
        assert not [place for place in places if place in text], page.name


def test_page_names_are_safe_files_and_never_one_for_two():
    names = {"1": "a b", "2": "a_b", "3": "../x", "4": "名前 ü", "5": "", "6": "A B"}
    pages = feedback.page_names(names)
    assert len({page.casefold() for page in pages.values()}) == len(names)
    assert all(
        re.fullmatch(r"[\w.-]+", page) and not page.startswith(".") for page in pages.values()
    )
    assert pages["4"] == "名前_ü" and pages["5"] == "student"


@pytest.mark.parametrize(
    ("folder", "said"),
    [("no/such", "cannot make the folder"), ("a-file", "is a file")],
)
def test_a_feedback_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, folder, said):
    (tmp_path / "a-file").write_text("")
    result = CliRunner().invoke(
        cli,
        ["--course", str(MINI), "grade", str(tmp_path), "--feedback", str(tmp_path / folder),
         "--out", str(tmp_path / "grades.csv")],
    )  # fmt: skip
    assert result.exit_code == 2 and said in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


# The page in a real browser ------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    opened = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield opened
    opened.close()


def test_a_feedback_page_reads_on_a_phone_in_a_real_browser(graded, browser):
    """At a phone's width (390 px) nothing is hidden, clipped or past the page's edge, long
    lines wrap, and the page says what the text says."""
    browser.open((graded / "feedback" / "student_bo.html").as_uri(), width=390)
    assert browser.evaluate("document.querySelector('meta[name=viewport]').content") == (
        "width=device-width, initial-scale=1"
    )
    assert browser.evaluate(CLIPPED) == []
    text = browser.evaluate("document.body.innerText")
    assert "why: a PRNG key used twice" in text and "Hint: 02_other" in text
    assert browser.evaluate("document.querySelectorAll('section').length") == 2
