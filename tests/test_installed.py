"""The package as a user installs it: built from a clean copy of this repository, installed (not
editable) into a fresh virtualenv outside it, and used from a Pulumi project of the user's that has
a `components` package of its own.

This is what the README's "Using it on a real cluster" asks of a user, not a copy of the in-repo
tests: the wheel must carry every file the package reads (the containers' shell scripts), install
no `components` package, and leave the user's own `components` importable beside `trainjobs`.
The wheel and sdist are built, and installed, with the project's pinned uv (Makefile): a PEP 517 frontend
that builds the sdist in an isolated environment and the wheel from it, as `python -m build` does, and an
installer that takes the wheel's dependencies from its cache (PyPI else) without byte-compiling them all, as
`pip install` would (pulumi_kubernetes alone has thousands of modules): the processes here write the bytecode
of what they import, once (docs/performance.md).
"""

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from docblocks import PAGES, blocks, clean_copy, run_tests

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "components" / "trainjobs"
GUIDE = REPO / "docs" / "testing.md"
# Generous bounds: each is for a step that hangs, not for a slow machine.
BUILD_SECONDS, INSTALL_SECONDS, RUN_SECONDS = 900, 1800, 600
# `make`'s pinned uv (Makefile's UV_VERSION), in the virtualenv that runs the tests.
UV = [sys.executable, "-m", "uv"]

# The user's own package, which Pulumi projects often call `components`.
USER_COMPONENTS = '''\
"""The user's own helpers, unrelated to trainjobs."""

TEAM_LABELS = {"team": "vision", "cost-center": "research"}
'''

# A config-driven program in the shape the testing guide assumes: the project's __main__.py reads `jobs`.
USER_PROGRAM = '''\
import pulumi
import trainjobs
from components import TEAM_LABELS

for job in pulumi.Config().get_object("jobs") or []:
    kind, name = job.pop("kind"), job.pop("name")
    getattr(trainjobs, kind)(name, {**job, "labels": TEAM_LABELS})
'''

ONE_OF_EVERY_FAMILY = [
    {"kind": "TorchTrainJob", "name": "torch", "image": "pytorch/pytorch:2.13.0", "num_nodes": 2,
     "dataset_initializer": {"storage_uri": "hf://datasets/ylecun/mnist"}},
    {"kind": "TorchTuneTrainJob", "name": "tune", "runtime": "torchtune-llama3.2-1b"},
    {"kind": "JaxTrainJob", "name": "jax", "image": "python:3.11", "num_nodes": 2},
    {"kind": "XGBoostTrainJob", "name": "xgb", "image": "python:3.11", "num_nodes": 2},
    {"kind": "MpiTrainJob", "name": "mpi", "image": "mpioperator/mpi-pi:openmpi", "num_nodes": 2,
     "command": ["mpirun", "/home/mpiuser/pi"]},
    {"kind": "DeepSpeedTrainJob", "name": "ds", "num_nodes": 2, "command": ["mpirun", "python", "train.py"]},
    {"kind": "MlxTrainJob", "name": "mlx", "num_nodes": 2, "command": ["mpirun", "python", "train.py"]},
]

# The objects each of those jobs must produce (kind, namespace-less name), as rendered file names.
EXPECTED_FILES = {
    "v1-service-default-torch.yaml", "batch_v1-job-default-torch-node-0.yaml",
    "batch_v1-job-default-torch-dataset-initializer-0.yaml",
    "v1-persistentvolumeclaim-default-torch-initializer.yaml",
    "batch_v1-job-default-tune-node-0.yaml", "batch_v1-job-default-tune-dataset-initializer-0.yaml",
    "batch_v1-job-default-tune-model-initializer-0.yaml",
    "batch_v1-job-default-jax-node-0.yaml", "batch_v1-job-default-xgb-node-0.yaml",
    *{f"{prefix}-default-{job}{suffix}.yaml" for job in ("mpi", "ds", "mlx") for prefix, suffix in (
        ("v1-service", ""), ("v1-secret", "-mpi-ssh-auth"), ("v1-configmap", "-mpi-hostfile"),
        ("batch_v1-job", "-launcher-0"), ("batch_v1-job", "-node-0"))},
}


def run(argv: list, cwd: Path, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def install(venv: Path, *requirements) -> None:
    run([*UV, "pip", "install", "--quiet", "--python", venv / "bin" / "python", *requirements], venv.parent,
        INSTALL_SECONDS)


def user_env(venv: Path) -> dict:
    """A user's shell with the virtualenv activated: nothing of this repository on the import path, and
    bytecode written, so that the first process compiles what it imports and the others read it."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE"}}
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel, sdist, virtualenv, the user's project), built and installed once for the module."""
    root = tmp_path_factory.mktemp("installed")
    source = clean_copy(root / "source")
    run([*UV, "build", "--quiet", "--python", sys.executable, "--out-dir", root / "dist", source], root,
        BUILD_SECONDS)
    [wheel], [sdist] = sorted((root / "dist").glob("*.whl")), sorted((root / "dist").glob("*.tar.gz"))
    venv = root / "venv"
    # A user's virtualenv, with its own pip.
    run([sys.executable, "-m", "venv", venv], root, INSTALL_SECONDS)
    install(venv, wheel, "pytest>=8,<10")

    project = root / "project"
    (project / "components").mkdir(parents=True)
    (project / "components" / "__init__.py").write_text(USER_COMPONENTS)
    (project / "__main__.py").write_text(USER_PROGRAM)
    (project / "Pulumi.yaml").write_text("name: vision-training\nruntime: python\n")
    for stack in ("dev", "prod"):
        (project / f"Pulumi.{stack}.yaml").write_text(
            "config:\n  vision-training:jobs: " + json.dumps(ONE_OF_EVERY_FAMILY) + "\n")
    return wheel, sdist, venv, project


def shell_scripts() -> list[str]:
    return sorted(p.name for p in (PACKAGE / "scripts").glob("*.sh"))


def test_the_wheel_carries_every_file_the_package_reads_and_no_components_package(installed):
    wheel, sdist, venv, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("components/")]
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"trainjobs"}
    data_files = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
                        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts)
    assert shell_scripts() and data_files == [f"scripts/{s}" for s in shell_scripts()]
    for data in data_files:
        assert f"trainjobs/{data}" in names
        assert f"{sdist.name.removesuffix('.tar.gz')}/components/trainjobs/{data}" in tarfile.open(sdist).getnames()
    run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdist], wheel.parent, RUN_SECONDS)

    listed = run([venv / "bin" / "python", "-m", "pip", "show", "-f", "trainjobs"], venv, RUN_SECONDS,
                 user_env(venv)).stdout
    for script in shell_scripts():
        assert f"trainjobs/scripts/{script}" in listed
    site = Path(run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    venv, RUN_SECONDS, user_env(venv)).stdout.strip())
    assert not (site / "components").exists()


def test_the_version_is_the_one_the_package_defines(installed):
    _, _, venv, project = installed
    defined = re.search(r'^__version__ = "([^"]+)"', (PACKAGE / "__init__.py").read_text(), re.M)[1]
    printed = run([venv / "bin" / "trainjobs", "--version"], project, RUN_SECONDS, user_env(venv)).stdout
    assert printed.strip() == f"trainjobs {defined}"
    assert installed[0].name.startswith(f"trainjobs-{defined}-")


def test_render_from_a_project_with_its_own_components_package(installed):
    _, _, venv, project = installed
    out = project / "rendered"
    done = run([venv / "bin" / "trainjobs", "render", "__main__.py", "--stack", "dev", "--out", out], project,
               RUN_SECONDS, user_env(venv))
    written = {p.name for p in out.glob("*.yaml")}
    assert EXPECTED_FILES <= written, sorted(EXPECTED_FILES - written)
    assert "error" not in done.stderr.lower()
    # The scripts were read from the installed package: the MPI launcher waits for its hosts, and a
    # job with an initializer waits for it.
    launcher = (out / "batch_v1-job-default-mpi-launcher-0.yaml").read_text()
    assert "wait-for-hosts" in launcher and "mpi-launcher" in launcher
    torch = (out / "batch_v1-job-default-torch-node-0.yaml").read_text()
    assert "wait-for-initializers" in torch
    # The user's own package supplied the labels.
    assert "team: vision" in (out / "batch_v1-job-default-xgb-node-0.yaml").read_text()


def test_the_documented_tests_pass_in_the_users_project(installed):
    """Every page's `python test` blocks (the testing guide's, the runs recipe, the policy rules in unit
    tests), one module per page, under pytest in the user's project, against the installed package."""
    _, _, venv, project = installed
    tests = project / "tests"
    tests.mkdir(exist_ok=True)
    pages = {page: [b for b in blocks(page) if b.mode == "test"] for page in PAGES}
    pages = {page: found for page, found in pages.items() if found}
    assert GUIDE in pages and len(pages[GUIDE]) >= 2
    for page, found in pages.items():
        name = f"tests/test_{page.parent.name}_{page.stem}.py".replace("-", "_")
        done = run_tests(found, str(venv / "bin" / "python"), project, name, env=user_env(venv))
        assert done.returncode == 0, f"{page.relative_to(REPO)}:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"


def test_the_users_own_package_imports_beside_trainjobs(installed):
    _, _, venv, project = installed
    tests = project / "own"
    tests.mkdir(exist_ok=True)
    (tests / "test_own_package.py").write_text(
        "from components import TEAM_LABELS\nimport trainjobs\n\n\n"
        "def test_both_packages_import_side_by_side():\n"
        "    assert TEAM_LABELS['team'] == 'vision'\n"
        "    assert trainjobs.TorchTrainJob.__module__.startswith('trainjobs.')\n")
    done = run([venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "own"], project,
               RUN_SECONDS, user_env(venv))
    assert re.search(r"\b1 passed\b", done.stdout), done.stdout


def test_the_policy_pack_is_written_from_the_installed_package_and_starts(installed, tmp_path):
    """policy/README.md's way to enable the pack without a checkout: `trainjobs policy-pack DIR` needs the
    `policy` extra, says so without it, and the pack it writes starts serving from the installed package."""
    wheel, _, venv, project = installed
    pack = tmp_path / "pack"
    refused = subprocess.run([venv / "bin" / "trainjobs", "policy-pack", pack], cwd=project, env=user_env(venv),
                             capture_output=True, text=True, timeout=RUN_SECONDS)
    assert (refused.returncode, refused.stderr) == (2, (
        f"error: pulumi-policy is not installed beside trainjobs in {venv}, so the pack could not run; install it "
        "with: pip install 'trainjobs[policy]'\n"))
    assert not pack.exists()
    install(venv, f"{wheel}[policy]")
    run([venv / "bin" / "trainjobs", "policy-pack", pack], project, RUN_SECONDS, user_env(venv))
    assert f"virtualenv: {venv}\n" in (pack / "PulumiPolicy.yaml").read_text()
    # Pulumi starts the pack as `python __main__.py` in that virtualenv; it prints the port it serves on.
    server = subprocess.Popen([venv / "bin" / "python", pack / "__main__.py"], cwd=pack, env=user_env(venv),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip().isdigit(), server.stderr.read() if server.poll() is not None else ""
    finally:
        server.kill()
        server.wait()
