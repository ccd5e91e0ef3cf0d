"""Limits on untrusted learner code, applied inside the grading child before pytest starts.

`python -m kata.grading.sandbox --memory BYTES -- <pytest arguments>` caps the address space
(so a memory bomb raises MemoryError instead of exhausting the machine), turns off core
dumps, and runs pytest. The environment a child gets is scrubbed of secret-looking
variables by `scrub_environment`.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|AUTH|COOKIE|SESSION", re.I
)
# Names that look secret but configure the grader itself (JAX_DEBUG_KEY_REUSE, ...).
KEPT_PREFIXES = ("JAX_", "XLA_", "KATA_", "PYTEST_", "PYTHON", "TPU_", "CUDA_", "NVIDIA_")
# A GPU or TPU runtime reserves far more address space than it uses; a cap breaks it.
# JAX's CUDA and ROCm plugins install these modules; libtpu is the TPU runtime.
ACCELERATOR_MODULES = ("jax_plugins", "jax_cuda12_plugin", "jax_cuda13_plugin", "libtpu")


def scrub_environment(env: dict[str, str]) -> dict[str, str]:
    return {
        name: value
        for name, value in env.items()
        if name.startswith(KEPT_PREFIXES) or not SECRET_NAME.search(name)
    }


@functools.cache
def accelerator_installed() -> bool:
    return any(importlib.util.find_spec(name) for name in ACCELERATOR_MODULES)


def apply_limits(memory_bytes: int | None) -> None:
    try:
        import resource
    except ImportError:  # Windows: no rlimits; the time limits still hold
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def main(argv: list[str]) -> int:
    separator = argv.index("--")
    options, pytest_args = argv[:separator], argv[separator + 1 :]
    memory = int(options[options.index("--memory") + 1]) if "--memory" in options else 0
    apply_limits(memory or None)
    import pytest

    return int(pytest.main(pytest_args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
