"""`python -m maxcode` is the `maxcode` command."""

from maxcode.cli import main

main()
