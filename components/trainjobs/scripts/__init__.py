"""The shell scripts the library's containers run (`/bin/sh -c <script> <name> <arguments>`), kept as
files of their own so they can be read, linted and tested as shell."""

from functools import cache
from importlib.resources import files

# Scripts that run the MPI launcher's fan-out over the hostfile's hosts get fan-out.sh's functions first.
USES_FAN_OUT = {"mpi-launcher", "wait-for-hosts"}


@cache
def script(name: str) -> str:
    """The script `<name>.sh` without its leading comment lines (they document the file, not the pod),
    preceded by the functions it uses."""
    lines = files(__package__).joinpath(f"{name}.sh").read_text().splitlines()
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    text = "\n".join(lines).strip()
    return f"{script('fan-out')}\n{text}" if name in USES_FAN_OUT else text
