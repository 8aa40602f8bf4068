"""`python -m trainjobs.tools.cli`: the `trainjobs` command."""

from trainjobs.tools.cli.main import entry

entry()
