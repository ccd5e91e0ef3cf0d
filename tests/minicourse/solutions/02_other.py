"""Other: the reference."""


def answer():
    return 42
