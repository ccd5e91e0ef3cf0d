"""Ending a process without the interpreter's shutdown, once everything it owes is written.

Python's shutdown tears down every module, thread pool and backend a process loaded: with
JAX loaded that took 230 ms of every cold run's judge (a cold `kata check` of 01's stub,
1.40 → 1.15 s), and 35 ms of every `kata` command (a warm check of 01's stub, 0.36 →
0.32 s), for nothing anyone waits on. Files must be closed before: only the standard
streams are flushed here.
"""

from __future__ import annotations

import os
import sys


def end_now(code: int) -> None:
    """End this process with exit code `code`, its standard streams flushed first."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
