"""`python -m aipcc_build`: the CLI without the console script (tests, benchmarks)."""

from .cli import main

main()
