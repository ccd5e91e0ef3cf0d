"""What a process of a run printed, kept up to a limit however much it prints: the cold judge's
output (kata.supervisor.judge_process) and a warm run's (kata.servers.worker)."""

from __future__ import annotations

import threading
from typing import IO


class OutputCollector(threading.Thread):
    """Drains a pipe, keeping the first `limit` bytes, so a flood never fills memory."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit = stream, limit
        self.kept = bytearray()
        self.total = 0

    def run(self) -> None:
        while chunk := self.stream.read(65536):
            self.total += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def text(self) -> str:
        shown = self.kept.decode("utf-8", errors="replace")
        if self.total > len(self.kept):
            shown += (
                f"\n… output truncated: {self.total:,} bytes printed, "
                f"the first {len(self.kept):,} shown"
            )
        return shown
