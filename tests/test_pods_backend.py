"""A backend defined only in the tests (tests/pods_backend.py: every pod a bare Pod) plugs in through the
backends' registry, and every tool handles its objects with no change to the package: the command's
render (tree, files, change list, summary) and explain, the policy rules, and the pods' env and hostfile,
the same as under the built-in backends.
"""

from pathlib import Path

import pytest
import yaml

from trainjobs import backends
from trainjobs.policy import violations
from trainjobs.tools.cli.main import main

from pods_backend import NAME, PodsBackend

PROGRAM = Path(__file__).resolve().parents[1] / "stacks" / "__main__.py"
RESOURCES = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}
TORCH = {"kind": "TorchTrainJob", "name": "t", "image": "pytorch/pytorch:2.13.0", "num_nodes": 2,
         "command": ["torchrun", "train.py"], "namespace": "ml", "resources_per_node": RESOURCES}
MPI = {"kind": "MpiTrainJob", "name": "pi", "image": "mpioperator/mpi-pi:openmpi", "num_nodes": 2,
       "command": ["mpirun", "/home/mpiuser/pi"], "namespace": "ml", "resources_per_node": RESOURCES,
       "runtime": {"name": "mpi-distributed", "launcher": {"resources": RESOURCES}}}


@pytest.fixture(autouse=True)
def pods_backend():
    backends.register(NAME, PodsBackend())
    yield
    backends.unregister(NAME)


def render(capsys, out: Path, *jobs: dict) -> tuple[int, str, str]:
    config = "jobs=" + yaml.safe_dump([{**job, "backend": NAME} for job in jobs])
    code = main(["render", str(PROGRAM), "--stack", "pods", "--config", config, "--out", str(out)])
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def objects(out: Path) -> list[dict]:
    return [yaml.safe_load(f.read_text()) for f in sorted(out.glob("*.yaml"))]


def test_render_writes_a_pod_per_pod_with_the_env_and_hostfile_of_any_backend(capsys, tmp_path):
    code, printed, err = render(capsys, tmp_path, TORCH, MPI)
    assert (code, err) == (0, "")
    found = objects(tmp_path)
    pods = {o["metadata"]["name"]: o for o in found if o["kind"] == "Pod"}
    assert sorted(pods) == ["pi-launcher-0-0", "pi-node-0-0", "pi-node-0-1", "t-node-0-0", "t-node-0-1"]
    assert not [o for o in found if o["kind"] == "Job"]
    assert pods["t-node-0-1"]["spec"]["hostname"] == "t-node-0-1" and pods["t-node-0-1"]["spec"]["subdomain"] == "t"
    tree = (tmp_path / "tree.txt").read_text()
    assert "└─ Pod t-node-0-1  (1 pod, requests 2 cpu, 4Gi memory)" in tree
    assert tree.splitlines()[-1] == "Stack requests: 10 cpu, 20Gi memory in 5 pods"
    assert tree in printed


def test_explain_resolves_each_pods_env_from_its_own_index(capsys, tmp_path):
    render(capsys, tmp_path, TORCH, MPI)
    assert main(["explain", str(PROGRAM), "--stack", "pods", "--job", "t", "--config",
                 "jobs=" + yaml.safe_dump([{**TORCH, "backend": NAME}])]) == 0
    text = capsys.readouterr().out
    for index in (0, 1):
        block = text[text.index(f"\npod t-node-0-{index}  (Pod t-node-0-{index})\n"):].split("\n\n")[0]
        assert f"    PET_NODE_RANK={index}   <- fieldRef metadata.annotations['batch.kubernetes.io/job-completion-index']" \
            in block.splitlines()
    assert text.startswith("Pod t-node-0-0: 1 pod, each requests 2 cpu, 4Gi memory; in all 2 cpu, 4Gi memory")
    assert "PET_MASTER_ADDR=t-node-0-0.t" in text and "PET_NNODES=2" in text
    hostfile = (tmp_path / "ranks.txt").read_text()
    assert "pi-node-0-0.pi slots=1" in hostfile and "pi-node-0-1.pi slots=1" in hostfile


def test_the_summary_and_the_policy_rules_read_the_pods(capsys, tmp_path):
    render(capsys, tmp_path, TORCH, MPI)
    summary = (tmp_path / "summary.md").read_text()
    assert "2 jobs: 5 pods · CPU 10 · memory 20Gi." in summary
    assert '["Pod t-node-0-0<br/>1 pod"]' in summary
    assert violations(objects(tmp_path)) == []


def test_the_change_list_flags_a_replaced_pod_as_a_restart(capsys, tmp_path):
    render(capsys, tmp_path, TORCH)
    code, printed, _ = render(capsys, tmp_path, {**TORCH, "num_nodes": 3, "image": "pytorch/pytorch:2.13.1"})
    assert code == 0
    changed = printed[printed.index("changes since the previous render"):].splitlines()[1:]
    assert "  + Pod t-node-0-2: created" in changed
    assert any(line.startswith("  ! Pod t-node-0-0: replaced, TRAINING RESTARTS (") for line in changed)
