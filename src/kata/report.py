"""Turning grading results into text for a person.

Every function returns lines (styled with click, which drops the colours when the output
is not a terminal); printing them is the CLI's business.
"""

from __future__ import annotations

import difflib
import shutil
import sys
import textwrap
import time
from pathlib import Path

import click

from kata.course import Exercise
from kata.learning.progress import CURRENT, DONE
from kata.results import CheckResult, ExerciseResult, Grading, Outcome

MESSAGE_LINES = 8
# A failing check shows what the learner's code printed; a passing or skipped one does not.
SHOWS_OUTPUT = (Outcome.FAILED, Outcome.ERROR, Outcome.CRASHED, Outcome.TIMED_OUT)
OUTPUT_LINES = 10


def _symbols() -> dict[str, str]:
    try:
        "✓✗•⏱".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return {"pass": "ok", "fail": "XX", "other": "--", "dot": "*"}
    return {"pass": "✓", "fail": "✗", "other": "•", "dot": "·"}


def display_path(path: str | Path) -> str:
    """Relative to the working folder when below it (terminals link it), else absolute."""
    absolute = Path(path).resolve()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def exercise_heading(exercise: Exercise, path: Path | None = None) -> str:
    dot = _symbols()["dot"]
    heading = click.style(f"{exercise.id} {dot} {exercise.title}", bold=True)
    return f"{heading}  ({display_path(path)})" if path else heading


def check_lines(check: CheckResult, already_explained: set[str] | None = None) -> list[str]:
    """A check's verdict; a failure already explained above gets a pointer, not a repeat."""
    marks = _symbols()
    if check.passed:
        lines = [f"  {click.style(marks['pass'], fg='green')} {check.name}"]
        return lines + [f"      {note}" for note in check.notes]
    mark = marks["other"] if check.outcome == Outcome.SKIPPED else marks["fail"]
    label = "" if check.outcome in (Outcome.FAILED, Outcome.ERROR) else f" [{check.outcome}]"
    lines = [f"  {click.style(mark, fg='red')} {check.name}{click.style(label, fg='yellow')}"]
    lines += [f"      {note}" for note in check.notes]
    key = f"{check.message}@{check.location}"
    if already_explained is not None and check.diagnosis and key in already_explained:
        first = check.message.strip().splitlines()[0] if check.message.strip() else ""
        return lines + [f"      {_clip_line(first)} (the same error as above)"]
    if already_explained is not None:
        already_explained.add(key)
    return lines + _failure_detail(check)


def _wrapped(text: str) -> list[str]:
    """A long line folded to the terminal's width, indented under its check."""
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 120))
    return textwrap.wrap(
        text, width=width, initial_indent="      ", subsequent_indent="        "
    ) or [""]


def _clip_line(line: str, width: int = 160) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def _failure_detail(check: CheckResult) -> list[str]:
    lines = []
    message = check.message.strip()
    if message:
        shown = message.splitlines()
        if check.diagnosis:
            # A JAX error explains itself at length; its first line and the diagnosis do.
            lines.append(f"      {_clip_line(shown[0])}")
        else:
            for line in shown[:MESSAGE_LINES]:
                lines += _wrapped(line)
        if len(shown) > (1 if check.diagnosis else MESSAGE_LINES):
            lines.append("      …")
    if check.location:
        place = f"{display_path(check.location['file'])}:{check.location['line']}"
        code = check.location.get("code") or ""
        lines.append(f"      at {place}" + (f": {code}" if code else ""))
    if check.diagnosis:
        lines += [
            click.style(line, fg="cyan") for line in _wrapped(f"why: {check.diagnosis['cause']}")
        ]
        lines += [
            click.style(line, fg="cyan") for line in _wrapped(f"fix: {check.diagnosis['fix']}")
        ]
    if check.output.strip() and check.outcome in SHOWS_OUTPUT:
        printed = check.output.strip().splitlines()
        lines.append("      your code printed:")
        lines += [f"        {line}" for line in printed[:OUTPUT_LINES]]
        if len(printed) > OUTPUT_LINES:
            lines.append(f"        … ({len(printed) - OUTPUT_LINES} more lines)")
    return lines


def exercise_lines(result: ExerciseResult, path: Path | None = None) -> list[str]:
    """A heading, one line per check with the failure explained, and a count."""
    lines = [exercise_heading(result.exercise, path)]
    if result.problem is not None:
        lines.append(
            f"  {click.style(_symbols()['fail'], fg='red')} {_problem_title(result, path)}"
        )
        if result.checks and result.checks[0].message.strip() == result.problem.strip():
            lines += _failure_detail(result.checks[0])[1:]
        elif result.problem not in _problem_title(result, path):
            lines.append(f"      {result.problem}")
        return lines
    explained: set[str] = set()
    for check in result.checks:
        lines += check_lines(check, explained)
    lines.append(f"  {_count(result)}")
    return lines


def _problem_title(result: ExerciseResult, path: Path | None) -> str:
    first = result.checks[0] if result.checks else None
    if first is not None and first.message.strip() == result.problem.strip():
        name = display_path(path) if path else "the file"
        return f"{name} does not load: {result.problem.splitlines()[0]}"
    return result.problem.splitlines()[0]


def _count(result: ExerciseResult) -> str:
    total = len(result.checks)
    colour = "green" if result.passed else "red"
    return click.style(f"{result.passed_count} of {total} checks passed", fg=colour)


def summary_line(grading: Grading) -> str:
    results = grading.results
    done = sum(r.passed for r in results)
    checks = sum(len(r.checks) for r in results)
    passed = sum(r.passed_count for r in results)
    colour = "green" if grading.passed else "red"
    if len(results) == 1:
        verdict = "passed" if grading.passed else "not yet passing"
        text = f"{results[0].exercise.id} {verdict}: {passed} of {checks} checks passed"
    else:
        text = f"{done} of {len(results)} exercises passed ({passed} of {checks} checks)"
    return click.style(text, fg=colour, bold=True)


def mark(passed: bool) -> str:
    symbols = _symbols()
    return (
        click.style(symbols["pass"], fg="green")
        if passed
        else click.style(symbols["fail"], fg="red")
    )


def state_mark(state: str) -> str:
    marks = _symbols()
    if state == DONE:
        return click.style(f"{marks['pass']} done   ", fg="green")
    if state == CURRENT:
        return click.style("→ current", fg="yellow", bold=True)
    return click.style(f"{marks['other']} pending", dim=True)


def solution_diff(mine: Path, reference: Path) -> list[str]:
    """The unified diff that turns the learner's file into the reference, coloured."""
    ours = mine.read_text(encoding="utf-8").splitlines() if mine.exists() else []
    theirs = reference.read_text(encoding="utf-8").splitlines()
    diff = difflib.unified_diff(
        ours,
        theirs,
        f"yours: {display_path(mine)}",
        f"reference: {display_path(reference)}",
        lineterm="",
    )
    colours = {"+": "green", "-": "red", "@": "cyan"}
    return [click.style(line, fg=colours.get(line[:1])) for line in diff]


class ProgressBar:
    """A one-line progress bar with the time left, redrawn in place on a terminal."""

    def __init__(self, total: int, enabled: bool, width: int = 30) -> None:
        self.total, self.enabled, self.width = total, enabled, width
        self.done = 0
        self.started = time.monotonic()

    def advance(self, latest: str) -> None:
        self.done += 1
        if not self.enabled:
            click.echo(f"[{self.done}/{self.total}] {latest}", err=True)
            return
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done)
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        minutes, seconds = divmod(int(left), 60)
        line = f"\r[{bar}] {self.done}/{self.total} · {minutes}:{seconds:02d} left · {latest}"
        click.echo(line[:120].ljust(120), nl=False, err=True)

    def close(self) -> None:
        if self.enabled and self.done:
            click.echo(err=True)
