"""Prints what a container got of the training env, and checks it.

    show_env.py CONTAINER [--present=PATTERNS] [--absent=PATTERNS]

PATTERNS are comma-separated names, `PREFIX_*` matching a prefix. Prints one `E2E-ENV {json}`
line with the container's training-related variables (MASTER_*, WORLD_SIZE, RANK, PET_*, JAX_*)
and exits non-zero if a `--present` pattern matches nothing or an `--absent` one matches anything.
"""

import json
import os
import socket
import sys


def matching(pattern: str) -> list[str]:
    if pattern.endswith("*"):
        return sorted(k for k in os.environ if k.startswith(pattern[:-1]))
    return [pattern] if pattern in os.environ else []


container, checks = sys.argv[1], sys.argv[2:]
shown = {k: v for k, v in os.environ.items()
         if k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK") or k.startswith(("PET_", "JAX_"))}
os.write(1, f"E2E-ENV {json.dumps({'container': container, 'hostname': socket.gethostname(), 'env': shown}, sort_keys=True)}\n".encode())

problems = []
for check in checks:
    kind, _, patterns = check.partition("=")
    for pattern in patterns.split(","):
        found = matching(pattern)
        if kind == "--present" and not found:
            problems.append(f"{pattern} is not set")
        elif kind == "--absent" and found:
            problems.append(f"{', '.join(found)} set")
if problems:
    os.write(2, f"E2E-FAIL {container} on {socket.gethostname()}: {'; '.join(problems)}\n".encode())
    sys.exit(1)
