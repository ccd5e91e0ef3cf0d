"""JAX-aware diagnosis: what an exception from learner code means to a PyTorch user.

Works on the exception's class names (its whole MRO, so subclasses match) and message,
plus the learner's line that raised, so it runs without importing JAX and across JAX
versions whose messages differ (match short, stable substrings only).

RULES is every rule, in the order they are tried: the first that recognises the failure
answers. A rule is a row of `error_rules.toml` where the error's type, words and line are
evidence enough (KNOWN), else a function of `diagnose_spelling` (PyTorch's names and
argument orders), `diagnose_values` (keys, traced values, pytrees, loops, shapes) or
`diagnose_calls` (calls into JAX, Optax and Equinox, read from their signatures).

Words of kata's own, in the rules and their texts:
    learner     whoever takes the course; the learner's line is the line of their code the
                traceback ends on (`Failure.source_line`), their lines every line of theirs
                in it (`Failure.learner_lines`)
    check       a test of the course's `checks/` that grades an exercise; the grader runs
                them sandboxed (a time limit, no network, writes only in its folder)
    habit       a PyTorch way of writing something, brought to JAX, where it fails
    evidence    what a rule reads to recognise a failure: the exception's classes, its
                message, the learner's lines
    row         an entry of a table: `error_rules.toml`'s (a rule given as data) or
                `torch_to_jax.toml`'s (a torch name and its JAX spelling)
    look-alike  an error with a rule's words but not its cause, on which the rule stays
                silent (tests/test_diagnosis_look_alikes.py)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kata.diagnosis import (
    argument_order,
    diagnose_calls,
    diagnose_spelling,
    diagnose_values,
    error_rules,
)
from kata.diagnosis.diagnose_types import Diagnosis, Failure

__all__ = ["Diagnosis", "Failure", "RULES", "diagnose", "rule_name"]

Rule = Callable[[Failure], Diagnosis | None]

KNOWN = error_rules.by_name()  # the rules of error_rules.toml's rows, by name
# The modules whose functions are rules, as error_rules.toml names them (`code`).
CODE = {
    module.__name__.rpartition(".")[2]: module
    for module in (argument_order, diagnose_calls, diagnose_spelling, diagnose_values)
}
# Every rule, in the one order error_rules.toml gives: its rows, or a function of CODE's.
RULES: tuple[Rule, ...] = tuple(
    KNOWN[name] if module is None else getattr(CODE[module], name)
    for name, module in error_rules.order()
)


def rule_name(rule: Rule) -> str:
    """The name a rule gives its diagnosis (`Diagnosis.rule`): a row's, or a function's."""
    return rule.name if isinstance(rule, error_rules.KnownError) else rule.__name__


def diagnose(failure: Failure) -> Diagnosis | None:
    """The first rule that recognises the failure, or None for an ordinary error."""
    for rule in RULES:
        found = rule(failure)
        if found is not None:
            return dataclasses.replace(found, rule=rule_name(rule))
    return None
