"""Before a grading starts: what must hold for it to run and for its results to be written,
checked in one place for every command and magic that grades, so that each fails in one
line (a usage error: exit 2) before any work, not after minutes of it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from kata import grading_platform
from kata.isolation import confinement
from kata.reporting import outputs
from kata.versions import UnsupportedVersions, require_supported


class NotReady(Exception):
    """Why grading cannot start here, in one line."""


def preflight(
    *,
    writes: Iterable[Path | None] = (),
    state_dir: Path | None = None,
    confine: bool = False,
    grades: bool = True,
) -> None:
    """Raise NotReady unless every file the command `writes` can be written; where it
    `grades`, the packages installed here are in the ranges kata declares (grading on others
    would fail learners' files for the course's fault; remembered in the course's
    `state_dir`), and the user's JAX_PLATFORMS names no chip this machine lacks; and, where
    submissions must be `confine`d, this kernel can confine them."""
    missing_chip = grading_platform.missing_chip(os.environ, grading_platform.SYSTEM)
    if grades and missing_chip:
        raise NotReady(missing_chip)
    try:
        for path in writes:
            if path is not None:
                outputs.check_writable(path)
        if grades:
            require_supported(state_dir)
    except (outputs.OutputError, UnsupportedVersions) as error:
        raise NotReady(str(error)) from None
    reason = confinement.unavailable_reason() if confine else None
    if reason:
        raise NotReady(
            f"cannot confine submissions: {reason}; pass --unconfined to grade them with "
            "your own rights anyway"
        )
