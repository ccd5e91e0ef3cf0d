"""The `kata` command line, through click's CliRunner and as a real subprocess."""

import shutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from kata import __version__
from kata.cli import cli
from kata.learning.session import Session

from .helpers import REPO, kata, kata_process, solve


def command_names() -> list[str]:
    return cli.list_commands(click.Context(cli))


def test_version_and_help():
    assert __version__ in CliRunner().invoke(cli, ["--version"]).output
    assert len(command_names()) >= 11
    for name in command_names():
        result = CliRunner().invoke(cli, [name, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output, name


def test_a_learners_command_imports_none_of_the_instructors():
    """`kata check` is run again and again: the gradebook, Gradescope and shard modules
    are imported only for the commands that use them."""
    instructors = ["kata.cli.instructor", "kata.instructor.gradebook", "kata.instructor.gradescope"]
    instructors += ["kata.instructor.shards", "kata.instructor.verify", "kata.supervisor.doctor"]
    found = (
        "import sys; from kata.cli import cli; cli.get_command(None, 'check'); "
        f"print([m for m in {instructors!r} if m in sys.modules], "
        "'kata.cli.learner' in sys.modules)"
    )
    imported = subprocess.run([sys.executable, "-c", found], capture_output=True, text=True)
    assert imported.stdout.strip() == "[] True", imported


def test_every_command_is_in_the_readme():
    readme = (REPO / "README.md").read_text()
    table = [line for line in readme.splitlines() if line.startswith("| `kata ")]
    documented = {line.split("`kata ", 1)[1].split()[0].rstrip("`") for line in table}
    assert documented == set(command_names())


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


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_checking_your_own_work_records_progress_in_every_format(mini, output_format):
    solve(mini, "01_demo")
    assert kata(mini, "check", "01", "--format", output_format).exit_code == 0
    session = Session.open(mini)  # what was recorded, without re-grading as `list` does
    assert session.is_done(session.course.resolve("01"))


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
    # The file counts its imports outside its run: no Landlock, no container.
    monkeypatch.setenv("KATA_CONFINEMENT", "off")
    monkeypatch.setenv("KATA_CONTAINER_WITHOUT", "all")
    imports = mini / "imports.log"
    stub = (mini / "exercises" / "01_demo.py").read_text()
    (mini / "exercises" / "01_demo.py").write_text(
        f"open({str(imports)!r}, 'a').write('imported\\n')\n" + stub
    )
    shown = kata(mini, "next")
    assert "0 of 3 checks passed" in shown.output
    assert imports.read_text().count("imported") == 1


def test_hints_come_one_at_a_time_then_all(mini):
    assert "02_other · hint 1 of 2: Only hint one." in kata(mini, "hint", "2").output
    second = kata(mini, "hint", "other")
    assert "hint 2 of 2: Only hint two." in second.output and "last hint" in second.output
    every = kata(mini, "hint", "2", "--all").output
    assert "Hint 1 of 2: Only hint one." in every and "Hint 2 of 2" in every


def test_hints_follow_the_first_unsolved_task(mini):
    """Per-task hints: the next hint is for the first task the last check left unsolved."""
    assert "01_demo · double · hint 1 of 2: Double hint one." in kata(mini, "hint").output
    stub = (mini / "exercises" / "01_demo.py").read_text()
    (mini / "exercises" / "01_demo.py").write_text(stub.replace("return x  # TODO", "return 2 * x"))
    assert kata(mini, "check", "1").exit_code == 1
    assert "01_demo · draw · hint 1 of 2: Draw hint one." in kata(mini, "hint").output
    every = kata(mini, "hint", "--all").output
    assert "Hint 2 of 2: Second hint" in every
    assert "double · hint 2 of 2: Double hint two." in every and "draw · hint 1 of 2" in every


def test_hint_checks_a_changed_file_first_and_moves_on(mini):
    """No `kata check` in between: `kata hint` grades what changed since the last check, so a
    learner who just fixed one task gets the next task's hint, then the next exercise's."""
    stub = (mini / "exercises" / "01_demo.py").read_text()
    assert "01_demo · double · hint 1 of 2: Double hint one." in kata(mini, "hint").output
    (mini / "exercises" / "01_demo.py").write_text(stub.replace("return x  # TODO", "return 2 * x"))
    fixed = kata(mini, "hint", "1")
    assert "checking what changed since last time: 01_demo" in fixed.stderr
    assert "01_demo · draw · hint 1 of 2: Draw hint one." in fixed.output
    assert "double" not in fixed.stdout
    solve(mini, "01_demo")
    assert "02_other · hint 1 of 2: Only hint one." in kata(mini, "hint").output
    listing = kata(mini, "list")  # the verdict was recorded: nothing left to grade
    assert "✓ done     01_demo" in listing.output and "checking" not in listing.stderr


def test_verify_wants_hints_for_every_task_once_an_exercise_has_task_hints(mini):
    manifest = mini / "course.toml"
    manifest.write_text(
        manifest.read_text().replace('draw = ["Draw hint one.", "Draw hint two."]', "")
    )
    broken = kata(mini, "verify")
    assert broken.exit_code == 1
    assert "01_demo: task 'draw' has 0 hints in its [exercise.task_hints]; needs 2" in broken.output


def test_rules_print_each_lessons_rule_and_the_mapping(real_course):
    shown = kata(real_course, "rules")
    assert shown.exit_code == 0, shown.output
    assert "05  a key is used once: split it for every new draw, never reuse it." in shown.output
    assert "x.index_add_(0, idx, v)" in shown.output and "x = x.at[idx].add(v)" in shown.output


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


def test_doctor_prints_only_its_findings(mini):
    """Its container probe forks after JAX is imported, which JAX warns about each time."""
    doctor = kata_process("doctor", cwd=mini)
    assert "Warning" not in doctor.stderr, doctor.stderr


@pytest.mark.slow
def test_verify_passes_a_sound_course_and_names_what_breaks(mini):
    sound = kata(mini, "verify")
    assert sound.exit_code == 0, sound.output
    solve(mini, "02_other")  # a stub that passes its checks breaks the rule
    (mini / "solutions" / "01_demo.py").write_text('"""Broken."""\ndef double(x):\n    return x\n')
    broken = kata(mini, "verify")
    assert broken.exit_code == 1
    assert "02_other: the stub passes every check of task 'answer'" in broken.output
    assert "01_demo: the solution fails check 'double: doubles eagerly'" in broken.output


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_every_grading_command_refuses_before_it_grades_in_one_line(mini, tmp_path, monkeypatch):
    """One pre-flight (kata.reporting.preflight) for the learner's and the instructor's
    commands: a file that cannot be written, or submissions that cannot be confined, is
    one line and exit 2 before any grading."""
    unwritable = str(tmp_path / "missing" / "out.xml")
    submission = tmp_path / "student"
    submission.mkdir()
    refusals = [
        (["check", "01", "--format", "junit", "--out", unwritable], "does not exist"),
        (["grade", str(submission), "--out", unwritable], "does not exist"),
        (["grade", str(submission), "--out", "g.csv", "--json", unwritable], "does not exist"),
    ]
    for args, expected in refusals:
        result = kata(mini, *args)
        assert result.exit_code == 2 and expected in result.output, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output
    monkeypatch.setenv("KATA_CONFINEMENT", "off")
    result = kata(mini, "grade", str(submission), "--out", str(tmp_path / "grades.csv"))
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "kata: cannot confine submissions: confinement is switched off (KATA_CONFINEMENT=off); "
        "pass --unconfined to grade them with your own rights anyway"
    )
    assert not (tmp_path / "grades.csv").exists()
