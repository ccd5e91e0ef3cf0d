"""The `kata` command line, through click's CliRunner and as a real subprocess."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kata import __version__
from kata.cli import cli


def kata(course: Path, *args: str):
    return CliRunner().invoke(cli, ["--course", str(course), *args])


def kata_process(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kata", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def solve(course: Path, exercise: str) -> None:
    shutil.copy(course / "solutions" / f"{exercise}.py", course / "exercises" / f"{exercise}.py")


def test_version_and_help(mini):
    assert __version__ in CliRunner().invoke(cli, ["--version"]).output
    commands = ("list", "next", "check", "hint", "reset", "solution", "watch", "verify", "doctor")
    for command in commands:
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output, command


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["check", "nope"], "no exercise matches 'nope'"),
        (["check", "dmeo"], "did you mean 01_demo?"),
        (["hint", "9"], "no exercise matches '9'"),
        (["check", "--bogus"], "No such option"),
        (["check", "--solutions", "--dir", "."], "give one"),
        (["frobnicate"], "No such command"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(mini, args, expected):
    result = kata(mini, *args)
    assert result.exit_code == 2
    assert expected in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_no_course_found_exits_2(tmp_path):
    result = CliRunner().invoke(cli, ["--course", str(tmp_path), "list"])
    assert result.exit_code == 2
    assert "no kata course found" in result.output


def test_check_exit_codes_follow_the_verdict(mini):
    failing = kata(mini, "check", "01")
    assert failing.exit_code == 1
    assert "✗ double: doubles eagerly" in failing.output
    assert "double(2.0) should be 4.0" in failing.output
    assert "0 of 3 checks passed" in failing.output
    assert kata(mini, "check", "--solutions").exit_code == 0


def test_check_dir_grades_another_folder_without_recording_progress(mini, tmp_path):
    shutil.copytree(mini / "solutions", tmp_path / "student")
    assert kata(mini, "check", "--dir", str(tmp_path / "student")).exit_code == 0
    assert "→ current  01_demo" in kata(mini, "list").output


def test_solving_moves_the_learner_on(mini):
    assert "→ current  01_demo" in kata(mini, "list").output
    solve(mini, "01_demo")
    listing = kata(mini, "list")
    assert "✓ done     01_demo" in listing.output and "1 of 2 done" in listing.output
    following = kata(mini, "next")
    assert following.exit_code == 0
    assert "02_other · Demo two" in following.output
    solve(mini, "02_other")
    assert "All 2 exercises done" in kata(mini, "next").output


def test_next_grades_an_edited_exercise_once(mini, monkeypatch):
    """`kata next` re-grades what changed, and shows those results rather than grading again."""
    monkeypatch.setenv("KATA_CONFINEMENT", "off")  # the file counts its imports outside its run
    imports = mini / "imports.log"
    stub = (mini / "exercises" / "01_demo.py").read_text()
    (mini / "exercises" / "01_demo.py").write_text(
        f"open({str(imports)!r}, 'a').write('imported\\n')\n" + stub
    )
    shown = kata(mini, "next")
    assert "0 of 3 checks passed" in shown.output
    assert imports.read_text().count("imported") == 1


def test_hints_come_one_at_a_time_then_all(mini):
    assert "hint 1 of 2: First hint." in kata(mini, "hint").output
    second = kata(mini, "hint", "1")
    assert "hint 2 of 2: Second hint" in second.output and "last hint" in second.output
    assert "hint 2 of 2" in kata(mini, "hint", "demo").output
    every = kata(mini, "hint", "1", "--all").output
    assert "Hint 1 of 2: First hint." in every and "Hint 2 of 2" in every


def test_reset_restores_the_stub_and_keeps_a_backup(mini):
    path = mini / "exercises" / "01_demo.py"
    stub = path.read_text()
    path.write_text("my work in progress\n")
    result = kata(mini, "reset", "01")
    assert result.exit_code == 0
    assert path.read_text() == stub
    backups = list((mini / ".kata" / "backups").glob("01_demo.*.py"))
    assert [b.read_text() for b in backups] == ["my work in progress\n"]
    assert backups[0].name in result.output


def test_solution_refuses_until_solved(mini):
    refused = kata(mini, "solution", "01")
    assert refused.exit_code == 1 and "--force" in refused.output
    forced = kata(mini, "solution", "01", "--force")
    assert forced.exit_code == 0 and "+    return x * 2" in forced.output
    solve(mini, "01_demo")
    assert "identical to the reference" in kata(mini, "solution", "01").output


def test_corrupt_progress_is_reported_not_a_traceback(mini):
    (mini / ".kata").mkdir()
    (mini / ".kata" / "state.json").write_text("{{{")
    result = kata(mini, "list")
    assert result.exit_code == 0
    assert "unreadable" in result.output and "→ current" in result.output


def test_doctor_reports_backend_and_course(mini):
    result = kata(mini, "doctor")
    assert result.exit_code == 0, result.output
    for expected in ("jax", "jaxlib", "backend", "Device(id=0", "as the course shipped them"):
        assert expected in result.output
    (mini / "checks" / "test_01_demo.py").write_text("# tampered\n")
    tampered = kata(mini, "doctor")
    assert tampered.exit_code == 1 and "checks/test_01_demo.py" in tampered.output


def test_verify_passes_a_sound_course_and_names_what_breaks(mini):
    sound = kata(mini, "verify")
    assert sound.exit_code == 0, sound.output
    solve(mini, "02_other")  # a stub that passes its checks breaks the rule
    (mini / "solutions" / "01_demo.py").write_text('"""Broken."""\ndef double(x):\n    return x\n')
    broken = kata(mini, "verify")
    assert broken.exit_code == 1
    assert "02_other: the stub passes every check of task 'answer'" in broken.output
    assert "01_demo: the solution fails check 'double: doubles eagerly'" in broken.output


def test_a_new_learner_goes_from_clone_to_graded_exercise(real_course):
    """The README's promise, as real subprocesses on a fresh clone of the course."""
    first = kata_process("next", cwd=real_course)
    assert first.returncode == 0, first.stderr
    assert "01_immutability · Arrays never change in place" in first.stdout
    assert "exercises/01_immutability.py" in first.stdout
    check = kata_process("check", "01_immutability", cwd=real_course)
    assert check.returncode == 1
    assert check.stdout.count("✗") >= 4
    assert kata_process("check", "01_immutability", "--solutions", cwd=real_course).returncode == 0
    solve(real_course, "01_immutability")
    assert "✓ done     01_immutability" in kata_process("list", cwd=real_course).stdout
    assert "02_jit" in kata_process("next", cwd=real_course).stdout.splitlines()[0]
    unknown = kata_process("check", "nope", cwd=real_course)
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert len(unknown.stderr.strip().splitlines()) == 1


def test_watch_regrades_on_save_and_moves_on(mini):
    """`kata watch` as a learner runs it: a save is re-checked at once; a pass moves on."""
    watch = subprocess.Popen(
        [sys.executable, "-m", "kata", "watch"],
        cwd=mini, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    seen: list[str] = []

    def read_until(text: str) -> None:
        for line in watch.stdout:
            seen.append(line)
            if text in line:
                return
        raise AssertionError(f"watch ended before {text!r}: {''.join(seen)}")

    try:
        read_until("0 of 3 checks passed")
        solve(mini, "01_demo")
        read_until("checking 01_demo…")
        read_until("3 of 3 checks passed")
        read_until("02_other · Demo two")
        read_until("0 of 1 checks passed")
    finally:
        watch.terminate()
        watch.wait(timeout=30)
    assert "Watching exercises/ (file events (inotify))" in seen[0]
