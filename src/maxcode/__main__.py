"""`python -m maxcode` is the `maxcode` command."""

from maxcode.cli import app

app(prog_name="maxcode")
