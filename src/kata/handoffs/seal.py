"""Proof that a line of the events was written by the judge, not by learner code.

The events travel on a pipe the learner's process never holds (kata.handoffs.events_pipe);
the seal is the second line of defence, and the first where the events are a file
(`--kata-events=PATH`), which learner code can often reach: a line's place proves nothing.
Each line the judge writes ends with an HMAC of its text and its number in the run, keyed
by a secret the runner hands the judge after the learner's process is forked (through a
pipe in a cold run, in the request to a warm one): the runner reads only lines whose seal
is right and in order, so a forged "passed" line, or a true one replayed, is ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets


def new_key() -> str:
    return secrets.token_hex(32)


class Seal:
    """Seals lines in order (the judge) or opens them in order (the runner)."""

    def __init__(self, key: str) -> None:
        self.key = key.encode()
        self.count = 0

    def _mac(self, text: str) -> str:
        message = f"{self.count}\n{text}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def seal(self, line: str) -> str:
        """`line` (one line of JSON, ending in a newline) with its seal."""
        sealed = f"{line.rstrip(chr(10))} {self._mac(line.rstrip(chr(10)))}\n"
        self.count += 1
        return sealed

    def open(self, sealed: str) -> str | None:
        """The text of the next line in order, or None for a line the judge did not write."""
        text, _, mac = sealed.rstrip("\n").rpartition(" ")
        if not hmac.compare_digest(mac, self._mac(text)):
            return None
        self.count += 1
        return text


def key_from_pipe(fd: int) -> str:
    """The key a cold run was given on the pipe at `fd`, for the judge's plugin; read only
    after every process of the learner's code is forked."""
    with os.fdopen(fd, encoding="ascii") as pipe:
        return pipe.read()
