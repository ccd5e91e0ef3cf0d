"""Turning grading results into text for a person.

Every function returns lines (styled with click, which drops the colours when the output
is not a terminal); printing them is the CLI's business.
"""

from __future__ import annotations

import difflib
import re
import shutil
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from kata.course import Exercise
from kata.diagnosis import torch_to_jax
from kata.learning.hints import Hint
from kata.learning.progress import CURRENT, DONE
from kata.learning.recap import Rule, Speedup
from kata.results import MEASURES, CheckResult, ExerciseResult, Grading, Outcome

MESSAGE_LINES = 8
# A failing check shows what the learner's code printed; a passing or skipped one does not.
SHOWS_OUTPUT = (Outcome.FAILED, Outcome.ERROR, Outcome.CRASHED, Outcome.TIMED_OUT)
OUTPUT_LINES = 10
# JAX ends many errors with a link to the page explaining them; it is shown whole.
DOCS_LINK = re.compile(r"https://[^\s)'\"]+[^\s)'\".,;]")


def _symbols() -> dict[str, str]:
    try:
        "✓✗•⏱".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return {"pass": "ok", "fail": "XX", "other": "--", "dot": "*"}
    return {"pass": "✓", "fail": "✗", "other": "•", "dot": "·"}


def counted(count: int, noun: str) -> str:
    """`count` things: "1 submission", "2 submissions" (nouns whose plural adds an s)."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


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


def check_lines(
    check: CheckResult, already_explained: set[str] | None = None, *, measured: bool = False
) -> list[str]:
    """A check's verdict, with what it `measured` if asked; a failure already explained
    above gets a pointer, not a repeat."""
    lines = [_verdict_line(check)] + [f"      {note}" for note in check.notes]
    shown = [
        MEASURES[name].shown(value)
        for name, value in check.measurements.items()
        if measured and name in MEASURES and MEASURES[name].in_text
    ]
    if shown:
        lines.append(click.style(f"      {' · '.join(shown)}", dim=True))
    if check.passed:
        return lines
    cause = _cause(check)
    if already_explained is not None and cause in already_explained:
        return lines + [f"      {_clip_line(_first_line(check), 100)} (the same error as above)"]
    if already_explained is not None:
        already_explained.add(cause)
    return lines + _failure_detail(check)


def _verdict_line(check: CheckResult) -> str:
    marks = _symbols()
    if check.passed:
        return f"  {click.style(marks['pass'], fg='green')} {check.name}"
    mark = marks["other"] if check.outcome == Outcome.SKIPPED else marks["fail"]
    label = "" if check.outcome in (Outcome.FAILED, Outcome.ERROR) else f" [{check.outcome}]"
    return f"  {click.style(mark, fg='red')} {check.name}{click.style(label, fg='yellow')}"


def _first_line(check: CheckResult) -> str:
    """The message's first line, without the docs link that a line of its own shows whole
    (clipped, it would read "… method: https…")."""
    message = check.message.strip()
    first = message.splitlines()[0] if message else ""
    return DOCS_LINK.sub("", first).rstrip(" :;,") if check.diagnosis else first


def _cause(check: CheckResult) -> str:
    """What makes two failures the same mistake: the learner's line that raised and what
    it raised (or the diagnosis), whatever values the message quotes; else the message."""
    if check.location:
        place = f"{check.location['file']}:{check.location['line']}"
        what = check.diagnosis["cause"] if check.diagnosis else check.exception
        return f"{what}@{place}"
    return check.message


def location_text(location: dict[str, Any]) -> str:
    """`file:line: code`, or the place a front-end named (`cell line 3: code`)."""
    place = location.get("place") or f"{display_path(location['file'])}:{location['line']}"
    code = location.get("code") or ""
    return place + (f": {code}" if code else "")


def _folded_line(check: CheckResult) -> str:
    """A failing check in one line, for the second and later failures of a task."""
    reason = _first_line(check)
    return _verdict_line(check) + (f": {_clip_line(reason, 90)}" if reason else "")


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
            lines.append(f"      {_clip_line(_first_line(check))}")
        else:
            for line in shown[:MESSAGE_LINES]:
                lines += _wrapped(line)
        if len(shown) > (1 if check.diagnosis else MESSAGE_LINES):
            lines.append("      …")
    if check.location:
        lines.append(f"      at {location_text(check.location)}")
    if check.diagnosis:
        lines += [
            click.style(line, fg="cyan") for line in _wrapped(f"why: {check.diagnosis['cause']}")
        ]
        lines += [
            click.style(line, fg="cyan") for line in _wrapped(f"fix: {check.diagnosis['fix']}")
        ]
    lines += [f"      JAX's docs: {url}" for url in dict.fromkeys(DOCS_LINK.findall(message))]
    if check.output.strip() and check.outcome in SHOWS_OUTPUT:
        printed = check.output.strip().splitlines()
        lines.append("      your code printed:")
        lines += [f"        {line}" for line in printed[:OUTPUT_LINES]]
        if len(printed) > OUTPUT_LINES:
            lines.append(f"        … ({len(printed) - OUTPUT_LINES} more lines)")
    return lines


def exercise_lines(
    result: ExerciseResult, path: Path | None = None, *, verbose: bool = False
) -> list[str]:
    """A heading, one line per check and a count. The first failing check of each task is
    explained in full, the task's later failures take one line each (all in full, and what
    each check measured, when `verbose`), and a failure with the same cause as one above
    only points to it."""
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
    tasks_explained: set[str | None] = set()
    folded = 0
    for check in result.checks:
        if check.passed or verbose or check.task not in tasks_explained:
            lines += check_lines(check, explained, measured=verbose)
            if not check.passed:
                tasks_explained.add(check.task)
        else:
            lines.append(_folded_line(check))
            folded += 1
    if folded:
        lines.append(
            click.style(
                f"  ({folded} later {'failure' if folded == 1 else 'failures'} of a task cut to "
                "one line; `-v` explains every one)",
                dim=True,
            )
        )
    lines.append(f"  {_count(result)}")
    return lines + reference_speed_lines(result)


def reference_speed_lines(result: ExerciseResult) -> list[str]:
    """Once an exercise with a reference speed (course.toml) passes: the learner's own
    figure, from its timed check's note, beside the reference's, and why they differ."""
    reference = result.exercise.reference_speed
    if reference is None or not result.passed:
        return []
    timed = [c for c in result.checks if c.id.rpartition("::")[2].split("[")[0] == reference.check]
    if not timed or not timed[0].notes:
        return []
    theirs = (
        f"eager {reference.eager_ms:g} ms, first jit call {reference.first_call_ms:g} ms, "
        f"jit {reference.jit_ms:g} ms (~{float(f'{reference.speedup:.2g}'):g}×), "
        f"on {reference.setting}"
    )
    lines = []
    for label, text in (
        ("your speed", timed[0].notes[0]),
        (reference.who, theirs),
        ("why they differ", reference.why),
    ):
        lines += textwrap.wrap(
            f"{label[0].upper()}{label[1:]}: {text}",
            width=96,
            initial_indent="  ",
            subsequent_indent="      ",
        )
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


def platform_lines(grading: Grading) -> list[str]:
    """The line that heads a grading's verdicts where it ran somewhere the learner would not
    expect (kata.grading_platform): on the CPU of a machine with a chip, say."""
    reason = grading.platform.reason
    return [click.style(reason[0].upper() + reason[1:], fg="yellow")] if reason else []


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


def exercise_list_lines(title: str, rows: list[tuple[Exercise, str]]) -> list[str]:
    """`kata list`: the course's progress, then each exercise's state, id and title."""
    done = sum(state == DONE for _, state in rows)
    width = max((len(e.id) for e, _ in rows), default=0)
    lines = [click.style(f"{title}: {done} of {len(rows)} done", bold=True)]
    return lines + [f"  {state_mark(state)}  {e.id:<{width}}  {e.title}" for e, state in rows]


def hint_line(hint: Hint) -> str:
    """`kata hint`'s line: which task, which hint (or which failure it answers), the text."""
    about = f"{hint.exercise.id} · {hint.task}" if hint.task else hint.exercise.id
    if hint.failure:
        return f"{about} · about your last failed check ({hint.failure}): {hint.text}"
    if hint.unanswered:
        return (
            f"{about} · hint {hint.number} of {hint.total}, written for the stub's code (no "
            f"hint answers how your code failed “{hint.unanswered}”: its message says what "
            f"the check saw): {hint.text}"
        )
    return f"{about} · hint {hint.number} of {hint.total}: {hint.text}"


def state_mark(state: str) -> str:
    marks = _symbols()
    if state == DONE:
        return click.style(f"{marks['pass']} done   ", fg="green")
    if state == CURRENT:
        return click.style("→ current", fg="yellow", bold=True)
    return click.style(f"{marks['other']} pending", dim=True)


def cheat_sheet_lines(rules: list[Rule], mapping: tuple[tuple[str, str], ...]) -> list[str]:
    """The rules to remember, one per exercise, then the PyTorch → JAX table."""
    lines = [click.style("Rules to remember", bold=True)]
    for rule in rules:
        lines += textwrap.wrap(
            rule.text,
            width=96,
            initial_indent=f"  {rule.exercise.number:02d}  ",
            subsequent_indent="      ",
        )
    if mapping:
        width = min(max(len(torch) for torch, _ in mapping), 40)
        lines += ["", click.style(f"  {'PyTorch':<{width}}   JAX", bold=True)]
        lines += [f"  {torch:<{width}} → {jax}" for torch, jax in mapping]
    counts = torch_to_jax.coverage()
    lines += [
        "",
        f"Every other torch name ({counts['function'][1]} functions, {counts['method'][1]} "
        "Tensor methods, the keywords): `kata rules NAME`, e.g. `kata rules view`, "
        "`kata rules keepdim`.",
    ]
    return lines


def translation_lines(
    term: str, found: Sequence[torch_to_jax.Row | torch_to_jax.SheetRow], limit: int = 25
) -> list[str]:
    """The PyTorch → JAX rows a search for `term` found (`torch_to_jax.translations`), or
    the names closest to it."""
    if not found:
        names = sorted({row.name for row in torch_to_jax.rows().values()})
        close = difflib.get_close_matches(term.strip("().=").lower(), names, n=3)
        suggestion = f"; did you mean {', '.join(close)}?" if close else ""
        return [f"no PyTorch name or JAX spelling mentions {term!r}{suggestion}"]
    lines: list[str] = []
    for row in found[:limit]:
        lines += textwrap.wrap(
            row.advice,
            width=96,
            initial_indent=f"  {click.style(row.torch, bold=True)} → ",
            subsequent_indent="      ",
        )
        if row.note:
            lines += textwrap.wrap(
                row.note, width=96, initial_indent="      ", subsequent_indent="      "
            )
    if len(found) > limit:
        lines.append(f"  … and {len(found) - limit} more: narrow the search")
    return lines


def finale_lines(
    exercises: tuple[Exercise, ...],
    speedups: list[Speedup],
    rules: list[Rule],
    mapping: tuple[tuple[str, str], ...],
) -> list[str]:
    """The end of the course: what was learnt, the learner's own speedups, the cheat sheet."""
    lines = [click.style(f"All {len(exercises)} exercises done. What you learnt:", fg="green")]
    lines += [f"  {e.number:02d}  {e.title} ({e.concept})" for e in exercises]
    if speedups:
        lines += ["", "What your compiled code measured, against the same code run eagerly:"]
        # A check's name starts with its task ("fast_fn: once compiled, far faster…").
        lines += [
            f"  {s.exercise.id}  {s.check.split(':')[0]}: {s.ratio:.0f}× faster" for s in speedups
        ]
    return lines + [
        "",
        *cheat_sheet_lines(rules, mapping),
        "",
        "`kata rules` prints this sheet again.",
    ]


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
