"""kata: a hands-on JAX course for PyTorch users, and the grader that runs it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kata")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
