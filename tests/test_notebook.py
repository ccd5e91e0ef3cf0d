"""The notebook mode: the course notebook run in a real Jupyter kernel, and check()."""

import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from kata import notebook
from kata.course import load_course
from kata.notebook.cell_files import save_cell
from kata.servers import warm

from .helpers import REPO

KERNEL_SECONDS = 600
# The last cell of a warm notebook run: the warm grader stopped, and how many runs it served.
STOP_WARM_GRADER = """\
from kata.servers import warm
from kata.supervisor.judge_process import grading_environment
from kata.notebook import notebook_course

course = notebook_course()
socket = warm.worker_socket(course.root, grading_environment(course.state_dir))
print("warm runs:", warm.stop_worker(socket))
"""


def _run(cells: list[str], folder: Path) -> list[dict]:
    """Execute code cells in a new IPython kernel started in `folder`; their outputs."""
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(
        book,
        timeout=KERNEL_SECONDS,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute()
    return [cell["outputs"] for cell in book.cells]


def _text(outputs: list[dict]) -> str:
    parts = []
    for output in outputs:
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return "\n".join(parts)


def _errors(outputs: list[list[dict]]) -> list[dict]:
    return [o for cell in outputs for o in cell if o["output_type"] == "error"]


def _warm_runs(outputs: list[dict]) -> int:
    return int(_text(outputs).split("warm runs:")[1].split()[0])


def _notebook_cells(course_root: Path) -> list[tuple[str, str]]:
    return notebook.course_cells(load_course(course_root))


def test_the_command_line_never_imports_ipython_or_nbformat():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, kata.cli; print('IPython' in sys.modules, "
         "'nbformat' in sys.modules)"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert loaded.split() == ["False", "False"]


def test_the_course_notebook_has_each_lesson_stub_and_folded_hint(tmp_path):
    from click.testing import CliRunner

    from kata.cli import cli

    out = tmp_path / "course.ipynb"
    assert CliRunner().invoke(cli, ["notebook", "--out", str(out)]).exit_code == 0
    book = nbformat.read(str(out), as_version=4)
    nbformat.validate(book)
    sources = [cell.source for cell in book.cells]
    assert "%load_ext kata" in sources[1] and "# %pip install kata-jax" in sources[1]
    course = load_course(REPO)
    for exercise in course.exercises:
        stub = (REPO / "exercises" / exercise.filename).read_text()
        cell = next(s for s in sources if s.startswith(f"%%kata {exercise.id}\n"))
        assert cell.split("\n", 1)[1] == notebook.cell_code(stub)
        assert notebook.cell_code(stub).strip() in stub  # the code whole, less its lesson
        assert any(exercise.hints[-1] in s and "<details>" in s for s in sources)
    again = CliRunner().invoke(cli, ["notebook", "--out", str(out)])
    assert again.exit_code == 2


@pytest.mark.slow
def test_the_stub_notebook_runs_to_the_end_showing_failed_verdicts(tmp_path, monkeypatch):
    """No course around the kernel's folder: `%kata` writes ./kata-course, and says so once.
    Graded warm, as a learner's notebook is. The 8 cells took 184 s warm, 197 s cold, on 2
    shared cores at load 13, where `kata check` of all 8 stubs at once took 139 s; 85 s
    warm at load 5."""
    monkeypatch.delenv(warm.COLD_VARIABLE)
    code = [source for kind, source in _notebook_cells(REPO) if kind == "code"]
    started = time.monotonic()
    outputs = _run([*code, STOP_WARM_GRADER], tmp_path)
    print(f"stub notebook: {time.monotonic() - started:.1f} s")
    assert not _errors(outputs)
    assert _warm_runs(outputs.pop()) >= 1  # the first cell's run starts the warm grader
    assert _text(outputs[0]).count("wrote your course folder") == 1
    assert "01_immutability" in _text(outputs[0])  # %kata next
    verdicts = [_text(o) for o, c in zip(outputs, code, strict=True) if c.startswith("%%kata")]
    assert len(verdicts) == len(load_course(REPO).exercises)
    assert all("not yet passing" in v for v in verdicts), verdicts
    learner = tmp_path / "kata-course" / "exercises" / "05_prng.py"
    assert (
        learner.read_text() == next(c for c in code if c.startswith("%%kata 05")).split("\n", 1)[1]
    )


# The whole course with its solutions pasted in passed in 245 s (cold, load 13); the suite
# runs the exercises without timed checks, which take most of that.
PASTED = ("01_immutability", "04_vmap", "06_pytrees")


@pytest.mark.slow
def test_the_notebook_with_the_reference_solutions_passes(tmp_path, monkeypatch):
    monkeypatch.delenv(warm.COLD_VARIABLE)
    code = []
    for kind, source in _notebook_cells(REPO):
        if kind == "code" and source.startswith("%%kata "):
            exercise_id = source.split()[1]
            if exercise_id not in PASTED:
                continue
            source = (
                f"%%kata {exercise_id}\n" + (REPO / "solutions" / f"{exercise_id}.py").read_text()
            )
        if kind == "code":
            code.append(source)
    code.append("%kata list")
    started = time.monotonic()
    outputs = _run([*code, STOP_WARM_GRADER], tmp_path)[:-1]
    print(f"solution notebook: {time.monotonic() - started:.1f} s")
    assert not _errors(outputs)
    verdicts = [_text(o) for o, c in zip(outputs, code, strict=True) if c.startswith("%%kata")]
    assert all(" passed: " in v and "not yet" not in v for v in verdicts), verdicts
    assert len(verdicts) == len(PASTED)
    assert f"{len(PASTED)} of {len(load_course(REPO).exercises)} done" in _text(outputs[-1])


def test_an_endless_loop_in_a_cell_times_out_and_the_kernel_lives_on(tmp_path):
    endless = (
        (REPO / "solutions" / "01_immutability.py")
        .read_text()
        .replace(
            "def set_first(x, value):\n",
            "def set_first(x, value):\n    while True:\n        pass\n",
        )
    )
    cells = [
        "%load_ext kata",
        f"%%kata 01 --timeout 2\n{endless}",
        "%kata hint",
        "%%kata 99\npass",
        "40 + 2",
    ]
    outputs = _run(cells, tmp_path)
    assert not _errors(outputs)
    verdict = _text(outputs[1])
    assert "Timeout (>2.0s)" in verdict and "not yet passing" in verdict, verdict
    # set_first is the learner's own now: the hint answers its failure, the endless loop.
    assert "about your last failed check" in _text(outputs[2])
    assert "ran out of time" in _text(outputs[2])
    assert (
        _text(outputs[3]).strip() == "kata: no exercise matches '99'; run `kata list` to see them"
    )
    assert _text(outputs[4]) == "42"


def test_check_returns_a_verdict_with_html_and_text(real_course):
    stub = (real_course / "exercises" / "01_immutability.py").read_text()
    failing = notebook.check("01", source=stub, course=real_course)
    assert not failing.passed
    html = failing._repr_html_()
    assert "✗" in html and "<b>why:</b>" in html and "immutable" in html
    assert "not yet passing" in repr(failing) and "\x1b[" not in repr(failing)

    solution = (REPO / "solutions" / "01_immutability.py").read_text()
    passing = notebook.check("01_immutability", source=solution, course=real_course)
    assert passing.passed and "✗" not in passing._repr_html_()
    assert passing._repr_html_().count("✓") == len(passing.outcome.checks) + 1
    assert "Well done: 01_immutability solved" in repr(passing)
    assert (real_course / "exercises" / "01_immutability.py").read_text() == solution


def test_the_html_verdict_shows_the_failing_line_by_its_cell_line_and_renders_code(real_course):
    # As a `%%kata 11` cell: the file's line 3 is the cell's line 4, under the `%%kata` line.
    source = "import jax.numpy as jnp\n\ndef scale(x, s):\n    return (x * s).to(x.dtype)\n"
    solution = (REPO / "solutions" / "11_precision.py").read_text()
    cell = solution + "\n" + source
    failing = notebook.check("11", source=cell, course=real_course, cell_offset=1)
    file_line = cell.splitlines().index("    return (x * s).to(x.dtype)") + 1
    html = failing._repr_html_()
    assert f"cell line {file_line + 1}: return (x * s).to(x.dtype)</code>" in html, html
    assert "<code>x.astype(dtype)</code>" in html and "`" not in html.split("why:")[1]
    assert f"at cell line {file_line + 1}: return (x * s).to(x.dtype)" in repr(failing)
    folded = html.count("cut to one line")
    verbose = notebook.check("11", course=real_course, cell_offset=1, verbose=True)
    assert folded == 1 and "cut to one line" not in verbose._repr_html_()
    assert verbose._repr_html_().count("<b>why:</b>") > html.count("<b>why:</b>")


def test_the_magic_takes_v_rules_and_lists_aligned(real_course, monkeypatch, capsys):
    monkeypatch.chdir(real_course)
    assert notebook._cell_options(["01", "-v", "--timeout", "5"]) == ("01", 5.0, False, True)
    shown = notebook.kata_magic("rules view")
    assert "x.view() → `x.reshape(-1, d)`" in shown.text
    assert "<code>x.reshape(-1, d)</code>" in shown._repr_html_()
    assert "Rules to remember" in notebook.kata_magic("rules").text
    listed = notebook.kata_magic("list").text.splitlines()[1:]
    columns = {line.index(exercise.title) for line, exercise in zip(
        listed, load_course(real_course).exercises, strict=True
    )}  # fmt: skip
    assert len(columns) == 1, listed


def test_a_bare_hint_answers_for_the_cell_this_kernel_checked_last(real_course, monkeypatch):
    """`%kata hint` after a failing `%%kata 11` cell answers for 11, the cell just failed,
    not for 01, the first exercise left unsolved (issue #58); once 11 passes, and in a
    kernel that checked no cell, it answers for the current exercise."""
    monkeypatch.chdir(real_course)
    monkeypatch.setattr(notebook, "LAST_CHECKED", {})
    assert notebook.kata_magic("hint").text.startswith("01_immutability · ")
    stub = (real_course / "exercises" / "11_precision.py").read_text()
    failing = notebook.kata_magic("11", stub)
    assert not failing.passed
    shown = notebook.kata_magic("hint").text
    assert shown.startswith("11_precision · "), shown
    assert notebook.kata_magic("hint 01").text.startswith("01_immutability · ")
    assert notebook.kata_magic("hint").text.startswith("11_precision · ")  # still the cell's
    solution = (REPO / "solutions" / "11_precision.py").read_text()
    assert notebook.kata_magic("11", solution).passed
    assert notebook.kata_magic("hint").text.startswith("01_immutability · ")


def test_a_running_cell_shows_which_check_runs_and_how_many_are_done(real_course, monkeypatch):
    import types

    updates = []

    class Handle:
        def update(self, shown, raw=False):
            updates.append(shown["text/plain"] if raw else shown.text)

    shell = types.ModuleType("IPython")
    shell.get_ipython = lambda: object()
    display = types.ModuleType("IPython.display")
    display.display = lambda shown, display_id: updates.append(shown.text) or Handle()
    monkeypatch.setitem(sys.modules, "IPython", shell)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    stub = (real_course / "exercises" / "01_immutability.py").read_text()
    result = notebook.check("01", source=stub, course=real_course)
    checks = len(result.outcome.checks)
    assert updates[0] == "grading 01_immutability…"
    # The verdict takes the progress line's place: no blank output above it, nor a second
    # copy as the cell's value.
    assert updates[-1] == repr(result) and "not yet passing" in updates[-1]
    assert result.shown_in_place and "" not in updates
    shown_again = []
    display.display = lambda *args, **kwargs: shown_again.append(args)
    result._ipython_display_()
    assert shown_again == []
    assert any(u.startswith("grading 01_immutability · 0 checks done") for u in updates)
    assert any(f"{checks} checks done" in u for u in updates), updates
    assert sum("running: " in u for u in updates) == checks


def test_a_result_not_shown_in_place_is_shown_as_the_cells_value(real_course, monkeypatch):
    import types

    shown = []
    display = types.ModuleType("IPython.display")
    display.display = lambda bundle, raw: shown.append((bundle, raw))
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    stub = (real_course / "exercises" / "01_immutability.py").read_text()
    result = notebook.check("01", source=stub, course=real_course)  # no IPython running
    assert not result.shown_in_place
    result._ipython_display_()
    assert shown == [({"text/plain": repr(result), "text/html": result._repr_html_()}, True)]


# Saving a cell --------------------------------------------------------------------------


def test_a_cell_replaces_the_stub_or_its_own_last_save_without_a_word(real_course):
    course = load_course(real_course)
    exercise = course.resolve("01")
    path = course.exercises_dir / exercise.filename
    first = path.read_text() + "\n# a first try\n"
    assert save_cell(course, exercise, path, first) is None, "the stub as given is replaced"
    second = first + "# a second try\n"
    assert save_cell(course, exercise, path, second) is None, "the cell's own last save"
    assert save_cell(course, exercise, path, second) is None, "the same code again"
    assert path.read_text() == second
    assert not (course.state_dir / "backups").exists()


def test_code_written_outside_the_notebook_is_kept_and_the_verdict_says_where(real_course):
    course = load_course(real_course)
    exercise = course.resolve("01")
    path = course.exercises_dir / exercise.filename
    edited = "# written in an editor, or with kata check\n" + path.read_text()
    path.write_text(edited)
    cell = (REPO / "solutions" / "01_immutability.py").read_text()
    result = notebook.check("01", source=cell, course=real_course)
    (kept,) = (course.state_dir / "backups").iterdir()
    assert kept.read_text() == edited and path.read_text() == cell
    said = f"kept as .kata/backups/{kept.name}"
    assert said in repr(result) and said in result._repr_html_()
    # Edited outside again, twice in one second: a second backup, the first one intact.
    for text in ("# again\n", "# and again\n"):
        path.write_text(text)
        assert "kept as" in save_cell(course, exercise, path, cell)
    backups = sorted(p.read_text() for p in (course.state_dir / "backups").iterdir())
    assert backups == sorted([edited, "# again\n", "# and again\n"])
