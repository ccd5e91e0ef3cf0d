"""What a diagnosis reads (a Failure) and says (a Diagnosis): shared by kata.diagnosis.diagnose's
rules and those of the modules it draws on."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    fix: str
    # The rule that recognised it (its function's name): one cause however its text is
    # worded, so a class report counts a mistake once whichever variant of the text it got.
    rule: str = ""


@dataclass(frozen=True)
class Failure:
    """What a check saw raise: class names (most derived first), message, learner line."""

    types: tuple[str, ...]
    message: str
    source_line: str = ""
    learner_lines: tuple[str, ...] = ()  # every learner line of the traceback, outermost first

    def is_a(self, *names: str) -> bool:
        return any(name in self.types for name in names)

    def says(self, *fragments: str) -> bool:
        text = self.message.lower()
        return any(fragment.lower() in text for fragment in fragments)

    def line_has(self, pattern: str) -> bool:
        return re.search(pattern, self.source_line) is not None

    def any_line_has(self, pattern: str) -> bool:
        """Whether the failing line, or a learner line that called it, matches."""
        lines = (*self.learner_lines, self.source_line)
        return any(re.search(pattern, line) for line in lines)
