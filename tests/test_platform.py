"""The platform example (stacks/platform): jobs composed with a namespace, a service account, a secret and an
image from another stack, all arriving as Outputs."""

import os
import shutil
from pathlib import Path

import pytest

import trainjobs

from trainjobs.tools.cli.main import main
from trainjobs.testing import attempt, run_program

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "stacks" / "platform"
GOLDEN = ROOT / "tests" / "golden" / "platform"
IMAGE = "ghcr.io/acme/llm-trainer@sha256:" + "ab" * 32
STACK_OUTPUT = f"acme/images/prod:trainerImage={IMAGE}"


def files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir()) if not p.name.startswith(".")}


def test_the_platform_render_matches_its_golden_files(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["render", str(PROGRAM), "--stack", "prod", "--out", str(out), "--stack-output", STACK_OUTPUT]) == 0
    printed = capsys.readouterr().out
    if os.environ.get("TRAINJOBS_UPDATE_GOLDEN"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        shutil.copytree(out, GOLDEN, ignore=shutil.ignore_patterns(".*"))
    assert files(out) == files(GOLDEN), "rendered YAML changed; review it, then TRAINJOBS_UPDATE_GOLDEN=1 make test"
    every = "".join(files(out).values()) + printed
    assert "v1:Jw8rB3mT0fQ0ZzB3" not in every and "<encrypted" not in every
    assert files(out)["ranks.txt"].count("HF_TOKEN=[secret]") == 5   # 4 pretrain pods, the initializer (envFrom)
    assert f"image: {IMAGE}" in files(out)["batch_v1-job-llm-pretrain-node-0.yaml"]
    tree = files(out)["tree.txt"]   # what each object is created after, outside its own component
    assert "└─ TrainingNamespace llm  (requests nothing)" not in tree and "└─ TrainingNamespace llm\n" in tree
    assert "Job pretrain-node-0  (4 pods, requests 32 nvidia.com/gpu)  after Namespace llm, ServiceAccount trainer" in tree
    assert ("Job finetune-dataset-initializer-0  (1 pod, requests nothing)  after Namespace llm, Secret hf-token"
            in tree)
    assert tree.endswith("Stack requests: 42 nvidia.com/gpu in 9 pods\n")   # 4 x 8 + 2 x 4 + 2 x 1
    assert "TorchTrainJob pretrain  (requests 32 nvidia.com/gpu)" in printed
    assert ("Job pretrain-node-0: 4 pods, each requests 8 nvidia.com/gpu; in all 32 nvidia.com/gpu"
            in files(out)["ranks.txt"])


def test_each_job_object_depends_on_what_it_uses():
    stack = run_program(PROGRAM, stack="prod", preview=True,
                        stack_outputs={"acme/images/prod": {"trainerImage": IMAGE}})
    namespace, account = stack.get("Namespace", "llm"), stack.get("ServiceAccount", "trainer")
    token = stack.get("Secret", "hf-token")
    for obj in stack.kubernetes():
        if obj.kind not in ("Namespace",):
            assert obj.manifest["metadata"]["namespace"] == "llm"
            assert namespace.urn in obj.dependencies, f"{obj.kind} {obj.name} does not depend on the Namespace"
    for job in ("pretrain-node-0", "finetune-node-0", "evaluate-node-0"):
        assert account.urn in stack.get("Job", job).dependencies
    initializer = stack.get("Job", "finetune-dataset-initializer-0")
    assert token.urn in initializer.dependencies
    pod = initializer.manifest["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["envFrom"] == [{"secretRef": {"name": "hf-token"}}]


def test_without_the_other_stacks_output_the_image_is_unknown_and_nothing_is_hidden(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["render", str(PROGRAM), "--stack", "prod", "--out", str(out)]) == 0
    job = (out / "batch_v1-job-llm-pretrain-node-0.yaml").read_text()
    assert "image: '[unknown]'" in job and "PET_NNODES" in job
    assert len([p for p in out.iterdir() if p.suffix == ".yaml"]) == 12


@pytest.mark.parametrize("args, field", [
    ({"service_account_name": "Bad_SA"}, "service_account_name"),
    ({"image_pull_secrets": ["registry", "Bad One"]}, "image_pull_secrets[1]"),
    ({"local_queue_name": "Team Q"}, "local_queue_name"),
    ({"local_queue_name": "Team Q", "kueue_cluster_queue": "gpus"}, "local_queue_name"),
])
def test_a_bad_name_of_an_object_in_the_namespace_is_refused_on_its_argument(args, field):
    """Not on `namespace`, where the objects' own check would put it: the name is the argument's."""
    error, result = attempt(lambda: trainjobs.TrainingNamespace("team", {"namespace": "team-a", **args}))
    assert [issue.field for issue in error.issues] == [field] and result.resources == []
