"""The pytest plugin that runs inside the grading child process.

It streams one JSON line per event, sealed (kata.handoffs.seal), to the file named by
`--kata-events`, flushed as it goes, so that the parent knows each verdict, and which
check was running if the process dies or hangs. Failures are turned into the learner's
terms here, where the exception object and its traceback still exist.
"""

from __future__ import annotations

import gc
import linecache
import os
import re
import traceback
from pathlib import Path
from typing import IO, Any

import jax
import pytest

from kata.course import exercise_of_check_file
from kata.diagnosis.diagnose import Failure, diagnose
from kata.diagnosis.dropped_results import explain as explain_dropped_result
from kata.diagnosis.traced_side_effects import explain as explain_side_effect
from kata.findings import finding_of
from kata.handoffs.environment import EVENTS_KEY_VARIABLE
from kata.handoffs.seal import Seal
from kata.handoffs.wire import GraderTampering, LearnerError
from kata.learner_side.learner_file import source_dir
from kata.results import (
    MEASUREMENT_PROPERTY,
    NOTE_PROPERTY,
    Collected,
    CollectError,
    Event,
    Outcome,
    Started,
    Verdict,
    event_line,
)

FILE_AND_LINE = re.compile(r"(/[^\s:()'\"]+\.py):(\d+)")
MESSAGE_LIMIT = 2_000
# How JAX prints the tracers the checks' own jax.vmap/jit hand the learner's function:
# `VmapTracer(aval=float32[], batched=float32[200])`, `Traced<float32[]>with<BatchTrace>`,
# "This BatchTracer with object id 1403… was created on line: <the check's file>".
CHECKER_TRACER = re.compile(r"\b(Vmap|Batch)Tracer\([^()]*\)|Traced<[^<>]*>with<BatchTrace[^<>]*>")
TRACER_ORIGIN = re.compile(r"This \w*Tracer with object id \d+ was created on line:\n?[^\n]*\n?")
OUTPUT_LIMIT = 4_000
# How pytest-timeout's failure begins (pytest_timeout.PYTEST_FAILURE_MESSAGE).
TIMEOUT_MESSAGE = "Timeout (>"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--kata-events", help="write grading events to this file (JSON lines)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--kata-events")
    if path:
        seal = Seal(os.environ.pop(EVENTS_KEY_VARIABLE, ""))
        writer = EventWriter(_events_stream(path), Path(config.rootpath), seal)
        config.pluginmanager.register(writer, "kata-events")


def _events_stream(path: str) -> IO[str]:
    """Where events go: `fd:N`, the pipe the runner reads (kata.handoffs.events_pipe), or a file."""
    if path.startswith("fd:"):
        return os.fdopen(int(path.removeprefix("fd:")), "w", encoding="utf-8")
    return Path(path).open("a", encoding="utf-8")


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text) - limit} more characters not shown)"


def check_name(item: pytest.Item) -> str:
    """The check's name for a learner: its docstring's first line, else its function name."""
    doc = getattr(getattr(item, "function", None), "__doc__", None)
    if doc and doc.strip():
        return doc.strip().splitlines()[0]
    return item.name.removeprefix("test_").replace("_", " ")


def task_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("task")
    return str(marker.args[0]) if marker and marker.args else None


def learner_frames(
    excinfo: pytest.ExceptionInfo[BaseException], source: Path
) -> list[tuple[str, int, str]]:
    """(file, line, code) of each frame in the graded folder, outermost first, ending where
    the failure arose."""
    error = excinfo.value
    frames = error.frames if isinstance(error, LearnerError) else []
    frames = frames or getattr(error, "learner_frames", [])  # where a stopped call was
    if frames:
        return list(frames)
    if isinstance(error, SyntaxError) and error.filename:
        return [(error.filename, error.lineno or 0, (error.text or "").strip())]
    found = [
        (frame.filename, frame.lineno or 0, (frame.line or "").strip())
        for frame in traceback.extract_tb(excinfo.tb)
        if _is_learner_file(frame.filename, source)
    ]
    if not found:
        # JAX raises some errors after tracing ends (a leaked tracer, say), from the
        # caller's line; its message still names the learner's file and line.
        for path, line in FILE_AND_LINE.findall(str(error)):
            if _is_learner_file(path, source):
                return [(path, int(line), linecache.getline(path, int(line)).strip())]
    return found


def _is_learner_file(filename: str, source: Path) -> bool:
    return Path(filename).resolve().is_relative_to(source)


def in_learner_terms(message: str) -> str:
    """JAX's message without the checker's own tracers, which mean nothing to the learner."""
    message = CHECKER_TRACER.sub(
        "a traced value (your function received a traced value while the check batched it)",
        message,
    )
    return TRACER_ORIGIN.sub("", message)


def describe_failure(
    excinfo: pytest.ExceptionInfo[BaseException], source: Path, exercise_file: Path | None = None
) -> dict[str, Any]:
    """The failure in the learner's terms: its message, exception, what the check found,
    where in the learner's file it arose, and its diagnosis. `exercise_file`, the graded
    file, is read for side effects inside jit where no learner line raised."""
    error = excinfo.value
    if isinstance(error, GraderTampering):
        return tampering_failure(error.names)
    types = tuple(cls.__name__ for cls in type(error).__mro__)
    # A check's own assertion speaks to the learner already; anything else is learner code
    # raising, shown with its type.
    finding = None
    if isinstance(error, LearnerError):
        types, message = error.types, str(error)
    elif isinstance(error, AssertionError) and str(error):
        message, finding = str(error), finding_of(error)
    else:
        message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    message = in_learner_terms(message)
    frames = learner_frames(excinfo, source)
    frame = frames[-1] if frames else None
    lines = tuple(code for _, _, code in frames)
    failure = Failure(types, message, frame[2] if frame else "", lines)
    try:
        # A side effect inside jit, or a result dropped, is told from the learner's file,
        # which kata.diagnosis.diagnose's rules do not read.
        code = _learner_source(frame[0] if frame else exercise_file)
        found = (
            explain_side_effect(failure, code, finding)
            or explain_dropped_result(failure, code, finding)
            or diagnose(failure)
        )
    except Exception:  # the explanation is extra: a fault in it must never cost the verdict
        found = None
    return {
        "message": clip(message, MESSAGE_LIMIT),
        "exception": types[0],
        "finding": finding,
        "location": {"file": frame[0], "line": frame[1], "code": frame[2]} if frame else None,
        "diagnosis": {"cause": found.cause, "fix": found.fix, "rule": found.rule}
        if found
        else None,
    }


def _learner_source(path: str | Path | None) -> str | None:
    """The text of the learner's file a failure arose in, if it can be read."""
    try:
        return Path(path).read_text(encoding="utf-8") if path else None
    except (OSError, UnicodeDecodeError):
        return None


def tampering_failure(names: list[str]) -> dict[str, Any]:
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return {
        "message": f"the submission changed the grader's own modules: {shown}",
        "exception": "GraderTampering",
        "diagnosis": {
            "cause": "code in this file replaced functions that NumPy, JAX, pytest or the "
            "checks rely on, so no verdict of this run can be trusted.",
            "fix": "leave other modules' functions as they are; compute your results instead.",
            "rule": "tampering",
        },
    }


def _ended_task(excinfo: pytest.ExceptionInfo[BaseException]) -> str | None:
    """Why a check's failure leaves its task's other checks unrun, if it does: pytest-timeout
    stopped it (only the judge raises pytest's Failed: learner code's exceptions arrive as
    LearnerError), or a program it ran never finished (`ends_task`)."""
    error = excinfo.value
    if isinstance(error, pytest.fail.Exception) and str(error).startswith(TIMEOUT_MESSAGE):
        return "ran out of time"
    return "never finished" if getattr(error, "ends_task", False) else None


def load_failure(error: BaseException, checks_dir: Path) -> str:
    """Why a check file could not be imported, in one line: the JAX it ran on, the line of
    the course's checks that failed, and the exception (pytest wraps an ImportError or a
    SyntaxError in a CollectError of its own, whose text is a page)."""
    if isinstance(error, pytest.Collector.CollectError):
        error = error.__cause__ or error.__context__ or error
    where = ""
    if isinstance(error, SyntaxError) and error.filename:
        where = f"{_shown_path(error.filename, checks_dir)}:{error.lineno}: "
    else:
        frames = [
            frame
            for frame in traceback.extract_tb(error.__traceback__)
            if Path(frame.filename).resolve().is_relative_to(checks_dir.resolve())
        ]
        if frames:
            where = f"{_shown_path(frames[-1].filename, checks_dir)}:{frames[-1].lineno}: "
    said = str(error).strip().splitlines()
    exception = f"{type(error).__name__}: {said[0]}" if said else type(error).__name__
    return f"on jax {jax.__version__}, {where}{exception}"


def _shown_path(filename: str, checks_dir: Path) -> str:
    path = Path(filename).resolve()
    if path.is_relative_to(checks_dir.resolve()):
        return f"checks/{path.relative_to(checks_dir.resolve())}"
    return str(path)


def last_line(longrepr: object) -> str:
    """The exception line of pytest's rendering of a failure (`E   ImportError: ...`)."""
    lines = [line.strip() for line in str(longrepr).splitlines() if line.strip()]
    errors = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")]
    return errors[-1] if errors else (lines[-1] if lines else "")


class EventWriter:
    def __init__(self, stream: IO[str], course_root: Path, seal: Seal) -> None:
        self.stream = stream
        self.seal = seal
        self.source = source_dir(course_root)
        self.failures: dict[str, dict[str, Any]] = {}
        self.checks_dir = course_root / "checks"
        # Why each check file that could not be imported failed, in one line.
        self.load_failures: dict[str, str] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.output: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.notes: dict[str, list[str]] = {}
        self.measurements: dict[str, dict[str, float]] = {}
        # A task whose check ran out of time ends there: each of its later checks would
        # only wait out the same loop again. (check file, task) -> why the rest never ran.
        self.ended_tasks: dict[tuple[Path, str], str] = {}
        self.not_reached: dict[str, str] = {}

    def emit(self, event: Event) -> None:
        self.stream.write(self.seal.seal(event_line(event)))
        self.stream.flush()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.emit(
            Collected(
                checks=[
                    {
                        "id": item.nodeid,
                        "exercise": exercise_of_check_file(item.path),
                        "task": task_of(item),
                        "name": check_name(item),
                        "speed": item.get_closest_marker("speed") is not None,
                    }
                    for item in session.items
                ]
            )
        )

    def pytest_exception_interact(
        self, node: pytest.Item | pytest.Collector, call: pytest.CallInfo[Any], report: Any
    ) -> None:
        # Called for a check file that fails to import, before its report: the exception
        # itself is here, not only pytest's rendering of it.
        if isinstance(report, pytest.CollectReport) and call.excinfo is not None:
            self.load_failures[report.nodeid] = load_failure(call.excinfo.value, self.checks_dir)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            message = self.load_failures.pop(report.nodeid, None) or last_line(report.longrepr)
            self.emit(CollectError(path=report.nodeid, message=clip(message, MESSAGE_LIMIT)))

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.emit(Started(id=nodeid))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        outcome = yield
        report = outcome.get_result()
        if call.excinfo is not None and report.failed and item.nodeid not in self.failures:
            graded = self.source / f"{exercise_of_check_file(item.path)}.py"
            self.failures[item.nodeid] = describe_failure(call.excinfo, self.source, graded)
            task, why = task_of(item), _ended_task(call.excinfo)
            if task and why:
                self.ended_tasks.setdefault(
                    (item.path, task), f"not reached: “{check_name(item)}” {why}"
                )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        why = self.ended_tasks.get((item.path, task_of(item) or ""))
        if why:
            self.not_reached[item.nodeid] = why
            pytest.skip(why)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + report.duration
        if report.skipped and nodeid in self.not_reached:
            self.outcomes.setdefault(nodeid, Outcome.NOT_RUN)
            self.failures.setdefault(nodeid, {"message": self.not_reached.pop(nodeid)})
        elif report.skipped:
            # A skip while the check runs, after its setup passed, is no pass either.
            if self.outcomes.get(nodeid, Outcome.PASSED) == Outcome.PASSED:
                self.outcomes[nodeid] = Outcome.SKIPPED
            reason = (
                report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            )
            self.failures.setdefault(nodeid, {"message": f"skipped: {reason}"})
        elif report.failed:
            self.outcomes[nodeid] = Outcome.FAILED if report.when == "call" else Outcome.ERROR
        else:
            self.outcomes.setdefault(nodeid, Outcome.PASSED)
        # Each phase's report repeats the sections and properties of the phases before it.
        self.output[nodeid] = "".join(
            text for title, text in report.sections if title.startswith("Captured std")
        )
        notes = [str(value) for key, value in report.user_properties if key == NOTE_PROPERTY]
        if notes:
            self.notes[nodeid] = notes
        measured: dict[str, float] = {}
        for key, value in report.user_properties:
            if key == MEASUREMENT_PROPERTY:
                name, number = value
                measured[name] = measured.get(name, 0.0) + float(number)
        self.measurements[nodeid] = measured

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        if nextitem is not None and nextitem.path != item.path:
            # An exercise's compiled programs are of no use to the next one, and a whole
            # course in one process otherwise grows past Gradescope's 768 MB (largest
            # process 725 MiB before, 409 MiB after, for ~4% more CPU time).
            jax.clear_caches()
            gc.collect()

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.emit(
            Verdict(
                id=nodeid,
                outcome=self.outcomes.pop(nodeid, Outcome.ERROR),
                duration=round(self.durations.pop(nodeid, 0.0), 4),
                output=clip(self.output.pop(nodeid, ""), OUTPUT_LIMIT),
                notes=self.notes.pop(nodeid, []),
                measurements=self.measurements.pop(nodeid, {}),
                **self.failures.pop(nodeid, {}),
            )
        )

    def pytest_unconfigure(self) -> None:
        self.stream.close()
