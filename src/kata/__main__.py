"""`python -m kata` runs the command line, as the `kata` script does."""

from kata.cli import main

main()
