"""Rules given as data: the rows of `error_rules.toml`, each an error's evidence and the
cause and fix it means.

A rule here needs no code: the exception's class names, fragments of its message and
patterns of the learner's lines recognise it, and its text is fixed. Rules that must read
more (a call's signature, a name on the failing line put into the text) are functions, each
named by a row of the same table (`code`: its module), so that the table holds the one
order in which kata.diagnosis.diagnose.RULES tries them all (`order`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kata.course import tomllib
from kata.diagnosis.diagnose_types import Diagnosis, Failure

TABLE = Path(__file__).with_name("error_rules.toml")
EVIDENCE_KEYS = ("types", "says", "message", "line", "not_line", "any_line", "or")


@dataclass(frozen=True)
class Evidence:
    """What a failure must show for a row to hold: every field given (a field left empty
    holds always), or else the `alternative`."""

    types: tuple[str, ...] = ()  # the exception is one of these classes, or a subclass
    says: tuple[tuple[str, ...], ...] = ()  # the message holds one fragment of each
    message: str = ""  # a pattern the message matches (case-sensitive)
    line: tuple[str, ...] = ()  # patterns the failing learner line matches, all of them
    not_line: str = ""  # a pattern the failing line does not match
    any_line: str = ""  # a pattern the failing line, or a learner line that called it, matches
    alternative: Evidence | None = None  # other evidence that holds the row as well

    def holds(self, f: Failure) -> bool:
        """Whether the failure shows this evidence, or its alternative."""
        shown = (
            (not self.types or f.is_a(*self.types))
            and all(f.says(*fragments) for fragments in self.says)
            and (not self.message or re.search(self.message, f.message) is not None)
            and all(f.line_has(pattern) for pattern in self.line)
            and not (self.not_line and f.line_has(self.not_line))
            and (not self.any_line or f.any_line_has(self.any_line))
        )
        return shown or (self.alternative is not None and self.alternative.holds(f))


@dataclass(frozen=True)
class Row:
    """One row of the table: its evidence, and the diagnosis it gives when that holds."""

    evidence: Evidence
    cause: str
    fix: str


@dataclass(frozen=True)
class KnownError:
    """A rule of the table: its rows, tried in order; the first that holds answers."""

    name: str
    rows: tuple[Row, ...]

    def __call__(self, f: Failure) -> Diagnosis | None:
        row = next((row for row in self.rows if row.evidence.holds(f)), None)
        return Diagnosis(row.cause, row.fix) if row else None


def _evidence(fields: dict) -> Evidence:
    unknown = set(fields) - set(EVIDENCE_KEYS)
    if unknown:
        raise ValueError(f"{TABLE.name}: unknown keys {sorted(unknown)}")
    line = fields.get("line", ())
    evidence = Evidence(
        types=tuple(fields.get("types", ())),
        says=tuple((s,) if isinstance(s, str) else tuple(s) for s in fields.get("says", ())),
        message=fields.get("message", ""),
        line=(line,) if isinstance(line, str) else tuple(line),
        not_line=fields.get("not_line", ""),
        any_line=fields.get("any_line", ""),
        alternative=_evidence(fields["or"]) if "or" in fields else None,
    )
    for pattern in (evidence.message, *evidence.line, evidence.not_line, evidence.any_line):
        re.compile(pattern)  # a mistyped pattern fails on loading, not on a learner's error
    return evidence


@cache
def _rows() -> list[dict]:
    return tomllib.loads(TABLE.read_text(encoding="utf-8"))["error"]


@cache
def order() -> tuple[tuple[str, str | None], ...]:
    """Every rule, in the order the diagnosis tries them: (its name, the module of the
    function it is, or None for a rule of rows here)."""
    named = dict.fromkeys((row["rule"], row.get("code")) for row in _rows())
    return tuple(named)


@cache
def by_name() -> dict[str, KnownError]:
    """Every rule of rows by name, in the table's order; a rule's rows sit together."""
    rules: dict[str, list[Row]] = {}
    last = ""
    for row in _rows():
        if "code" in row:
            last = row["rule"]
            continue
        fields = dict(row)
        name, cause, fix = fields.pop("rule"), fields.pop("cause"), fields.pop("fix")
        if name in rules and name != last:
            raise ValueError(f"{TABLE.name}: the rows of {name} are not together")
        rules.setdefault(name, []).append(Row(_evidence(fields), cause, fix))
        last = name
    return {name: KnownError(name, tuple(rows)) for name, rows in rules.items()}
