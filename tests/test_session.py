"""The learner's loop as a library: kata.learning.session.Session, without the CLI."""

import dataclasses

import pytest

from kata.learning.session import GradedExercise, GradingProgress, NoOriginal, Session
from kata.results import CheckResult, Outcome
from kata.servers.warm import COLD_VARIABLE

from .helpers import solve


def test_a_session_follows_the_learner_from_stub_to_solved(mini):
    session = Session.open(mini)
    first, second = session.course.exercises
    assert session.current() == first
    assert [state for _, state in session.states()] == ["current", "pending"]

    stub = session.check_own([first])
    assert not stub.passed and stub.newly_solved == [] and stub.upcoming == first

    solve(mini, first.id)
    assert session.changed_since_graded(first)
    solved = session.check_own([first])
    assert solved.passed and solved.newly_solved == [first] and solved.upcoming == second
    assert not session.changed_since_graded(first)
    assert Session.open(mini).is_done(first), "the verdict was not saved"

    again = session.check_own([first])
    assert again.passed and again.newly_solved == [], "solved twice"


def test_regrading_brings_edited_files_up_to_date(mini):
    session = Session.open(mini)
    first = session.course.exercises[0]
    assert session.regrade_changed() == {}, "the untouched stub needs no grading"
    solve(mini, first.id)
    announced = []
    regraded = session.regrade_changed(announce=announced.append)
    assert announced == [[first]]
    assert list(regraded) == [first.id] and regraded[first.id].passed
    assert session.current() == session.course.exercises[1]
    assert session.results_of(first, regraded) is regraded[first.id]


def test_hints_come_one_at_a_time_and_are_remembered(mini):
    session = Session.open(mini)
    other = session.course.exercises[1]  # exercise-wide hints (01_demo's are per task)
    shown = [session.next_hint(other) for _ in range(len(other.hints) + 1)]
    assert [hint.number for hint in shown] == [*range(1, len(other.hints) + 1), len(other.hints)]
    assert shown[-1].is_last and shown[-1].text == other.hints[-1]
    assert Session.open(mini).progress.hints_shown[other.id] == len(other.hints)


def test_reset_puts_the_stub_back_and_keeps_the_learners_file(mini):
    session = Session.open(mini)
    first = session.course.exercises[0]
    path = session.exercise_file(first)
    stub = path.read_text()
    path.write_text("mine = 1\n")
    backup = session.reset(first)
    assert path.read_text() == stub
    assert backup is not None and backup.read_text() == "mine = 1\n"


def test_reset_without_git_says_why(mini):
    (mini / ".git").rename(mini / "not-git")
    session = Session.open(mini)
    with pytest.raises(NoOriginal, match="not a git clone"):
        session.reset(session.course.exercises[0])


def test_a_session_is_cold_when_asked_or_when_the_environment_says_so(mini, monkeypatch):
    monkeypatch.delenv(COLD_VARIABLE)
    assert not Session.open(mini).cold
    assert Session.open(mini, cold=True).cold
    monkeypatch.setenv(COLD_VARIABLE, "1")
    assert Session.open(mini).cold


def test_after_a_reset_hints_start_again_from_the_first_task(mini):
    session = Session.open(mini)
    first = session.course.exercises[0]
    path = session.exercise_file(first)
    path.write_text(path.read_text().replace("return x  # TODO", "return 2 * x"))
    assert session.hint_exercise() == first
    assert session.next_hint(first).task == "draw", "double was solved"
    session.reset(first)
    assert session.hint_exercise() == first
    assert session.next_hint(first).task == "double", "the stub fails double again"


def test_an_exercise_is_over_only_once_the_grading_moves_past_it(mini):
    """What `kata check` shows as it goes (kata.cli.learner._LiveProgress) is folded from
    the runner's `on_check` calls, as a grading whose judge a learner's code killed makes
    them: the check it died in gets its verdict without a call, and a new judge grades
    that exercise's unsettled checks; an exercise with no file is never graded at all."""
    first, second = Session.open(mini).course.exercises
    unfiled = dataclasses.replace(first, id="00_missing")
    progress = GradingProgress([first, unfiled, second])

    def started(exercise, name):
        check = CheckResult(id=f"{exercise.id}::{name}", exercise=exercise.id, name=name)
        assert progress.seen(check) == [], "its exercise is not over yet"
        return check

    passes = started(first, "passes")
    passes.outcome = Outcome.PASSED
    assert progress.seen(passes) == [] and progress.position == 1
    started(first, "kills").outcome = Outcome.CRASHED  # the runner's, with no call
    rerun = started(first, "unsettled")  # in the new judge
    assert (progress.done, progress.failed) == (2, 1)
    rerun.outcome = Outcome.PASSED
    progress.seen(rerun)
    assert progress.seen(CheckResult(id="x", exercise=second.id, name="x")) == [
        GradedExercise(first, passed=2, started=3),
        GradedExercise(unfiled, passed=0, started=0),
    ]
    assert progress.position == 3
    assert progress.finished() == [GradedExercise(second, passed=0, started=1)]
    assert progress.finished() == [], "each exercise is over once"
