"""The shell scripts the library's containers run (`/bin/sh -c <script> <name> <arguments>`), kept as
files of their own so they can be read, linted and tested as shell."""

from functools import cache
from importlib.resources import files


@cache
def script(name: str) -> str:
    """The script `<name>.sh` without its leading comment lines (they document the file, not the pod)."""
    lines = files(__package__).joinpath(f"{name}.sh").read_text().splitlines()
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "\n".join(lines).strip()
