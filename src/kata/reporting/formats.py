"""One grading run rendered for a script (JSON), a CI system (JUnit XML and a markdown job
summary), Gradescope or Classroom 50; and a class's gradebook as Canvas's gradebook imports
it.

All of them carry the same verdicts and the same points (kata.reporting.scoring); the text a person
reads comes from kata.reporting.report and appears here as each check's output.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re
import xml.etree.ElementTree as ET
from typing import Any

import click

from kata.reporting import report
from kata.reporting.intake import relative_to_upload
from kata.reporting.scoring import ExerciseScore, score_exercise, total
from kata.results import MEASURES, CheckResult, ExerciseResult, Grading, Outcome


def scores(grading: Grading) -> list[ExerciseScore]:
    return [score_exercise(r.exercise, r) for r in grading.results]


def plain_lines(check: CheckResult) -> str:
    return "\n".join(click.unstyle(line).strip() for line in report.check_lines(check)[1:])


def exercise_text(result: ExerciseResult) -> str:
    """An exercise's verdict as `kata check` prints it, without colour."""
    return "\n".join(click.unstyle(line).rstrip() for line in report.exercise_lines(result))


def _check_json(check: CheckResult, points: float, max_points: float) -> dict[str, Any]:
    return {
        "id": check.id,
        "name": check.name,
        "task": check.task,
        "outcome": check.outcome,
        "passed": check.passed,
        "score": points,
        "max_score": max_points,
        "message": check.message,
        "exception": check.exception,
        "location": check.location,
        "diagnosis": check.diagnosis,
        "notes": check.notes,
        "measurements": check.measurements,
        "duration": check.duration,
        "feedback_only": check.feedback_only,
    }


def to_json(grading: Grading) -> dict[str, Any]:
    exercises = []
    for result, score in zip(grading.results, scores(grading), strict=True):
        exercises.append(
            {
                "id": result.exercise.id,
                "title": result.exercise.title,
                "concept": result.exercise.concept,
                "passed": result.passed,
                "problem": result.problem,
                "score": score.points,
                "max_score": score.max_points,
                "checks": [_check_json(s.check, s.points, s.max_points) for s in score.checks],
            }
        )
    return {
        "source": str(grading.source),
        "passed": grading.passed,
        "score": round(sum(e["score"] for e in exercises), 4),
        "max_score": sum(e["max_score"] for e in exercises),
        "exercises": exercises,
        "platform": grading.platform.as_dict(),
    }


def to_junit(grading: Grading) -> str:
    suites = ET.Element("testsuites", name="kata")
    for result in grading.results:
        suites.append(_junit_suite(result))
    for attribute in ("tests", "failures", "errors", "skipped"):
        suites.set(attribute, str(sum(int(s.get(attribute, "0")) for s in suites)))
    for element in suites.iter():
        element.text = element.text and xml_safe(element.text)
        element.attrib = {key: xml_safe(value) for key, value in element.attrib.items()}
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


# Characters XML 1.0 cannot hold at all, escaped or not (a learner's colored output, a bell,
# a lone surrogate): ElementTree would write them as they are, and no JUnit reader could
# parse the file.
XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """`text` with each character XML cannot hold written out as `\\xNN`."""
    return XML_FORBIDDEN.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def _junit_suite(result: ExerciseResult) -> ET.Element:
    suite = ET.Element("testsuite", name=result.exercise.id)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if not result.checks:
        case = ET.SubElement(suite, "testcase", classname=result.exercise.id, name="loads")
        ET.SubElement(case, "error", message=result.problem or "no checks ran")
        counts.update(tests=1, errors=1)
    for check in result.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"{result.exercise.id}.{check.task or 'checks'}",
            name=check.name,
            time=f"{check.duration:.3f}",
        )
        counts["tests"] += 1
        if check.outcome == Outcome.SKIPPED:
            ET.SubElement(case, "skipped", message=check.message)
            counts["skipped"] += 1
        elif not check.passed:
            kind = "failure" if check.outcome == Outcome.FAILED else "error"
            element = ET.SubElement(
                case,
                kind,
                message=check.message.splitlines()[0][:500] if check.message else check.outcome,
            )
            element.text = plain_lines(check)
            counts["failures" if kind == "failure" else "errors"] += 1
        if check.notes:
            ET.SubElement(case, "system-out").text = "\n".join(check.notes)
    for attribute, value in counts.items():
        suite.set(attribute, str(value))
    suite.set("time", f"{sum(c.duration for c in result.checks):.3f}")
    return suite


# What a student reads beside a check that rests on their process's word alone.
FEEDBACK_ONLY = (
    "Feedback only, worth no points: what this check judges, your code's own process "
    "reported, and kata grants points only on what it measured itself. Fix it all the same."
)


def to_gradescope(grading: Grading, execution_seconds: float) -> dict[str, Any]:
    """results.json as Gradescope's autograder specification describes it.

    One Gradescope test per check, tagged with its exercise's concept (and "speed" for the
    timed check); an exercise that could not be graded is one failed test worth its
    points. A check's measurements are its extra data; each jit speedup is also a leaderboard
    entry.
    """
    tests: list[dict[str, Any]] = []
    leaderboard = []
    for number, score in enumerate(scores(grading), 1):
        exercise = score.exercise
        if not score.checks:
            tests.append(
                gradescope_test(
                    f"{number}.0",
                    f"{exercise.id}: {score.note}",
                    0.0,
                    exercise.points,
                    output=score.note or "",
                    tags=[exercise.concept],
                )
            )
        for index, checked in enumerate(score.checks, 1):
            check = checked.check
            output = (
                score.note or plain_lines(check) if not check.passed else "\n".join(check.notes)
            )
            if check.feedback_only:
                output = f"{FEEDBACK_ONLY}\n{output}".strip()
            test = gradescope_test(
                f"{number}.{index}",
                f"{exercise.id} · {check.name}",
                checked.points,
                checked.max_points,
                output=output,
                tags=[exercise.concept] + (["speed"] if check.speed else []),
                seconds=check.duration,
                passed=check.passed,
            )
            if check.measurements:
                # Scored like any check; what it measured is reported too, passed or not.
                test["extra_data"] = {"measurements": check.measurements, "notes": check.notes}
            if "speedup" in check.measurements:
                leaderboard.append(
                    {
                        "name": f"{MEASURES['speedup'].title}, {exercise.id}",
                        "value": check.measurements["speedup"],
                    }
                )
            tests.append(test)
    return {
        "score": total(scores(grading))[0],
        "execution_time": round(execution_seconds, 3),
        "output": "\n".join(
            click.unstyle(line)
            for line in [*report.platform_lines(grading), report.summary_line(grading)]
        ),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "leaderboard": leaderboard,
    }


def gradescope_test(
    number: str,
    name: str,
    points: float,
    max_points: float,
    *,
    output: str,
    tags: list[str],
    seconds: float = 0.0,
    passed: bool = False,
) -> dict[str, Any]:
    return {
        "number": number,
        "name": name,
        # Whole hundredths (kata.reporting.scoring); a check that passes in a task not yet
        # solved shows as passed with no points yet.
        "score": points,
        "max_score": max_points,
        "status": "passed" if passed else "failed",
        "output": output,
        "tags": tags,
        "visibility": "visible",
        "execution_time": round(seconds, 3),
    }


CLASSROOM50_SCHEMA = "classroom50/result/v1"
# Classroom 50's runner shows at most 2,000 characters of a test's output in the release
# body it publishes (runner.py, MAX_CAPTURED_CHARS); each test's message keeps to that.
CLASSROOM50_MESSAGE_CHARS = 2000
# Classroom 50 counts points in whole numbers; an exercise worth 1 point is worth 100
# there, so partial credit (half the checks of a task: 0.5) survives as 50.
CLASSROOM50_SCALE = 100
# The submission's identity, set by Classroom 50's runner for an autograder (its
# result.json contract); copied when present so a local run stays valid without them.
CLASSROOM50_CONTEXT = {
    "classroom": "CLASSROOM",
    "assignment": "ASSIGNMENT",
    "submission": "SUBMISSION_TAG",
    "commit": "COMMIT_URL",
    "release": "RELEASE_URL",
    "review": "REVIEW_URL",
}


def to_classroom50(
    grading: Grading, environ: dict[str, str], now: str | None = None
) -> dict[str, Any]:
    """result.json in Classroom 50's `classroom50/result/v1` schema: one test per exercise.

    Scores are whole numbers (CLASSROOM50_SCALE per point); each test also carries its
    points as kata counts them, the checks passed and, unless it passed, its `message`:
    what `kata check` says of the exercise (each failing check, why and how to fix it),
    which Classroom 50 keeps verbatim.
    """
    tests = []
    for result, score in zip(grading.results, scores(grading), strict=True):
        passed = [c for c in score.checks if c.check.passed]
        solved = score.points >= score.max_points > 0
        tests.append(
            {
                "test-name": f"{score.exercise.id}: {score.exercise.title}",
                "passed": solved,
                "score": round(score.points * CLASSROOM50_SCALE),
                "max-score": round(score.max_points * CLASSROOM50_SCALE),
                "points": score.points,
                "max-points": score.max_points,
                "checks-passed": f"{len(passed)} of {len(score.checks)}",
            }
            | ({"note": score.note} if score.note else {})
            | ({} if solved else {"message": _clipped(exercise_text(result))})
        )
    context = {
        field: environ[name] for field, name in CLASSROOM50_CONTEXT.items() if environ.get(name)
    }
    if "review" not in context and "commit" in context:
        context["review"] = context["commit"]
    if context and now:
        context["datetime"] = now
    return {
        "schema": CLASSROOM50_SCHEMA,
        **context,
        "score": sum(t["score"] for t in tests),
        "max-score": sum(t["max-score"] for t in tests),
        "tests": tests,
    }


def _clipped(text: str, limit: int = CLASSROOM50_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_markdown_summary(grading: Grading) -> str:
    """A markdown table of exercises and points, then `kata check`'s verdict and what it
    says of each exercise not yet passing: a CI job summary, or the body of the release
    Classroom 50 publishes for a submission."""
    grading = relative_to_upload(grading)
    rows = [
        "| exercise | checks passed | points |",
        "|---|---:|---:|",
    ]
    graded = scores(grading)
    for score in graded:
        passed = sum(1 for c in score.checks if c.check.passed)
        mark = "✅" if score.points >= score.max_points > 0 else "❌"
        note = f" ({_markdown_cell(score.note)})" if score.note else ""
        rows.append(
            f"| {mark} `{score.exercise.id}` {_markdown_cell(score.exercise.title)}{note} "
            f"| {passed} of {len(score.checks)} | {score.points:g} / {score.max_points:g} |"
        )
    points, max_points = total(graded)
    details = [f"**{click.unstyle(report.summary_line(grading))}**"]
    for result in grading.results:
        if not result.passed:
            details += ["", _fenced(_clipped(exercise_text(result)))]
    return (
        f"## kata: {points:g} / {max_points:g} points\n\n"
        + "\n".join(rows)
        + "\n\n"
        + "\n".join(details)
        + "\n"
    )


def _fenced(text: str) -> str:
    """`text` as a markdown code block whose fence no backticks inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


# What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(cell: str) -> str:
    """A CSV cell a spreadsheet shows as text and never runs: one that starts like a formula
    gets a leading apostrophe (OWASP's rule), so `=HYPERLINK(…)` stays a name."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


# Canvas's gradebook import ("How do I import grades in the Gradebook?", Canvas Instructor
# Guide): the leading columns of Canvas's own export, then a column per assignment, and a
# second row of each assignment's points. Canvas finds each row's student by ID (its own
# user id, which a kata roster does not know: left empty), SIS User ID or SIS Login ID, and
# asks about any row it cannot match; a column that names no assignment of the course
# becomes a new one, its points from the "Points Possible" row.
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"


def to_canvas_csv(entries: list[dict[str, Any]], exercise_ids: list[str]) -> str:
    """A class's gradebook entries (kata.instructor.gradebook.json_entry) as a CSV that
    Canvas's gradebook imports: a row per student, an assignment column per exercise, named
    by its id, with its points. A roster's name, student id and email fill Student, SIS User
    ID and SIS Login ID (a login where students sign in with their email); without one, the
    student's name in the class is the Student. No total: Canvas adds up its assignments
    itself, and a total column would be one more assignment, counting every point twice."""
    points = {
        id: max((e["exercises"][id]["max"] for e in entries if id in e["exercises"]), default=0)
        for id in exercise_ids
    }
    rows = [
        [*CANVAS_COLUMNS, *exercise_ids],
        [CANVAS_POINTS_ROW, *[""] * (len(CANVAS_COLUMNS) - 1)]
        + [f"{points[id]:g}" for id in exercise_ids],
    ]
    for entry in entries:
        roster = entry.get("roster") or {}
        student = [roster.get("name") or entry["submission"], "", roster.get("student_id", "")]
        student += [roster.get("email", ""), ""]
        scores = [entry["exercises"].get(id, {}).get("score") for id in exercise_ids]
        rows.append(
            [spreadsheet_safe(cell) for cell in student]
            + ["" if score is None else f"{score:g}" for score in scores]
        )
    stream = io.StringIO()
    csv.writer(stream).writerows(rows)
    return stream.getvalue()


def _markdown_cell(text: str) -> str:
    """One line of text that cannot end a table cell or inject markup."""
    first = text.splitlines()[0] if text else ""
    return (
        first[:200].replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("`", "'")
    )


FORMATS = ("text", "json", "junit", "gradescope", "classroom50")


def render(grading: Grading, output_format: str, seconds: float) -> str:
    """`grading` in one of the machine-readable FORMATS (all but text), as printed."""
    grading = relative_to_upload(grading)
    if output_format == "junit":
        return to_junit(grading)
    if output_format == "json":
        document = to_json(grading)
    elif output_format == "gradescope":
        document = to_gradescope(grading, seconds)
    elif output_format == "classroom50":
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        document = to_classroom50(grading, dict(os.environ), now)
    else:
        raise ValueError(f"no renderer for {output_format!r}")
    return json.dumps(document, indent=2) + "\n"
