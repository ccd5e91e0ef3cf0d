"""Limits every process that runs or judges learner code puts on itself: the environment it
passes on, its rlimits, its Landlock confinement to the run's paths, and the compilation cache
it follows."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from kata.isolation import confinement
from kata.isolation.caches import judge_cache

# What a run's environment may hold: the names the system, Python, pytest, JAX and its
# accelerators' runtimes and kata read. Anything else (a DATABASE_URL with its password,
# an OPENAI_KEY, a GH_PAT) stays with the grader: a name no one listed is not passed on.
PASSED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "COLUMNS",
    "LINES", "NO_COLOR", "FORCE_COLOR", "TMPDIR", "TEMP", "TMP", "LD_LIBRARY_PATH",
    "VIRTUAL_ENV", "CONDA_PREFIX",
})  # fmt: skip
PASSED_PREFIXES = (
    "LC_", "PYTHON", "PYTEST_", "KATA_", "JAX_", "XLA_", "TPU_", "LIBTPU_", "CUDA_",
    "NVIDIA_", "NCCL_", "ROCM_", "HIP_", "OMP_", "MKL_", "OPENBLAS_", "TF_CPP_",
)  # fmt: skip
# And of those, none that looks secret, whatever its prefix (KATA_UPLOAD_TOKEN,
# PYTHON_KEYRING_PASSWORD).
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|_PWD$|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|AUTH|COOKIE|SESSION|"
    r"(^|_)PAT$|DSN",
    re.I,
)


def scrub_environment(env: dict[str, str]) -> dict[str, str]:
    """The part of `env` a run may see (`PASSED_NAMES`, `PASSED_PREFIXES`, no secret)."""
    return {
        name: value
        for name, value in env.items()
        if (name in PASSED_NAMES or name.startswith(PASSED_PREFIXES))
        and not SECRET_NAME.search(name)
    }


def apply_limits(memory_bytes: int | None) -> None:
    try:
        import resource
    except ImportError:  # Windows: no rlimits; the time limits still hold
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def confine_run(paths: dict[str, Any] | None, signals_scoped: bool = True) -> int:
    """Confine this process to the run's `paths` ({"read": [...], "write": [...]}); None
    runs unconfined. The Landlock ABI in force, 0 for none."""
    if paths is None:
        return 0
    hidden = tuple(paths.get("hidden", ()))
    policy = confinement.grading_policy(paths["read"], paths["write"], hidden=hidden)
    return confinement.confine(policy, signals_scoped)


def follow_compilation_cache(judge: bool = False) -> None:
    """Compile into and from the cache this run's environment names, a `judge` into its
    own beside it (kata.isolation.caches), and with none named, keep none: a warm run's
    processes imported JAX, which reads the variable once, before they knew the run."""
    wanted = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if wanted or "jax" in sys.modules:
        import jax
        from jax._src import compilation_cache

        if wanted and judge:
            wanted = judge_cache(wanted)
        jax.config.update("jax_compilation_cache_dir", wanted or None)
        compilation_cache.reset_cache()
