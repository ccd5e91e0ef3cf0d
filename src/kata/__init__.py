"""kata: a hands-on JAX course for PyTorch users, and the grader that runs it."""

# The one place the version is written; pyproject.toml reads it from here.
__version__ = "0.1.0"


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext kata` in Jupyter or Colab: the `%kata` and `%%kata` magics."""
    from kata.notebook import load_ipython_extension as register

    register(ipython)
