"""`trainjobs policy-pack DIR`: a ready policy pack in DIR, for `pulumi preview --policy-pack DIR`, that runs
the rules of this installed trainjobs, so a user needs no checkout of the repository.

The pack runs in the virtualenv trainjobs is installed in (PulumiPolicy.yaml names it); outside a
virtualenv, Pulumi makes one in DIR/venv from requirements.txt, which names this trainjobs where pip
finds it: its checkout, the wheel or repository it was installed from, or, installed from a package
index, its version there.
"""

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

import yaml

from trainjobs import __version__
from trainjobs.policy import PACK_DESCRIPTION

MAIN = '''"""The trainjobs policy pack, written by `trainjobs policy-pack`. The rules are trainjobs.policy."""

from trainjobs.policy.pack import serve

serve()
'''


class PackError(ValueError):
    """The pack cannot be written, or would not run; nothing was written."""


def pack_files() -> dict[str, str]:
    """The pack's files by name."""
    in_virtualenv = sys.prefix != sys.base_prefix
    settings = {"description": PACK_DESCRIPTION, "version": __version__,
                "runtime": {"name": "python", "options": {"toolchain": "pip",
                                                           "virtualenv": sys.prefix if in_virtualenv else "venv"}}}
    return {"PulumiPolicy.yaml": yaml.safe_dump(settings, sort_keys=False), "__main__.py": MAIN,
            "requirements.txt": f"{requirement()}\n"}


def requirement() -> str:
    """This trainjobs as pip installs it again, with the `policy` extra. No package index has trainjobs unless it
    was installed from one, so a version pin alone is written only then."""
    project = Path(__file__).resolve().parents[3] / "pyproject.toml"   # components/trainjobs/policy/ in a checkout
    if project.is_file() and 'name = "trainjobs"' in project.read_text(errors="replace"):
        return f"trainjobs[policy] @ {project.parent.as_uri()}"   # run from a checkout, installed editable or not
    try:
        origin = importlib.metadata.distribution("trainjobs").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        origin = None
    if origin:   # installed from a wheel, a directory or a repository (PEP 610)
        source = json.loads(origin)
        vcs = source.get("vcs_info")
        url = f"{vcs['vcs']}+{source['url']}@{vcs['commit_id']}" if vcs else source["url"]
        return f"trainjobs[policy] @ {url}"
    return f"trainjobs[policy]=={__version__}"


def write_pack(directory: Path) -> list[str]:
    """Write the pack into `directory` (made if missing; a pack written before is rewritten), and return
    the names of its files. Refuses a directory holding other files, and an environment without
    pulumi-policy, where the pack could not start."""
    if sys.prefix != sys.base_prefix and importlib.util.find_spec("pulumi_policy") is None:
        raise PackError(f"pulumi-policy is not installed beside trainjobs in {sys.prefix}, so the pack could not run; "
                        "install it with: pip install 'trainjobs[policy]'")
    files = pack_files()
    if directory.exists() and not directory.is_dir():
        raise PackError(f"{directory} is a file; give a directory for the pack")
    others = sorted(p.name for p in directory.iterdir() if p.name not in files and p.name != "venv") \
        if directory.exists() else []
    if others:
        raise PackError(f"{directory} holds other files ({', '.join(others)}); give an empty or new directory")
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return list(files)
