"""What a class got wrong: numbers from graded submissions, then one self-contained HTML page.

`class_numbers` reads the gradebook's JSON entries (`kata.instructor.gradebook.json_entry`), so a
resumed run or a saved gradebook gives the same report without regrading; `render_html`
turns the numbers into a page with inline SVG charts and nothing fetched from anywhere.
Everything that came from a submission (names, messages, file names) is HTML-escaped.
"""

from __future__ import annotations

import statistics
from collections import Counter
from html import escape
from typing import Any

HISTOGRAM_BINS = 10
TOP_DIAGNOSES = 10
EXAMPLE_CHARS = 300


def class_numbers(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The class's score distribution, pass shares, frequent diagnoses and speedups."""
    max_score = max((entry["max"] for entry in entries), default=0.0)
    return {
        "submissions": len(entries),
        "max_score": max_score,
        "scores": _distribution([entry["total"] for entry in entries], max_score),
        "exercises": _exercise_shares(entries),
        "checks": _check_shares(entries),
        "diagnoses": _diagnoses(entries),
        "speedups": _speedups(entries),
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


def _exercise_shares(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ids = list(dict.fromkeys(i for entry in entries for i in entry["exercises"]))
    shares = []
    for exercise_id in ids:
        graded = [e["exercises"][exercise_id] for e in entries if exercise_id in e["exercises"]]
        solved = sum(1 for g in graded if g["max"] and g["score"] >= g["max"])
        shares.append(
            {
                "id": exercise_id,
                "solved": solved,
                "share": _share(solved, len(entries)),
                "mean_score": round(statistics.fmean(g["score"] for g in graded), 4),
                "max": max(g["max"] for g in graded),
            }
        )
    return shares


def _check_shares(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per check, the share of the submissions that handed the exercise in and passed it."""
    ran: Counter[tuple[str, str]] = Counter()
    passed: Counter[tuple[str, str]] = Counter()
    for entry in entries:
        for exercise_id, exercise in entry["exercises"].items():
            for check in exercise["checks"]:
                key = (exercise_id, check["name"])
                ran[key] += 1
                passed[key] += check["outcome"] == "passed"
    return [
        {
            "exercise": exercise_id,
            "check": name,
            "ran": count,
            "passed": passed[(exercise_id, name)],
            "share": _share(passed[(exercise_id, name)], count),
        }
        for (exercise_id, name), count in ran.items()
    ]


def _diagnoses(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts: Counter[str] = Counter()
    examples: dict[str, dict[str, str]] = {}
    for entry in entries:
        for exercise_id, exercise in entry["exercises"].items():
            for check in exercise["checks"]:
                cause = check.get("diagnosis")
                if not cause:
                    continue
                counts[cause] += 1
                examples.setdefault(
                    cause,
                    {
                        "submission": entry["submission"],
                        "exercise": exercise_id,
                        "check": check["name"],
                        "message": check["message"][:EXAMPLE_CHARS],
                    },
                )
    return [
        {"cause": cause, "count": count, "example": examples[cause]}
        for cause, count in counts.most_common(TOP_DIAGNOSES)
    ]


def _speedups(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    measured: dict[tuple[str, str], list[float]] = {}
    for entry in entries:
        for exercise_id, exercise in entry["exercises"].items():
            for check in exercise["checks"]:
                if check.get("speedup") is not None:
                    measured.setdefault((exercise_id, check["name"]), []).append(check["speedup"])
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
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem;
       color: #1d2330; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; font-size: 1.2rem; }
.lead { color: #556; margin-top: 0; }
table { border-collapse: collapse; width: 100%; margin-top: .6rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #dde;
         vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, pre { font: 13px/1.4 ui-monospace, monospace; }
pre { white-space: pre-wrap; word-break: break-word; max-height: 8rem; overflow: auto;
      background: #f4f5f8; padding: .4rem; margin: .3rem 0 0; }
svg text { font: 12px system-ui, sans-serif; fill: #1d2330; }
.empty { color: #778; font-style: italic; }
"""


def render_html(numbers: dict[str, Any], title: str = "Class report") -> str:
    """One HTML page, inline CSS and SVG only: nothing to fetch, nothing to run."""
    scores = numbers["scores"]
    lead = (
        f"{numbers['submissions']} submissions · mean {scores['mean']:g} · median "
        f"{scores['median']:g} · range {scores['min']:g}–{scores['max']:g} of "
        f"{numbers['max_score']:g} points"
    )
    sections = [
        ("Score distribution", _histogram_svg(scores["histogram"])),
        ("Exercises solved", _exercise_section(numbers["exercises"])),
        ("Checks passed", _check_section(numbers["checks"])),
        ("Most frequent diagnoses", _diagnosis_section(numbers["diagnoses"])),
        ("jit speedups measured across the class", _speedup_section(numbers["speedups"])),
    ]
    body = "".join(f"<section><h2>{escape(h)}</h2>{content}</section>" for h, content in sections)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1><p class='lead' id='summary'>{escape(lead)}</p>"
        f"{body}</body></html>\n"
    )


def _histogram_svg(histogram: list[dict[str, Any]]) -> str:
    width, height, bottom = 640, 220, 30
    top = max((b["count"] for b in histogram), default=0) or 1
    bar = width / max(len(histogram), 1)
    parts = []
    for n, b in enumerate(histogram):
        tall = (height - bottom - 20) * b["count"] / top
        x, y = n * bar, height - bottom - tall
        label = f"{b['from']:g}–{b['to']:g}: {b['count']} submissions"
        parts.append(
            f"<rect class='bin' x='{x + 2:.1f}' y='{y:.1f}' width='{bar - 4:.1f}' "
            f"height='{tall:.1f}' fill='#4c6ef5'><title>{escape(label)}</title></rect>"
            f"<text x='{x + bar / 2:.1f}' y='{y - 4:.1f}' text-anchor='middle'>{b['count']}</text>"
            f"<text x='{x + bar / 2:.1f}' y='{height - 10}' text-anchor='middle'>"
            f"{b['from']:g}–{b['to']:g}</text>"
        )
    return (
        f"<svg id='score-histogram' role='img' aria-label='score distribution' "
        f"viewBox='0 0 {width} {height}' width='100%'>{''.join(parts)}</svg>"
    )


def _share_bar(share: float, label: str) -> str:
    """A horizontal bar for a share, coloured from red (none passed) to green (all)."""
    hue = round(120 * share)
    return (
        f"<svg class='share' role='img' aria-label='{escape(label)}' viewBox='0 0 200 14' "
        f"width='200' height='14'><rect x='0' y='1' width='200' height='12' fill='#e6e8ef'/>"
        f"<rect class='share-bar' x='0' y='1' width='{200 * share:.1f}' height='12' "
        f"fill='hsl({hue},60%,45%)'/></svg>"
    )


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%"


def _table(header: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    if not rows:
        return "<p class='empty'>None.</p>"
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
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _exercise_section(exercises: list[dict[str, Any]]) -> str:
    rows = [
        [
            f"<code>{escape(e['id'])}</code>",
            _share_bar(e["share"], f"{e['id']}: {_percent(e['share'])} solved"),
            _percent(e["share"]),
            f"{e['mean_score']:g} / {e['max']:g}",
        ]
        for e in exercises
    ]
    return _table(["exercise", "", "solved", "mean points"], rows, {2, 3})


def _check_section(checks: list[dict[str, Any]]) -> str:
    ordered = sorted(checks, key=lambda c: (c["share"], c["exercise"]))
    rows = [
        [
            f"<code>{escape(c['exercise'])}</code> {escape(c['check'])}",
            _share_bar(c["share"], f"{c['check']}: {_percent(c['share'])} passed"),
            _percent(c["share"]),
            f"{c['passed']} of {c['ran']}",
        ]
        for c in ordered
    ]
    return _table(["check (hardest first)", "", "passed", "submissions"], rows, {2, 3})


def _diagnosis_section(diagnoses: list[dict[str, Any]]) -> str:
    rows = []
    for d in diagnoses:
        example = d["example"]
        rows.append(
            [
                escape(d["cause"]),
                str(d["count"]),
                f"{escape(example['submission'])}, <code>{escape(example['exercise'])}</code> "
                f"{escape(example['check'])}<pre>{escape(example['message'])}</pre>",
            ]
        )
    return _table(["diagnosis", "count", "an example"], rows, {1})


def _speedup_section(speedups: list[dict[str, Any]]) -> str:
    rows = [
        [
            f"<code>{escape(s['exercise'])}</code> {escape(s['check'])}",
            str(s["count"]),
            f"{s['min']:g}×",
            f"{s['median']:g}×",
            f"{s['max']:g}×",
            _speedup_strip(s["values"]),
        ]
        for s in speedups
    ]
    return _table(["timed check", "measured", "min", "median", "max", ""], rows, {1, 2, 3, 4})


def _speedup_strip(values: list[float]) -> str:
    """Each submission's speedup as a dot on a shared axis from 0 to the largest."""
    top = max(values, default=0) or 1
    dots = "".join(
        f"<circle class='speedup' cx='{4 + 192 * v / top:.1f}' cy='8' r='3' fill='#4c6ef5' "
        f"fill-opacity='.5'><title>{v:g}×</title></circle>"
        for v in values
    )
    return (
        f"<svg role='img' aria-label='speedups' viewBox='0 0 200 16' width='200' height='16'>"
        f"<line x1='4' y1='8' x2='196' y2='8' stroke='#bbc'/>{dots}</svg>"
    )
