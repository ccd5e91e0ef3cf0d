"""Whether a GPU or TPU runtime is installed: what the default memory cap and the grading
platform (kata.grading_platform) depend on.

Its own module, importing nothing of kata's, so the data model (kata.results) can ask it
without importing the grading engine.
"""

from __future__ import annotations

import functools
import importlib.util

# A GPU or TPU runtime reserves far more address space than it uses; a cap breaks it.
# JAX's CUDA and ROCm plugins install these modules; libtpu is the TPU runtime.
TPU_MODULES = ("libtpu",)
GPU_MODULES = ("jax_plugins", "jax_cuda12_plugin", "jax_cuda13_plugin")


@functools.cache
def accelerator_installed() -> bool:
    return installed_accelerator() is not None


@functools.cache
def installed_accelerator() -> str | None:
    """ "TPU" where libtpu is installed, else "GPU" where a JAX GPU plugin is, else None."""
    return next((chip for chip in RUNTIME_MODULES if runtime_installed(chip)), None)


RUNTIME_MODULES = {"TPU": TPU_MODULES, "GPU": GPU_MODULES}


@functools.cache
def runtime_installed(chip: str) -> bool:
    """Whether JAX's runtime for `chip` ("TPU" or "GPU") is installed."""
    return any(importlib.util.find_spec(name) for name in RUNTIME_MODULES[chip])
