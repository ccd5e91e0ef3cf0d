"""What a class got wrong, and who: numbers from graded submissions, then one HTML page.

`class_numbers` reads the gradebook's JSON entries (`kata.instructor.gradebook.json_entry`), so a
resumed run or a saved gradebook gives the same report without regrading; `render_html`
turns the numbers into a page with inline SVG charts and nothing fetched from anywhere.
Everything that came from a submission (names, messages, file names) is HTML-escaped.

Every failed check of a file the student worked on has one cause, so the class's mistakes
can be counted in students:
- the check stopped: it timed out, ran out of memory or crashed the grading process;
- the file as a whole got no verdict (it does not load, or was not graded): its note,
  as the gradebook's CSV says it (`SyntaxError: ... (01_demo.py, line 3)`), is the cause;
- a diagnosis explained it: the diagnose rule that recognised it, however its text was
  worded (`kata.diagnosis.diagnose`);
- otherwise the check itself: a failed assertion says which requirement was not met, and
  that requirement (its exercise and check) is the cause.
A file equal to the exercise's stub is "not started": counted apart, never as mistakes;
an upload with no exercise file at all is "nothing submitted", said once. A student is
shown by their name in the class, with what a roster says of them (kata.instructor.students).
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from html import escape
from typing import Any

from kata.instructor.students import ROSTER_COLUMNS
from kata.reporting.report import counted
from kata.results import MEASURES, Measure

HISTOGRAM_BINS = 10
EXAMPLE_CHARS = 600

# The kinds of cause, in the order the page lists them when their counts tie.
TIMED_OUT = "timed out"
OUT_OF_MEMORY = "out of memory"
CRASHED = "crashed"
NO_VERDICT = "no verdict for the file"
DIAGNOSIS = "diagnosis"
CHECK = "check not met"
STOPPED = (TIMED_OUT, OUT_OF_MEMORY, CRASHED)
KINDS = (*STOPPED, NO_VERDICT, DIAGNOSIS, CHECK)

# The outcomes kata.results.Outcome gives a check that never reached a verdict of its own.
STOPPED_OUTCOMES = {"timed out": TIMED_OUT, "crashed": CRASHED}
MEMORY_EXCEPTIONS = {"MemoryError"}


def anchor(kind: str, *parts: str) -> str:
    """A stable HTML id for a student, check or cause: safe whatever a name holds."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:12]
    return f"{kind}-{digest}"


def student_key(entry: dict[str, Any]) -> str:
    """A submission's identity: its stable id where the gradebook has one, else its name."""
    return str(entry.get("id") or entry["submission"])


@dataclass
class Cause:
    key: tuple[str, ...]
    kind: str
    label: str
    fix: str | None = None
    students: dict[str, str] = field(default_factory=dict)  # anchor: name, in order met
    checks: int = 0
    wordings: Counter[str] = field(default_factory=Counter)
    example: dict[str, str] | None = None


def class_numbers(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The class's scores, roster, pass counts per exercise and check, causes and speedups."""
    max_score = max((entry["max"] for entry in entries), default=0.0)
    causes = _causes(entries)
    return {
        "submissions": len(entries),
        "max_score": max_score,
        "scores": _distribution([entry["total"] for entry in entries], max_score),
        "roster": _roster(entries, causes),
        "exercises": _exercise_counts(entries),
        "checks": _check_counts(entries),
        "causes": [_cause_json(c) for c in _ordered(causes.values())],
        "measured": {name: _measured(entries, name) for name in MEASURES},
    }


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _distribution(totals: list[float], max_score: float) -> dict[str, Any]:
    width = max_score / HISTOGRAM_BINS if max_score else 1.0
    counts = [0] * HISTOGRAM_BINS
    for value in totals:
        counts[min(int(value / width), HISTOGRAM_BINS - 1)] += 1
    return {
        "mean": round(statistics.fmean(totals), 4) if totals else 0.0,
        "median": statistics.median(totals) if totals else 0.0,
        "min": min(totals, default=0.0),
        "max": max(totals, default=0.0),
        "histogram": [
            {"from": round(n * width, 4), "to": round((n + 1) * width, 4), "count": count}
            for n, count in enumerate(counts)
        ],
    }


def _worked_on(exercise: dict[str, Any]) -> bool:
    """Handed in and changed from the stub: its failures are the student's mistakes."""
    return not exercise.get("missing") and not exercise.get("not_started")


def _solved(exercise: dict[str, Any]) -> bool:
    return bool(exercise["max"]) and exercise["score"] >= exercise["max"]


def _exercise_counts(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per exercise, in students: solved, worked on, not started (the stub as given), missing,
    and not graded (the upload held something meant as its file: a folder, a link, …)."""
    ids = list(dict.fromkeys(i for entry in entries for i in entry["exercises"]))
    counts = []
    for exercise_id in ids:
        graded = [e["exercises"][exercise_id] for e in entries if exercise_id in e["exercises"]]
        solved = sum(1 for g in graded if _solved(g))
        counts.append(
            {
                "id": exercise_id,
                "solved": solved,
                "share": _share(solved, len(entries)),
                "worked_on": sum(1 for g in graded if _worked_on(g)),
                "not_started": sum(1 for g in graded if g.get("not_started")),
                "missing": sum(1 for g in graded if g.get("missing") and not g.get("not_graded")),
                "not_graded": sum(1 for g in graded if g.get("not_graded")),
                "mean_score": round(statistics.fmean(g["score"] for g in graded), 4),
                "max": max(g["max"] for g in graded),
            }
        )
    return counts


def _check_counts(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per check, the students who worked on its exercise, and who of them failed it."""
    ran: Counter[tuple[str, str]] = Counter()
    passed: Counter[tuple[str, str]] = Counter()
    failed: dict[tuple[str, str], dict[str, str]] = {}
    for entry in entries:
        for exercise_id, exercise in entry["exercises"].items():
            if not _worked_on(exercise):
                continue
            for check in exercise["checks"]:
                key = (exercise_id, check["name"])
                ran[key] += 1
                failed.setdefault(key, {})
                if check["outcome"] == "passed":
                    passed[key] += 1
                else:
                    failed[key][anchor("s", student_key(entry))] = entry["submission"]
    return [
        {
            "exercise": exercise_id,
            "check": name,
            "anchor": anchor("k", exercise_id, name),
            "ran": count,
            "passed": passed[(exercise_id, name)],
            "share": _share(passed[(exercise_id, name)], count),
            "failed_by": _people(failed[(exercise_id, name)]),
        }
        for (exercise_id, name), count in ran.items()
    ]


def _people(students: dict[str, str]) -> list[dict[str, str]]:
    return [{"anchor": a, "name": name} for a, name in students.items()]


def stopped_kind(outcome: str, rule: str | None, exception: str | None) -> str | None:
    """How a check was stopped before it could judge (one of STOPPED), or None.

    Timed out: the grader stopped it (its outcome), or pytest-timeout did (a failure the
    `timeout` diagnosis recognised); out of memory: learner code raised MemoryError."""
    if exception in MEMORY_EXCEPTIONS:
        return OUT_OF_MEMORY
    if rule == "timeout":
        return TIMED_OUT
    return STOPPED_OUTCOMES.get(outcome)


def _cause_of(exercise_id: str, exercise: dict[str, Any], check: dict[str, Any]) -> Cause:
    """The one cause of a failed check (see the module's docstring)."""
    stopped = stopped_kind(check["outcome"], check.get("rule"), check.get("exception"))
    if stopped:
        return Cause((stopped, exercise_id), stopped, f"{stopped} in {exercise_id}")
    if exercise.get("note") and not check.get("rule"):
        # The file as a whole failed (it does not load, or was not graded) for a reason no
        # diagnosis names: the file's note says it, as the gradebook's CSV does.
        said = exercise["note"].strip().splitlines()[0]
        return Cause((NO_VERDICT, exercise_id, said), NO_VERDICT, said)
    if check.get("rule"):
        return Cause(("rule", check["rule"]), DIAGNOSIS, check.get("diagnosis") or check["rule"])
    return Cause((CHECK, exercise_id, check["name"]), CHECK, check["name"])


def _failures(exercise: dict[str, Any]) -> list[dict[str, Any]]:
    """The failed checks of a file, or one stand-in for a file that got no check's verdict."""
    if exercise.get("note") and not exercise["checks"]:
        return [{"name": "(the file)", "outcome": "not run", "message": exercise["note"]}]
    failed = [c for c in exercise["checks"] if c["outcome"] != "passed"]
    if exercise.get("note") and failed:
        # The file does not load: every check failed the same way; that is one mistake.
        return failed[:1]
    return failed


def _causes(entries: list[dict[str, Any]]) -> dict[tuple[str, ...], Cause]:
    causes: dict[tuple[str, ...], Cause] = {}
    for entry in entries:
        student = anchor("s", student_key(entry))
        for exercise_id, exercise in entry["exercises"].items():
            if not _worked_on(exercise):
                continue
            for check in _failures(exercise):
                found = _cause_of(exercise_id, exercise, check)
                cause = causes.setdefault(found.key, found)
                cause.students.setdefault(student, entry["submission"])
                cause.checks += 1
                cause.wordings[found.label] += 1
                if check.get("fix") and not cause.fix:
                    cause.fix = check["fix"]
                if cause.example is None:
                    cause.example = {
                        "submission": entry["submission"],
                        "student": student,
                        "exercise": exercise_id,
                        "check": check["name"],
                        "message": check.get("message", "")[:EXAMPLE_CHARS],
                    }
    return causes


def _ordered(causes: Any) -> list[Cause]:
    return sorted(causes, key=lambda c: (-len(c.students), -c.checks, KINDS.index(c.kind)))


def _cause_json(cause: Cause) -> dict[str, Any]:
    # A rule's text varies with what it saw (a key-reuse diagnosis names the checker that
    # caught it, or not): the row shows the wording met most often.
    label = cause.wordings.most_common(1)[0][0] if cause.wordings else cause.label
    return {
        "kind": cause.kind,
        "anchor": anchor("c", *cause.key),
        "exercise": cause.key[1] if cause.kind != DIAGNOSIS else None,
        "label": label,
        "fix": cause.fix,
        "students": _people(cause.students),
        "checks": cause.checks,
        "example": cause.example,
    }


def _roster(
    entries: list[dict[str, Any]], causes: dict[tuple[str, ...], Cause]
) -> list[dict[str, Any]]:
    roster = []
    for entry in entries:
        student = anchor("s", student_key(entry))
        exercises = entry["exercises"]
        mistakes: dict[tuple[str, ...], dict[str, Any]] = {}
        for exercise_id, exercise in exercises.items():
            if not _worked_on(exercise):
                continue
            for check in _failures(exercise):
                key = _cause_of(exercise_id, exercise, check).key
                row = mistakes.setdefault(
                    key,
                    {
                        "cause": anchor("c", *key),
                        "kind": causes[key].kind,
                        "label": _cause_json(causes[key])["label"],
                        "exercise": exercise_id,
                        "checks": 0,
                    },
                )
                row["checks"] += 1
        roster.append(
            {
                "submission": entry["submission"],
                "anchor": student,
                "total": entry["total"],
                "max": entry["max"],
                "solved": [i for i, e in exercises.items() if _solved(e)],
                "exercises": len(exercises),
                "not_started": [i for i, e in exercises.items() if e.get("not_started")],
                "nothing_submitted": bool(entry.get("nothing_submitted")),
                "missing": [
                    i for i, e in exercises.items() if e.get("missing") and not e.get("not_graded")
                ],
                "not_graded": [
                    {"exercise": i, "why": e.get("note") or ""}
                    for i, e in exercises.items()
                    if e.get("not_graded")
                ],
                "stopped": [m for m in mistakes.values() if m["kind"] in STOPPED],
                "mistakes": [m for m in mistakes.values() if m["kind"] not in STOPPED],
                "notes": entry.get("notes", []),
                "roster": entry.get("roster"),
                "not_on_roster": bool(entry.get("not_on_roster")),
            }
        )
    return sorted(roster, key=lambda r: (r["total"], r["submission"]))


def _measured(entries: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Per check that measures `name` (one of MEASURES), the numbers of the students who
    worked on its exercise: an untouched stub is no one's answer, though a gradebook may
    have timed its eager code (`kata grade` did before it left stubs unrun: 02's stub
    measured 3.90×)."""
    measured: dict[tuple[str, str], list[float]] = {}
    for entry in entries:
        for exercise_id, exercise in entry["exercises"].items():
            if not _worked_on(exercise):
                continue
            for check in exercise["checks"]:
                value = check.get("measurements", {}).get(name)
                if value is not None:
                    measured.setdefault((exercise_id, check["name"]), []).append(value)
    return [
        {
            "exercise": exercise_id,
            "check": name,
            "count": len(values),
            "min": min(values),
            "median": statistics.median(values),
            "max": max(values),
            "values": sorted(values),
        }
        for (exercise_id, name), values in measured.items()
    ]


# The page ---------------------------------------------------------------------------

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 64rem;
       color: #1d2330; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; font-size: 1.2rem; }
.lead, .hint { color: #556; margin-top: 0; }
table { border-collapse: collapse; width: 100%; margin-top: .6rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #dde;
         vertical-align: top; overflow-wrap: break-word; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap;
                 overflow-wrap: normal; }
code, pre { font: 13px/1.4 ui-monospace, monospace; }
pre { white-space: pre-wrap; overflow-wrap: break-word; word-break: break-word;
      background: #f4f5f8; padding: .4rem; margin: .3rem 0 0; }
ul.plain { margin: 0; padding-left: 1.1rem; }
.tag { display: inline-block; padding: 0 .35rem; border-radius: .25rem; font-size: 12px;
       background: #eef0f6; white-space: nowrap; }
.tag.stopped { background: #fde2e1; } .tag.idle { background: #fff2cc; }
a { color: #2f4bd1; }
svg text { font: 12px system-ui, sans-serif; fill: #1d2330; }
svg text.small { font-size: 10px; }
.empty { color: #778; font-style: italic; }
@media print {
  body { margin: 0; max-width: none; font-size: 11pt; }
  a { color: inherit; text-decoration: none; }
  tr, pre, svg { break-inside: avoid; }
  th, td { padding: .2rem .3rem; }
  h2 { break-after: avoid; }
  /* A table fits the page's width by construction: its columns take the shares of it
     that its <col>s give (--share), whatever the font, and a word or an SVG wider than
     its column breaks or shrinks inside it. Sized by their longest words, the exercises'
     eight columns took 716 px of a 705 px page at 720 px (DejaVu Sans: 158 px for
     13_custom_gradients in monospace, 130 for the bar, 73 for each "students"), and
     984 px in a wider font (DejaVu Serif, letter-spaced .25em), where these take 673. */
  table { table-layout: fixed; font-size: 10pt; }
  col { width: var(--share); }
  th, td, td.num, th.num { white-space: normal; overflow-wrap: anywhere; }
  td svg { max-width: 100%; height: auto; }
  .tag { white-space: normal; }
}
"""


def _decimal(value: float) -> str:
    """The page's one number format for a non-whole quantity: two decimals."""
    return f"{value:.2f}"


def _students(count: int) -> str:
    return counted(count, "student")


def _checks(count: int) -> str:
    return counted(count, "check")


def render_html(numbers: dict[str, Any], title: str = "Class report") -> str:
    """One HTML page, inline CSS and SVG only: nothing to fetch, nothing to run."""
    scores = numbers["scores"]
    lead = (
        f"{_students(numbers['submissions'])} · mean {_decimal(scores['mean'])} · median "
        f"{_decimal(scores['median'])} · range {_decimal(scores['min'])}–"
        f"{_decimal(scores['max'])} of {_decimal(numbers['max_score'])} points"
    )
    sections = [
        ("Score distribution", _histogram_svg(scores["histogram"])),
        ("Students", _roster_section(numbers["roster"])),
        ("What went wrong, by cause", _cause_section(numbers["causes"])),
        ("Exercises", _exercise_section(numbers["exercises"])),
        ("Checks", _check_section(numbers["checks"])),
    ] + [
        (f"{MEASURES[name].title} across the class", _measured_section(MEASURES[name], rows))
        for name, rows in numbers["measured"].items()
        if rows
    ]
    body = "".join(
        f"<section id='{anchor('h', h)}'><h2>{escape(h)}</h2>{content}</section>"
        for h, content in sections
    )
    return html_page(title, STYLE, f"<p class='lead' id='summary'>{escape(lead)}</p>{body}")


def html_page(title: str, style: str, body: str) -> str:
    """A page of its own, headed by `title`: inline CSS only, nothing to fetch and nothing
    to run (its Content-Security-Policy says so), laid out for a phone's width too."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{style}</style></head><body>"
        f"<h1>{escape(title)}</h1>{body}</body></html>\n"
    )


def _histogram_svg(histogram: list[dict[str, Any]]) -> str:
    width, height, bottom, left = 640, 230, 40, 0
    top = max((b["count"] for b in histogram), default=0) or 1
    bar = (width - left) / max(len(histogram), 1)
    parts = []
    for n, b in enumerate(histogram):
        tall = (height - bottom - 20) * b["count"] / top
        x, y = left + n * bar, height - bottom - tall
        span = f"{_decimal(b['from'])}–{_decimal(b['to'])}"
        label = f"{span} points: {_students(b['count'])}"
        parts.append(
            f"<rect class='bin' x='{x + 2:.1f}' y='{y:.1f}' width='{bar - 4:.1f}' "
            f"height='{tall:.1f}' fill='#4c6ef5'><title>{escape(label)}</title></rect>"
            f"<text x='{x + bar / 2:.1f}' y='{y - 4:.1f}' text-anchor='middle'>{b['count']}</text>"
            f"<text class='small' x='{x + bar / 2:.1f}' y='{height - bottom + 14}' "
            f"text-anchor='middle'>{span}</text>"
        )
    parts.append(
        f"<text x='{width / 2:.0f}' y='{height - 6}' text-anchor='middle'>points "
        "(bars: students in each range)</text>"
    )
    return (
        f"<svg id='score-histogram' role='img' aria-label='score distribution, in students' "
        f"viewBox='0 0 {width} {height}' width='100%'>{''.join(parts)}</svg>"
    )


def _share_bar(share: float, label: str) -> str:
    """A horizontal bar for a share, coloured from red (none passed) to green (all)."""
    hue = round(120 * share)
    return (
        f"<svg class='share' role='img' aria-label='{escape(label)}' viewBox='0 0 120 14' "
        f"width='120' height='14'><rect x='0' y='1' width='120' height='12' fill='#e6e8ef'/>"
        f"<rect class='share-bar' x='0' y='1' width='{120 * share:.1f}' height='12' "
        f"fill='hsl({hue},60%,45%)'/></svg>"
    )


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%"


def _table(
    header: list[str], rows: list[list[str]], numeric: set[int], shares: list[int], css: str = ""
) -> str:
    """A table; in print each column takes its share of the page's width, in percent."""
    assert len(shares) == len(header) and sum(shares) == 100, (header, shares)
    if not rows:
        return "<p class='empty'>None.</p>"
    columns = "".join(f"<col style='--share: {share}%'>" for share in shares)
    head = "".join(
        f"<th class='num'>{escape(h)}</th>" if n in numeric else f"<th>{escape(h)}</th>"
        for n, h in enumerate(header)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='num'>{c}</td>" if n in numeric else f"<td>{c}</td>"
            for n, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return (
        f"<table class='{css}'><colgroup>{columns}</colgroup><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def _link(target: str, text: str) -> str:
    return f"<a href='#{escape(target)}'>{escape(text)}</a>"


def _links(people: list[dict[str, str]]) -> str:
    return ", ".join(_link(p["anchor"], p["name"]) for p in people)


def _list(items: list[str]) -> str:
    return "<ul class='plain'>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _roster_section(roster: list[dict[str, Any]]) -> str:
    rows = []
    for student in roster:
        problems = [
            f"<span class='tag stopped'>{escape(s['kind'])}</span> "
            f"<code>{escape(s['exercise'])}</code> ({_checks(s['checks'])})"
            for s in student["stopped"]
        ]
        problems += [
            f"{_link(m['cause'], m['label'])} <code>{escape(m['exercise'])}</code>"
            + (f" ({_checks(m['checks'])})" if m["checks"] > 1 else "")
            for m in student["mistakes"]
        ]
        files = [
            f"<span class='tag idle'>not started</span> <code>{escape(i)}</code>"
            for i in student["not_started"]
        ]
        if student.get("nothing_submitted"):
            files.append("<span class='tag'>nothing submitted</span>")
        elif student["missing"]:
            names = ", ".join(f"<code>{escape(i)}</code>" for i in student["missing"])
            files.append(f"<span class='tag'>missing</span> {names}")
        files += [
            f"<span class='tag'>not graded</span> <code>{escape(n['exercise'])}</code>: "
            f"{escape(n['why'])}"
            for n in student["not_graded"]
        ]
        rows.append(
            [
                _student_cell(student),
                f"{_decimal(student['total'])} / {_decimal(student['max'])}",
                f"{len(student['solved'])} of {student['exercises']}",
                _list(problems) if problems else "<span class='empty'>none</span>",
                _list(files) if files else "",
            ]
        )
    hint = (
        "<p class='hint'>One row per student, lowest score first. A file equal to the "
        "exercise's stub is <em>not started</em>: its checks count as no mistake anywhere "
        "on this page.</p>"
    )
    return hint + _table(
        ["student", "points", "exercises solved", "what went wrong", "files not worked on"],
        rows,
        {1, 2},
        [14, 10, 13, 33, 30],
        "roster",
    )


def _student_cell(student: dict[str, Any]) -> str:
    """The student's name in the class, and what the roster says of them."""
    cell = f"<span id='{student['anchor']}'>{escape(student['submission'])}</span>"
    roster = student.get("roster") or {}
    said = [roster[column] for column in ROSTER_COLUMNS if roster.get(column)]
    if said:
        cell += f"<br><span class='hint roster'>{escape(' · '.join(said))}</span>"
    if student.get("not_on_roster"):
        cell += "<br><span class='tag'>not on the roster</span>"
    return cell


def _cause_section(causes: list[dict[str, Any]]) -> str:
    rows = []
    for cause in causes:
        example = cause["example"] or {}
        what = f"<span id='{cause['anchor']}'>{escape(cause['label'])}</span>"
        if cause["kind"] == CHECK:
            what = f"failed: <code>{escape(cause['exercise'])}</code> " + what
        elif cause["kind"] == NO_VERDICT:
            what = f"<code>{escape(cause['exercise'])}</code> " + what
        if cause["fix"]:
            what += f"<br><span class='hint'>fix: {escape(cause['fix'])}</span>"
        rows.append(
            [
                f"<span class='tag{' stopped' if cause['kind'] in STOPPED else ''}'>"
                f"{escape(cause['kind'])}</span>",
                what,
                _students(len(cause["students"])),
                _checks(cause["checks"]),
                _links(cause["students"]),
                f"{escape(example.get('submission', ''))}, <code>"
                f"{escape(example.get('exercise', ''))}</code> {escape(example.get('check', ''))}"
                f"<pre>{escape(example.get('message', ''))}</pre>",
            ]
        )
    hint = (
        "<p class='hint'>Every failed check of a file a student worked on, under one cause: "
        "a diagnosis however it was worded, else the check's requirement; time-outs, "
        "crashes and running out of memory have rows of their own. Counted in students "
        "(each once) and in failed checks.</p>"
    )
    return hint + _table(
        ["kind", "cause", "students", "failed checks", "who", "an example"],
        rows,
        {2, 3},
        [10, 22, 11, 10, 17, 30],
        "causes",
    )


def _exercise_section(exercises: list[dict[str, Any]]) -> str:
    rows = [
        [
            f"<code>{escape(e['id'])}</code>",
            _share_bar(e["share"], f"{e['id']}: {_percent(e['share'])} of students solved it"),
            f"{_students(e['solved'])} ({_percent(e['share'])})",
            _students(e["worked_on"]),
            _students(e["not_started"]),
            _students(e["missing"]),
            _students(e["not_graded"]),
            f"{_decimal(e['mean_score'])} / {_decimal(e['max'])}",
        ]
        for e in exercises
    ]
    return _table(
        [
            "exercise",
            "",
            "solved",
            "worked on",
            "not started",
            "missing",
            "not graded",
            "mean points",
        ],
        rows,
        {2, 3, 4, 5, 6, 7},
        [24, 9, 14, 10, 11, 10, 11, 11],
    )


def _check_section(checks: list[dict[str, Any]]) -> str:
    # A check every student passed tells the instructor nothing to act on: one line counts
    # them, and the table lists the rest.
    failed = [c for c in checks if c["passed"] < c["ran"]]
    ordered = sorted(failed, key=lambda c: (c["share"], c["exercise"]))
    rows = [
        [
            f"<span id='{c['anchor']}'><code>{escape(c['exercise'])}</code> "
            f"{escape(c['check'])}</span>",
            _share_bar(c["share"], f"{c['check']}: {_percent(c['share'])} of students passed"),
            f"{c['passed']} of {_students(c['ran'])} ({_percent(c['share'])})",
            _links(c["failed_by"]),
        ]
        for c in ordered
    ]
    passed = len(checks) - len(failed)
    everyone = (
        f" Not listed: {counted(passed, 'check')} every student who worked on its exercise passed."
        if passed
        else ""
    )
    hint = (
        "<p class='hint'>Hardest first, counted in students who worked on the exercise "
        f"(not started and missing files left out).{everyone}</p>"
    )
    return hint + _table(["check", "", "passed", "failed by"], rows, {2}, [40, 12, 16, 32])


def _measured_section(measure: Measure, measured: list[dict[str, Any]]) -> str:
    """One measure's numbers per check across the class; a speedup's, each student's as a
    dot on a logarithmic strip."""
    unit = "×" if measure.name == "speedup" else ""
    rows = [
        [
            f"<code>{escape(s['exercise'])}</code> {escape(s['check'])}",
            _students(s["count"]),
            *(f"{_decimal(s[key])}{unit}" for key in ("min", "median", "max")),
            *([_speedup_strip(s["values"])] if unit else []),
        ]
        for s in measured
    ]
    what = (
        "Speedup: the time eager code took divided by the time the student's compiled code "
        "took (× faster), one dot per student measured"
        if unit
        else f"{measure.label[:1].upper()}{measure.label[1:]}, as each check measured it"
    )
    better = "higher" if measure.higher_is_better else "lower"
    hint = (
        f"<p class='hint'>{escape(what)}, counted in students who worked on the exercise "
        f"(not started and missing files left out); {better} is better.</p>"
    )
    headers = ["check", "measured", "min", "median", "max", *(["each student"] if unit else [])]
    widths = [28, 12, 10, 10, 10, 30] if unit else [40, 15, 15, 15, 15]
    return hint + _table(headers, rows, {1, 2, 3, 4}, widths)


def _axis_ticks(low: float, high: float) -> list[float]:
    """Powers of ten from at or below `low` to at or above `high`: speedups of one class
    span decades (4× for a forgotten jit, 900× for a compiled loop), so the axis is
    logarithmic."""
    first = math.floor(math.log10(max(low, 1e-3)))
    last = max(math.ceil(math.log10(max(high, 1e-3))), first + 1)
    return [10.0**power for power in range(first, last + 1)]


def _speedup_strip(values: list[float]) -> str:
    """Each student's speedup as a dot on a logarithmic axis with labelled ticks."""
    ticks = _axis_ticks(min(values, default=1.0), max(values, default=1.0))
    left, right, width = 12, 228, 240
    low, high = math.log10(ticks[0]), math.log10(ticks[-1])

    def x(value: float) -> float:
        return left + (right - left) * (math.log10(max(value, ticks[0])) - low) / (high - low)

    marks = "".join(
        f"<line x1='{x(t):.1f}' y1='14' x2='{x(t):.1f}' y2='18' stroke='#889'/>"
        f"<text class='tick' x='{x(t):.1f}' y='30' text-anchor='middle'>{t:g}×</text>"
        for t in ticks
    )
    dots = "".join(
        f"<circle class='speedup' cx='{x(v):.1f}' cy='9' r='3.5' fill='#4c6ef5' "
        f"fill-opacity='.5'><title>{_decimal(v)}× faster</title></circle>"
        for v in values
    )
    return (
        f"<svg class='speedups' role='img' aria-label='speedups, × faster than eager' "
        f"viewBox='0 0 {width} 46' width='{width}' height='46'>"
        f"<line x1='{left}' y1='14' x2='{right}' y2='14' stroke='#889'/>{marks}{dots}"
        f"<text x='{width / 2:.0f}' y='43' text-anchor='middle'>× faster than eager "
        "(log scale)</text></svg>"
    )
