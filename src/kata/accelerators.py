"""Whether a GPU or TPU runtime is installed: what the default memory cap depends on.

Its own module, importing nothing of kata's, so the data model (kata.results) can ask it
without importing the grading engine.
"""

from __future__ import annotations

import functools
import importlib.util

# A GPU or TPU runtime reserves far more address space than it uses; a cap breaks it.
# JAX's CUDA and ROCm plugins install these modules; libtpu is the TPU runtime.
ACCELERATOR_MODULES = ("jax_plugins", "jax_cuda12_plugin", "jax_cuda13_plugin", "libtpu")


@functools.cache
def accelerator_installed() -> bool:
    return any(importlib.util.find_spec(name) for name in ACCELERATOR_MODULES)
