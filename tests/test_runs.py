"""The run argument: a run's objects, names and labels, what a change of run does, and its limits
(docs/runs.md; its recipe is also run by the docs test)."""

import pytest

from trainjobs import MpiTrainJob, TorchTrainJob, TrainJobError
from trainjobs.testing import run
from trainjobs.tools.cli.main import main

MNIST = {"image": "pytorch/pytorch:2.13.0", "num_nodes": 2}


def test_a_run_names_every_object_dns_name_and_key_after_name_and_run():
    stack = run(lambda: MpiTrainJob("pi", {"image": "mpioperator/mpi-pi:openmpi", "num_nodes": 2, "run": "lr-3e4",
                                           "command": ["mpirun", "/home/mpiuser/pi"]}))
    assert sorted((r.type.rsplit(":", 1)[-1], r.name) for r in stack.resources) == [
        ("ConfigMap", "pi-lr-3e4-mpi-hostfile"), ("Job", "pi-lr-3e4-launcher-0"), ("Job", "pi-lr-3e4-node-0"),
        ("MpiTrainJob", "pi-lr-3e4"), ("PrivateKey", "pi-lr-3e4-ssh-key"), ("Secret", "pi-lr-3e4-mpi-ssh-auth"),
        ("Service", "pi-lr-3e4")]
    for resource in stack.kubernetes():
        labels = resource.manifest["metadata"]["labels"]
        assert labels["trainjobs.io/run"] == "lr-3e4" and labels["trainjobs.io/job-name"] == "pi-lr-3e4"
    hostfile = stack.get("ConfigMap", "pi-lr-3e4-mpi-hostfile").manifest["data"]["hostfile"]
    assert hostfile == "pi-lr-3e4-node-0-0.pi-lr-3e4 slots=1\npi-lr-3e4-node-0-1.pi-lr-3e4 slots=1\n"
    pod = stack.get("Job", "pi-lr-3e4-node-0").manifest["spec"]["template"]
    assert pod["metadata"]["labels"]["trainjobs.io/run"] == "lr-3e4" and pod["spec"]["subdomain"] == "pi-lr-3e4"


def test_without_a_run_nothing_changes():
    stack = run(lambda: TorchTrainJob("mnist", MNIST))
    assert sorted(r.name for r in stack.resources) == ["mnist", "mnist", "mnist-node-0"]
    assert "trainjobs.io/run" not in stack.get("Job", "mnist-node-0").manifest["metadata"]["labels"]


@pytest.mark.parametrize("value", ["Run2", "2_b", "-2", "2-", "", "a.b"])
def test_a_run_that_cannot_be_part_of_a_name_is_refused(value):
    with pytest.raises(TrainJobError) as caught:
        TorchTrainJob("mnist", {**MNIST, "run": value})
    assert "run:" in str(caught.value) and "cannot be part of the job's object names" in str(caught.value)


def test_a_run_that_makes_a_hostname_too_long_is_refused_with_the_longest_name():
    with pytest.raises(TrainJobError) as caught:
        run(lambda: TorchTrainJob("m" * 50, {**MNIST, "num_nodes": 10, "run": "2026-11-25"}))
    assert f"{'m' * 50}-2026-11-25-node-0-9" in str(caught.value)


def test_the_user_cannot_set_the_run_label():
    with pytest.raises(TrainJobError) as caught:
        TorchTrainJob("mnist", {**MNIST, "labels": {"trainjobs.io/run": "7"}})
    assert "labels.trainjobs.io/run" in str(caught.value)


def test_two_runs_of_one_job_stand_side_by_side_and_one_run_twice_is_refused():
    stack = run(lambda: (TorchTrainJob("mnist", {**MNIST, "run": "1"}), TorchTrainJob("mnist", {**MNIST, "run": "2"})))
    assert {r.name for r in stack.find(kind="Job")} == {"mnist-1-node-0", "mnist-2-node-0"}
    with pytest.raises(TrainJobError, match="another job is already named"):
        run(lambda: (TorchTrainJob("mnist", {**MNIST, "run": "1"}), TorchTrainJob("mnist", {**MNIST, "run": "1"})))


def test_a_rerender_with_the_next_run_says_which_run_it_replaces(tmp_path, capsys):
    out = tmp_path / "out"
    program = str(__import__("pathlib").Path(__file__).resolve().parents[1] / "stacks" / "__main__.py")

    def render(*runs):
        jobs = ", ".join(f'{{kind: TorchTrainJob, name: mnist, image: "pytorch/pytorch:2.13.0", run: "{r}"}}'
                         for r in runs)
        assert main(["render", program, "--stack", "dev", "--out", str(out), "--config", f"jobs=[{jobs}]"]) == 0
        return capsys.readouterr().out.split("changes since the previous render", 1)[-1]

    render("1")
    assert "  + job mnist: run 2 starts beside run 1, left as it is\n" in render("1", "2")
    printed = render("3")
    assert "  ! job mnist: run 3 replaces runs 1, 2, deleted with its objects (a run still training stops)\n" in printed
    assert "  - Job mnist-1-node-0: deleted (its training stops)\n" in printed
    assert "  - job mnist: run 3 deleted with its objects (a run still training stops)\n" in render()
