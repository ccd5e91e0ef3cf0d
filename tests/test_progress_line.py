"""`kata check` shows a grading as it goes, on a terminal alone: a line redrawn in place
(the exercise, its place, the checks done and failed), and each exercise's verdict in a
line as the grading moves past it; then the report, as anywhere else."""

import json
import re

import pytest
from click.testing import CliRunner

from kata.cli import cli, learner

from .helpers import solve


def screen(output: str) -> list[str]:
    """What a terminal shows of `output`: a carriage return goes back to the line's start,
    and what follows it is written over what was there."""
    lines = []
    for line in output.split("\n"):
        shown = ""
        for part in line.split("\r"):
            shown = part + shown[len(part) :]
        lines.append(shown.rstrip())
    return lines


def check(course, *args, terminal, monkeypatch):
    """`kata check ARGS`, its output a terminal or not."""
    monkeypatch.setattr(learner, "_is_terminal", lambda: terminal)
    return CliRunner().invoke(cli, ["--course", str(course), "check", *args])


def test_on_a_terminal_each_verdict_shows_as_the_grading_moves_past_its_exercise(mini, monkeypatch):
    solve(mini, "01_demo")
    result = check(mini, terminal=True, monkeypatch=monkeypatch)
    assert result.exit_code == 1, result.output
    drawn = result.stdout
    assert "[1/2] 01_demo · checks: 0 done, 0 failed" in drawn
    assert "[2/2] 02_other · checks: 3 done, 0 failed" in drawn
    # 01's verdict comes once 02's first check starts, not at the end.
    assert drawn.index("✓ 01_demo") < drawn.index("[2/2] 02_other") < drawn.index("✗ 02_other")
    shown = screen(drawn)
    assert shown[:3] == ["✓ 01_demo  3 of 3 checks passed", "✗ 02_other  0 of 1 checks passed", ""]
    assert shown[3].startswith("01_demo · Demo one"), "the report follows"
    assert "1 of 2 exercises passed (3 of 4 checks)" in shown
    assert not any("checks: " in line for line in shown), "the progress line stayed"


def test_one_exercise_on_a_terminal_shows_the_line_but_no_verdict_line(mini, monkeypatch):
    result = check(mini, "02", terminal=True, monkeypatch=monkeypatch)
    assert re.search(
        r"\r\[1/1\] 02_other · checks: 0 done, 0 failed · \d+ s · answer: is 42", result.stdout
    )
    shown = screen(result.stdout)
    assert shown[0].startswith("02_other · Demo two"), "no verdict line before the report"
    assert not any("checks: " in line for line in shown), "the progress line stayed"


@pytest.mark.parametrize(("terminal", "output_format"), [(False, "text"), (True, "json")])
def test_nothing_extra_off_a_terminal_or_in_a_format_for_programs(
    mini, monkeypatch, terminal, output_format
):
    result = check(
        mini, "02", "--format", output_format, terminal=terminal, monkeypatch=monkeypatch
    )
    assert result.exit_code == 1, result.output
    assert "\r" not in result.stdout and "checks: " not in result.stdout
    if output_format == "json":
        assert json.loads(result.stdout)
    else:
        assert result.stdout.startswith("02_other · Demo two")
