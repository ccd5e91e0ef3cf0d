"""A chip holder on the CPU that stands in for a GPU's: it greets as a GPU's holder does and
takes the programs a GPU's would, running them on the CPU. No test machine has a GPU, and
with the CPU standing in as itself the device's platform and `jax.export`'s name for it are
both "cpu": the difference between them ("gpu" against "cuda") cannot show.

    python tests/stand_in_gpu_holder.py SOCKET LOCK GREETING [REQUEST_SECONDS]

GREETING: the platform it greets with ("cuda", "rocm", or "gpu", as a CUDA device's
`platform` and a holder of an earlier kata said). It runs a program exported for
kata.handoffs.chip_connection.EXPORT_NAMES's name for it, compiled for the CPU (a program
whose lowering is the same on both, as the course's are)."""

import dataclasses
import sys
from pathlib import Path
from typing import Any

from kata.handoffs.chip_connection import EXPORT_NAMES, ChipError
from kata.servers import chip_holder

DEVICE = "NVIDIA H200 (the CPU standing in)"


class StandInGPU(chip_holder.Holder):
    def __init__(self, greeting: str) -> None:
        super().__init__()
        self.platform, self.device = greeting, DEVICE
        self.exports_for = EXPORT_NAMES.get(greeting, greeting)

    def runnable(self, exported: Any) -> Any:
        if tuple(exported.platforms) != (self.exports_for,):
            raise ChipError(f"a program for {exported.platforms}, not {self.exports_for}")
        return dataclasses.replace(exported, platforms=("cpu",))


if __name__ == "__main__":
    socket_path, lock, greeting, *seconds = sys.argv[1:]
    chip_holder.serve(
        Path(socket_path),
        Path(lock),
        request_seconds=float(seconds[0]) if seconds else chip_holder.REQUEST_RUN_SECONDS,
        open_chip=lambda: StandInGPU(greeting),
    )
