"""List PyTorch's documented surface: the `torch.*` functions and `torch.Tensor` methods.

Run it with a Python that has torch installed (torch is never a dependency of kata):

    python -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0
    /tmp/torchenv/bin/python tools/torch_surface.py > src/kata/diagnosis/torch_surface.json

"Documented" is what torch's own API reference is built from: every function torch gives a
docstring in `torch/_torch_docs.py` (`add_docstr(torch.NAME, ...)`), the Python functions
of `torch.functional` and of `torch.__all__`; every Tensor method or attribute given one in
`torch/_tensor_docs.py` (`add_docstr_all("NAME", ...)`) and the public methods that
`torch/_tensor.py` defines in Python. Private names (a leading underscore) are left out.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

import torch
import torch.functional

TORCH_DOCS = re.compile(r"^add_docstr\(\s*torch\.(\w+)\s*,", re.MULTILINE)
TENSOR_DOCS = re.compile(r"add_docstr_all\(\s*\"(\w+)\"")


def documented_functions() -> list[str]:
    root = Path(torch.__file__).parent
    names = set(TORCH_DOCS.findall((root / "_torch_docs.py").read_text()))
    names |= set(torch.functional.__all__)
    names |= {
        name
        for name in torch.__all__
        if inspect.isfunction(getattr(torch, name, None)) and getattr(torch, name).__doc__
    }
    return sorted(n for n in names if not n.startswith("_") and hasattr(torch, n))


def documented_methods() -> list[str]:
    root = Path(torch.__file__).parent
    names = set(TENSOR_DOCS.findall((root / "_tensor_docs.py").read_text()))
    names |= {
        name
        for name, value in vars(torch.Tensor).items()
        if (inspect.isfunction(value) or isinstance(value, property)) and value.__doc__
    }
    return sorted(n for n in names if not n.startswith("_") and hasattr(torch.Tensor, n))


def attributes(methods: list[str]) -> list[str]:
    """The Tensor members read without a call (`x.grad`, `x.shape`, `x.T`)."""
    return [name for name in methods if not callable(getattr(torch.Tensor, name))]


def main() -> None:
    methods = documented_methods()
    surface = {
        "torch": torch.__version__,
        "functions": documented_functions(),
        "methods": methods,
        "attributes": attributes(methods),
    }
    json.dump(surface, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
