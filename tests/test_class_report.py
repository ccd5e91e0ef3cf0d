"""The class report an instructor acts on: who needs help with what, counted in students.

Its numbers on made-up gradebook entries, then a small real class (the course's 01 and 02:
solved, untouched stubs, a forgotten `jax.jit`, an endless loop, a missing file) graded
once, its files, and its page read in a real headless browser, on screen and in print.
"""

import base64
import contextlib
import csv
import importlib.util
import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kata.cli import cli
from kata.instructor import class_report
from kata.reporting.outputs import current_umask

from .helpers import REPO, committed_files

# Made-up gradebook entries -------------------------------------------------------------

# One diagnose rule, two wordings (kata.diagnosis.diagnose words key reuse by what caught it).
KEY_REUSE = "a PRNG key used twice (JAX's key-reuse checker caught it)"
KEY_REUSE_JIT = "a PRNG key used twice (JAX's key-reuse checker caught it; it says 'jit…')"


def check(name, outcome="passed", rule=None, cause=None, exception=None, speedup=None):
    return {
        "name": name, "task": None, "outcome": outcome, "score": 0.5 * (outcome == "passed"),
        "max": 0.5, "speed": speedup is not None,
        "measurements": {} if speedup is None else {"speedup": speedup}, "diagnosis": cause,
        "fix": f"fix for {rule}" if rule else None, "rule": rule, "exception": exception,
        "message": "" if outcome == "passed" else f"{outcome} at /tmp/kata-grade-x/0/a.py",
    }  # fmt: skip


def exercise(checks, *, not_started=False, missing=False, note=None):
    return {
        "score": sum(c["score"] for c in checks), "max": 1.0, "concept": "c",
        "note": note, "missing": missing, "not_started": not_started, "checks": checks,
    }  # fmt: skip


def entry(name, exercises):
    total = sum(e["score"] for e in exercises.values())
    return {"submission": name, "total": total, "max": 2.0, "seconds": 1.0, "notes": [],
            "exercises": exercises}  # fmt: skip


# A file that does not load, as the gradebook's CSV says it (kata.supervisor.runner).
SYNTAX_ERROR = "SyntaxError: expected ':' (02_b.py, line 3)\n    def f(x)\n            ^"


def made_up_class():
    failed = "failed"
    return [
        entry("solved", {"01_a": exercise([check("c1"), check("c2")]),
                         "02_b": exercise([check("fast", speedup=20.0), check("s2")])}),
        # An untouched stub: its failures (with diagnoses) are no mistakes of the class.
        entry("stub", {"01_a": exercise([check("c1", failed, "key_reuse", KEY_REUSE),
                                         check("c2", failed, "key_reuse", KEY_REUSE)],
                                        not_started=True),
                       "02_b": exercise([], missing=True, note="missing: no file submitted")}),
        entry("reuse", {"01_a": exercise([check("c1", failed, "key_reuse", KEY_REUSE),
                                          check("c2", failed, "key_reuse", KEY_REUSE)]),
                        "02_b": exercise([check("fast", failed, speedup=2.0), check("s2")])}),
        entry("reuse_jit", {"01_a": exercise([check("c1", failed, "key_reuse", KEY_REUSE_JIT),
                                              check("c2")]),
                            "02_b": exercise([check("fast", failed, speedup=3.0), check("s2")])}),
        entry("loops", {"01_a": exercise([check("c1", failed, "timeout", "ran out of time"),
                                          check("c2", "timed out")]),
                        "02_b": exercise([check("fast", speedup=30.0),
                                          check("s2", failed, exception="MemoryError")])}),
        entry("crashes", {"01_a": exercise([check("c1", "crashed"), check("c2", "not run")]),
                          "02_b": exercise([check("fast", "error"), check("s2", "error")],
                                           note=SYNTAX_ERROR)}),
    ]  # fmt: skip


def test_every_failed_check_has_one_cause_counted_in_students():
    numbers = class_report.class_numbers(made_up_class())
    causes = {(c["kind"], c["label"]): c for c in numbers["causes"]}
    who = {key: [s["name"] for s in c["students"]] for key, c in causes.items()}
    # Two wordings of one rule are one cause; the stub's failures are not in it.
    assert who["diagnosis", KEY_REUSE] == ["reuse", "reuse_jit"]
    assert causes["diagnosis", KEY_REUSE]["checks"] == 3
    assert causes["diagnosis", KEY_REUSE]["fix"] == "fix for key_reuse"
    # A failed assertion's cause is the requirement its check names.
    assert who["check not met", "fast"] == ["reuse", "reuse_jit"]
    # Checks stopped before judging, and a file that does not load, are rows of their own.
    assert who["timed out", "timed out in 01_a"] == ["loops"]
    assert causes["timed out", "timed out in 01_a"]["checks"] == 2
    assert who["out of memory", "out of memory in 02_b"] == ["loops"]
    assert who["crashed", "crashed in 01_a"] == ["crashes"]
    # A file with no verdict is said as the CSV says it: its error and its line.
    assert who["no verdict for the file", SYNTAX_ERROR.splitlines()[0]] == ["crashes"]
    assert not any("stub" in names for names in who.values())
    assert [c["kind"] for c in numbers["causes"][:2]] == ["diagnosis", "check not met"]


def test_the_roster_says_what_each_student_got_wrong_and_left_undone():
    roster = {r["submission"]: r for r in class_report.class_numbers(made_up_class())["roster"]}
    assert roster["stub"]["not_started"] == ["01_a"] and roster["stub"]["missing"] == ["02_b"]
    assert roster["stub"]["mistakes"] == roster["stub"]["stopped"] == []
    assert roster["solved"]["solved"] == ["01_a", "02_b"]
    reuse = roster["reuse"]["mistakes"]
    assert [(m["label"], m["checks"]) for m in reuse] == [(KEY_REUSE, 2), ("fast", 1)]
    assert [(s["kind"], s["exercise"]) for s in roster["loops"]["stopped"]] == [
        ("timed out", "01_a"),
        ("out of memory", "02_b"),
    ]
    causes = {c["anchor"] for c in class_report.class_numbers(made_up_class())["causes"]}
    assert {m["cause"] for r in roster.values() for m in r["mistakes"] + r["stopped"]} <= causes


def test_checks_and_exercises_are_counted_in_students_who_worked_on_them():
    numbers = class_report.class_numbers(made_up_class())
    checks = {(c["exercise"], c["check"]): c for c in numbers["checks"]}
    c1 = checks["01_a", "c1"]
    assert (c1["passed"], c1["ran"]) == (1, 5), "the untouched stub is left out"
    assert [s["name"] for s in c1["failed_by"]] == ["reuse", "reuse_jit", "loops", "crashes"]
    exercises = {e["id"]: e for e in numbers["exercises"]}
    assert (exercises["01_a"]["worked_on"], exercises["01_a"]["not_started"]) == (5, 1)
    assert (exercises["02_b"]["missing"], exercises["02_b"]["solved"]) == (1, 1)


def test_speedups_count_only_students_who_worked_on_the_exercise():
    """An untouched stub's eager code, where a gradebook timed it (02's stub: 3.90×), is
    no one's speed: the page counts the stub nowhere else either."""
    submissions = made_up_class()
    submissions[1]["exercises"]["02_b"] = exercise(
        [check("fast", "failed", speedup=3.9), check("s2")], not_started=True
    )
    (fast,) = class_report.class_numbers(submissions)["measured"]["speedup"]
    assert (fast["count"], fast["min"], fast["values"]) == (4, 2.0, [2.0, 3.0, 20.0, 30.0])
    page = class_report.render_html(class_report.class_numbers(submissions))
    assert "3.90×" not in page and "who worked on the exercise" in page


def test_every_measure_a_check_records_reaches_the_page():
    """Not the speedup alone: each of MEASURES, by its title, where any check measured it."""
    submissions = made_up_class()
    counted = check("counted")
    counted["measurements"] = {"compilations": 2}
    submissions[0]["exercises"]["01_a"]["checks"].append(counted)
    numbers = class_report.class_numbers(submissions)
    (compiled,) = numbers["measured"]["compilations"]
    assert (compiled["check"], compiled["values"]) == ("counted", [2])
    assert numbers["measured"]["kept_kib"] == []
    page = class_report.render_html(numbers)
    assert "compilations across the class" in page and "lower is better" in page
    assert "memory kept for backward across the class" not in page


def test_the_page_links_students_checks_and_causes_and_writes_numbers_one_way():
    page = class_report.render_html(class_report.class_numbers(made_up_class()))
    numbers = class_report.class_numbers(made_up_class())
    for student in numbers["roster"]:
        assert f"id='{student['anchor']}'" in page
        got_wrong = bool(student["mistakes"] or student["stopped"])
        assert (f"href='#{student['anchor']}'" in page) == got_wrong, student["submission"]
    for cause in numbers["causes"]:
        assert f"id='{cause['anchor']}'" in page
    assert "6 students · mean 0.67 · median 0.50 · range 0.00–2.00 of 2.00 points" in page
    assert "1.4167" not in page and "0.6667" not in page
    assert "3 students" in page or "2 students" in page


def test_a_file_that_does_not_load_is_said_as_the_gradebook_says_it():
    """The roster and the causes say the file's error and line, not "no verdict"; two
    students' different errors are two causes."""
    submissions = made_up_class()
    other = "SyntaxError: invalid syntax (02_b.py, line 9)"
    submissions[2]["exercises"]["02_b"]["note"] = other
    numbers = class_report.class_numbers(submissions)
    roster = {r["submission"]: r for r in numbers["roster"]}
    assert SYNTAX_ERROR.splitlines()[0] in [m["label"] for m in roster["crashes"]["mistakes"]]
    assert [m["label"] for m in roster["reuse"]["mistakes"]] == [KEY_REUSE, other]
    page = class_report.render_html(numbers)
    assert "line 3" in page and "line 9" in page and "02_b: no verdict" not in page


def test_checks_every_student_passed_are_counted_not_listed():
    page = class_report.render_html(class_report.class_numbers(made_up_class()))
    assert "Not listed" not in page, "someone failed each of the made-up class's checks"
    everyone = made_up_class()[:1]  # one student who passed every check
    page = class_report.render_html(class_report.class_numbers(everyone))
    assert "Not listed: 4 checks every student who worked on its exercise passed." in page
    assert "<span id='k-" not in page


def test_a_submission_with_nothing_in_it_is_said_once():
    submissions = made_up_class()
    nothing = {"01_a": exercise([], missing=True), "02_b": exercise([], missing=True)}
    submissions.append({**entry("empty", nothing), "nothing_submitted": True})
    numbers = class_report.class_numbers(submissions)
    (empty,) = [r for r in numbers["roster"] if r["submission"] == "empty"]
    assert empty["nothing_submitted"] and empty["mistakes"] == []
    page = class_report.render_html(numbers)
    row = page.split(f"id='{empty['anchor']}'")[1].split("</tr>")[0]
    assert "nothing submitted" in row and "missing" not in row


def test_the_roster_s_columns_and_who_is_not_on_it_reach_the_page():
    entries = made_up_class()
    entries[0]["roster"] = {"student_id": "s-1", "name": "<b>Sol</b>", "email": "sol@example.org"}
    entries[1]["not_on_roster"] = True
    numbers = class_report.class_numbers(entries)
    roster = {r["submission"]: r for r in numbers["roster"]}
    assert roster["solved"]["roster"]["email"] == "sol@example.org"
    assert roster["stub"]["not_on_roster"] and not roster["solved"]["not_on_roster"]
    page = class_report.render_html(numbers)
    assert "s-1 · &lt;b&gt;Sol&lt;/b&gt; · sol@example.org" in page and "<b>Sol" not in page
    assert page.count("not on the roster") == 1


def test_the_page_fits_a_phones_screen():
    page = class_report.render_html(class_report.class_numbers(made_up_class()))
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page


def test_the_speedup_axis_has_its_unit_and_a_tick_each_decade():
    assert class_report._axis_ticks(2.0, 30.0) == [1, 10, 100]
    assert class_report._axis_ticks(4.1, 935.0) == [1, 10, 100, 1000]
    assert class_report._axis_ticks(0.5, 0.8) == [0.1, 1]
    strip = class_report._speedup_strip([2.0, 30.0])
    assert ">1×<" in strip and ">100×<" in strip and "× faster than eager" in strip
    dots = [float(x) for x in re.findall(r"cx='([\d.]+)'", strip)]
    assert 12 < dots[0] < dots[1] < 228, "each dot inside the axis, in order"


HOSTILE_NAME = "<script>alert('name')</script>&\"x\".zip"
HOSTILE_MESSAGE = "</pre><img src=x onerror=alert(1)>" + "y" * 100_000


def test_the_report_escapes_everything_a_submission_wrote():
    submissions = made_up_class()
    submissions[2]["submission"] = HOSTILE_NAME
    submissions[2]["exercises"]["01_a"]["checks"][0]["message"] = HOSTILE_MESSAGE
    submissions[3]["exercises"]["01_a"]["checks"][0]["diagnosis"] = "<b onclick=x>bold</b>"
    page = class_report.render_html(class_report.class_numbers(submissions), "<i>t</i>")
    assert "<script" not in page and "<img" not in page and "<b " not in page
    assert "&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;" in page
    assert "&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert len(page) < 80_000  # the huge message is cut to an example's length
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched from anywhere


# A small real class, graded once -------------------------------------------------------

FORGOT_JIT = "fast_fn is a plain function that forgot jax.jit"
ENDLESS_SET_FIRST = "\n\ndef set_first(x, value):\n    while True:\n        pass\n"
ZOE = "Zoë Ångström (resubmit)"


def mistake(exercise_id: str, name: str) -> str:
    spec = importlib.util.spec_from_file_location(
        "m", REPO / "tests" / "mistakes" / f"{exercise_id}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (found,) = [m for m in module.MISTAKES if m["name"] == name]
    return (REPO / "solutions" / f"{exercise_id}.py").read_text() + found["code"]


@pytest.fixture(scope="module")
def real_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("real-class")
    stubs = root / "stubs"
    committed_files(REPO, "exercises", stubs)
    solution = {
        e: (REPO / "solutions" / f"{e}.py").read_text() for e in ("01_immutability", "02_jit")
    }
    stub = {e: (stubs / f"{e}.py").read_text() for e in solution}
    students = {
        "alice": solution,
        # Untouched, though an editor wrote Windows line endings into one file.
        "bob": {"01_immutability": stub["01_immutability"],
                "02_jit": stub["02_jit"].replace("\n", "\r\n")},
        "carol": {"01_immutability": solution["01_immutability"],
                  "02_jit": mistake("02_jit", FORGOT_JIT)},
        "dave": {"01_immutability": solution["01_immutability"] + ENDLESS_SET_FIRST,
                 "02_jit": mistake("02_jit", FORGOT_JIT)},
        ZOE: {"02_jit": solution["02_jit"]},
    }  # fmt: skip
    for name, files in students.items():
        (root / "class" / name).mkdir(parents=True)
        for exercise_id, text in files.items():
            (root / "class" / name / f"{exercise_id}.py").write_bytes(text.encode())
    out = root / "out"
    out.mkdir()
    # As an instructor types it, in the class's folder: each student named by their folder.
    with contextlib.chdir(root / "class"):
        result = CliRunner().invoke(
            cli,
            ["--course", str(REPO), "grade", *sorted(os.listdir()),
             "--out", str(out / "grades.csv"), "--json", str(out / "grades.json"),
             "--report", str(out / "report.html"), "--jobs", "2", "--timeout", "15"],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_every_file_written_has_the_gradebooks_ordinary_mode(real_class):
    ordinary = 0o666 & ~current_umask()
    modes = {p.name: p.stat().st_mode & 0o777 for p in real_class.iterdir()}
    assert modes == dict.fromkeys(["grades.csv", "grades.json", "report.html"], ordinary)


@pytest.mark.slow
def test_the_gradebook_notes_untouched_stubs_and_time_outs(real_class):
    with (real_class / "grades.csv").open(newline="", encoding="utf-8") as stream:
        rows = {row["submission"]: row for row in csv.DictReader(stream)}
    assert "01_immutability: not started" in rows["bob"]["notes"]
    assert "02_jit: not started" in rows["bob"]["notes"], "CRLF line endings are no change"
    # The task's first check timed out; its second was not reached (the loop costs once).
    assert "01_immutability: 1 check timed out" in rows["dave"]["notes"]
    assert "not started" not in rows["carol"]["notes"]
    document = json.loads((real_class / "grades.json").read_text())
    assert "/tmp" not in json.dumps(document) and str(real_class.parent) not in json.dumps(document)


@pytest.mark.slow
def test_the_class_speedups_leave_out_the_untouched_stub(real_class):
    """bob's untouched 02 is never run, so never timed; the page counts him nowhere."""
    numbers = json.loads((real_class / "grades.json").read_text())["class"]
    (fast,) = [s for s in numbers["measured"]["speedup"] if s["check"].startswith("fast_fn")]
    worked_on = {e["id"]: e["worked_on"] for e in numbers["exercises"]}["02_jit"]
    assert fast["count"] == worked_on == 4, fast  # alice, carol, dave and Zoë


# The page in a real browser ------------------------------------------------------------

BROWSER_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and not os.environ.get("CI"):
        pytest.skip("chromium is not installed (CI installs it: .ci/run)")
    assert found, "CI needs chromium: apt-get install -y chromium"
    return found


class Browser:
    """Chromium driven over the DevTools protocol on a pipe (fds 3 and 4 of the browser):
    no port, no network, no package beyond the standard library."""

    def __init__(self, profile: Path) -> None:
        to_browser, self._commands = os.pipe()
        self._events, from_browser = os.pipe()

        def give_the_browser_its_pipes() -> None:
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self.process = subprocess.Popen(
            [chromium(), *BROWSER_FLAGS, f"--user-data-dir={profile}",
             "--remote-debugging-pipe", "about:blank"],
            preexec_fn=give_the_browser_its_pipes, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._last = b"", 0
        self.session: str | None = None

    def send(self, method: str, session: bool = True, **params):
        self._last += 1
        message = {"id": self._last, "method": method, "params": params}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._last:
                    assert "error" not in reply, reply
                    return reply["result"]
            ready, _, _ = select.select([self._events], [], [], deadline - time.monotonic())
            assert ready, f"the browser did not answer {method}"
            chunk = os.read(self._events, 1 << 20)
            assert chunk, "the browser closed its pipe"
            self._buffer += chunk

    def open(self, url: str, width: int) -> None:
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=900,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        self.send("Page.navigate", url=url)
        while self.evaluate("document.readyState") != "complete":
            time.sleep(0.1)

    def evaluate(self, expression: str):
        found = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return found["result"].get("value")

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        os.close(self._commands)
        os.close(self._events)


# What the page hides or cuts off: an element that clips its content (a scroll box), one
# hidden, or one that runs past the page's width. SVG's own shapes are drawn, not laid out.
CLIPPED = """(() => {
  const found = [], width = document.documentElement.clientWidth;
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') && el.tagName !== 'svg') continue;
    const style = getComputedStyle(el), name = el.tagName + ' ' + el.textContent.slice(0, 50);
    if (style.display === 'none' || style.visibility === 'hidden') found.push('hidden: ' + name);
    const clips = el.tagName !== 'svg'
      && [style.overflowX, style.overflowY].some(o => o !== 'visible');
    if (clips && (el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1))
      found.push('clipped: ' + name);
    if (el.getBoundingClientRect().right > width + 1) found.push('past the page: ' + name);
  }
  return found;
})()"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    opened = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield opened
    opened.close()


@pytest.mark.slow
def test_the_class_report_reads_in_a_real_browser(real_class, browser):
    browser.open((real_class / "report.html").as_uri(), width=1100)
    text = browser.evaluate("document.body.innerText")
    roster = browser.evaluate(
        "[...document.querySelectorAll('table.roster tbody tr')].map(r => r.innerText)"
    )
    assert len(roster) == 5 and any(row.startswith(ZOE) for row in roster)
    (bob,) = [row for row in roster if row.startswith("bob")]
    assert bob.count("not started") == 2 and "none" in bob
    (dave,) = [row for row in roster if row.startswith("dave")]
    assert "timed out" in dave and "01_immutability" in dave and "compiles slow_fn" in dave
    causes = browser.evaluate(
        "[...document.querySelectorAll('table.causes tbody tr')]"
        ".map(r => [...r.cells].map(c => c.innerText))"
    )
    forgot_jit = [row for row in causes if "compiles slow_fn into one program" in row[1]]
    assert [(row[2], row[4]) for row in forgot_jit] == [("2 students", "carol, dave")]
    timed_out = [row for row in causes if row[0] == "timed out"]
    assert [(row[1].splitlines()[0], row[2]) for row in timed_out] == [
        ("timed out in 01_immutability", "1 student")
    ]
    assert not any("bob" in row[4] for row in causes), "untouched stubs are no mistakes"
    assert "/tmp" not in text and str(real_class.parent) not in text
    # The links lead somewhere: every href names an element of the page.
    assert browser.evaluate(
        "[...document.querySelectorAll('a[href^=\"#\"]')]"
        ".every(a => document.getElementById(a.getAttribute('href').slice(1)))"
    )


@pytest.mark.slow  # a real class graded, an endless loop's 15 s among it
def test_the_class_report_prints_whole(real_class, browser):
    """In print (an A4 page's width), nothing is hidden, clipped or past the edge, and
    the PDF has every page."""
    browser.open((real_class / "report.html").as_uri(), width=720)
    browser.send("Emulation.setEmulatedMedia", media="print")
    assert browser.evaluate("matchMedia('print').matches")
    assert browser.evaluate(CLIPPED) == []
    pdf = base64.b64decode(browser.send("Page.printToPDF", printBackground=True)["data"])
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000


def test_a_scroll_box_is_caught_as_clipped(tmp_path, browser):
    """The print check can fail: the page's old example box (a max-height scroll box)."""
    page = tmp_path / "boxed.html"
    page.write_text(
        "<!DOCTYPE html><html><body><pre style='max-height:2rem;overflow:auto'>"
        + "a line\n" * 20
        + "</pre></body></html>"
    )
    browser.open(page.as_uri(), width=720)
    browser.send("Emulation.setEmulatedMedia", media="print")
    assert any(found.startswith("clipped: PRE") for found in browser.evaluate(CLIPPED))
