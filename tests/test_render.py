"""`trainjobs render` and `explain` on the example stack: golden files, determinism, errors."""

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from trainjobs.tools.cli import render as rendering
from trainjobs.tools.cli.main import main
from trainjobs.tools.cli.render import kubernetes_objects, ranks_text, to_yaml
from trainjobs import MpiTrainJob
from trainjobs.testing import run, run_program

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "stacks" / "__main__.py"
GOLDEN = Path(__file__).parent / "golden"


def render(tmp_path: Path, *extra: str, stack: str = "dev") -> tuple[int, Path]:
    out = tmp_path / "out"
    return main(["render", str(PROGRAM), "--stack", stack, "--out", str(out), *extra]), out


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if not p.name.startswith(".")}


@pytest.mark.parametrize("stack, tree_lines, count", [
    ("dev", ["├─ TorchTrainJob llama-finetune  (requests 32 nvidia.com/gpu, 128 cpu, 1Ti memory)",
             "   └─ Job mnist-ddp-node-0  (2 pods, requests 5 cpu, 8Gi memory)",
             "Stack requests: 32 nvidia.com/gpu, 133 cpu, 1032Gi memory in 6 pods"], 5),
    ("hpc", ["├─ DeepSpeedTrainJob ds-finetune  (requests 8 nvidia.com/gpu)",
             "   ├─ Job pi-launcher-0  (1 pod, requests nothing)", "   ├─ Job pi-node-0  (3 pods, requests nothing)",
             "   └─ PrivateKey pi-ssh-key", "Stack requests: 8 nvidia.com/gpu in 6 pods"], 10),
])
def test_example_stacks_match_golden_files(tmp_path, capsys, stack, tree_lines, count):
    code, out = render(tmp_path, stack=stack)
    assert code == 0
    golden = GOLDEN / stack
    if os.environ.get("TRAINJOBS_UPDATE_GOLDEN"):
        shutil.rmtree(golden, ignore_errors=True)
        shutil.copytree(out, golden, ignore=shutil.ignore_patterns(".*"))
    assert files(out) == files(golden), "rendered YAML changed; review it, then TRAINJOBS_UPDATE_GOLDEN=1 make test"
    printed = capsys.readouterr().out
    for line in tree_lines:
        assert line in printed
    assert f"wrote {count} objects, ranks.txt, tree.txt and summary.md to {out}/" in printed


def test_render_and_explain_generate_no_key_and_show_none(tmp_path, capsys, monkeypatch):
    import trainjobs.tools.engine as kit
    generated = []
    monkeypatch.setattr(kit, "_ssh_key_pair", lambda *a: generated.append(a))
    code, out = render(tmp_path, stack="hpc")
    assert code == 0 and main(["explain", str(PROGRAM), "--stack", "hpc"]) == 0
    printed = capsys.readouterr()
    texts = [p.read_text() for p in out.iterdir() if p.is_file()] + [printed.out, printed.err]
    assert generated == []   # a preview: pulumi-tls makes the key at deploy time
    assert all("PRIVATE KEY" not in text for text in texts)
    assert "ssh-privatekey: '[secret]'" in (out / "v1-secret-default-pi-mpi-ssh-auth.yaml").read_text()


def test_real_keys_of_an_update_never_appear_in_views_or_redacted_objects():
    result = run_program(PROGRAM, stack="hpc", real_keys=True)   # as run-local runs it
    keys = [r.inputs for r in result.find(type="tls:index/privateKey:PrivateKey")]
    secrets = [r.manifest["stringData"]["ssh-privatekey"] for r in result.find(kind="Secret")]
    assert len(keys) == 2 and all("PRIVATE KEY" in key for key in secrets)
    objects = kubernetes_objects(result)
    texts = [ranks_text(objects), *(to_yaml(o) for o in objects)]
    for key in secrets:
        body = key.splitlines()[1]
        assert all(body not in text for text in texts)
    assert all("PRIVATE KEY" not in text for text in texts)


def test_render_is_byte_identical_on_rerun(tmp_path):
    _, out = render(tmp_path, stack="hpc")
    first = files(out)
    _, out = render(tmp_path, stack="hpc")
    assert files(out) == first


def test_render_of_a_two_node_cpu_job_shows_kubeflow_values(tmp_path):
    jobs = ('[{"kind": "TorchTrainJob", "name": "demo", "num_nodes": 2, '
            '"resources_per_node": {"requests": {"cpu": "2.5"}}}]')
    code, out = render(tmp_path, "--config", f"jobs={jobs}")
    assert code == 0
    text = (out / "batch_v1-job-default-demo-node-0.yaml").read_text()
    for line in ["  completions: 2", "  parallelism: 2", "      subdomain: demo",
                 "        - name: PET_NPROC_PER_NODE\n          value: '3'",
                 "        - name: PET_MASTER_ADDR\n          value: demo-node-0-0.demo",
                 "        - name: PET_MASTER_PORT\n          value: '29500'",
                 "        - name: PET_NODE_RANK\n          valueFrom:\n            fieldRef:\n"
                 "              fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']"]:
        assert line in text
    assert sorted(p.name for p in out.iterdir()) == [
        ".trainjobs-render", "batch_v1-job-default-demo-node-0.yaml", "ranks.txt", "summary.md", "tree.txt",
        "v1-service-default-demo.yaml"]


@pytest.mark.parametrize("job, fragment", [
    ('{"kind": "TorchTrainJob", "name": "demo", "env": {"PET_NNODES": "9"}}', "env: must not have reserved envs"),
    ('{"kind": "TorchTrainJob", "name": "' + "x" * 60 + '", "num_nodes": 2}', "name: derived pod hostname"),
    ('{"kind": "TorchTrainJob", "name": "demo", "num_nodes": 0}', "num_nodes: Input should be greater than or equal to 1"),
    ('{"kind": "TorchTrainJob", "name": "demo", "num_node": 2}', 'did you mean "num_nodes"?'),
])
def test_bad_spec_exits_non_zero_with_the_message_and_writes_nothing(tmp_path, capsys, job, fragment):
    code, out = render(tmp_path, "--config", f"jobs=[{job}]")
    assert code == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert "Traceback" not in err
    assert not out.exists()


def test_render_refuses_to_clear_a_foreign_directory(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    assert main(["render", str(PROGRAM), "--out", str(out)]) == 2
    assert (out / "mine.txt").read_text() == "keep"
    assert "was not written by `trainjobs render`" in capsys.readouterr().err


def test_explain_prints_each_pods_env_with_its_rank(capsys):
    assert main(["explain", str(PROGRAM), "--job", "mnist-ddp"]) == 0
    text = capsys.readouterr().out
    for index in (0, 1):
        assert f"pod mnist-ddp-node-0-{index}  (Job mnist-ddp-node-0, index {index})" in text
        assert f"dns: mnist-ddp-node-0-{index}.mnist-ddp  mnist-ddp-node-0-{index}.mnist-ddp.default.svc.cluster.local" in text
    assert text.count("PET_NODE_RANK=0   <- fieldRef") == 1
    assert text.count("PET_NODE_RANK=1   <- fieldRef") == 1
    assert text.count("PET_MASTER_ADDR=mnist-ddp-node-0-0.mnist-ddp") == 2
    assert "llama-finetune" not in text


def test_explain_unknown_job(capsys):
    assert main(["explain", str(PROGRAM), "--job", "nope"]) == 2
    assert "no job or Job 'nope'" in capsys.readouterr().err


def test_explain_marks_mpi_hosts_and_shows_hostfile_and_launcher_env(capsys):
    assert main(["explain", str(PROGRAM), "--stack", "hpc", "--job", "pi"]) == 0
    text = capsys.readouterr().out
    for i in range(3):
        assert f"  host: pi-node-0-{i}.pi slots=2   <- /etc/mpi/hostfile in Job pi-launcher-0\n" in text
    assert text.startswith("file ConfigMap pi-mpi-hostfile key hostfile, mounted at /etc/mpi/hostfile in Job pi-launcher-0:\n"
                           "  | pi-node-0-0.pi slots=2\n  | pi-node-0-1.pi slots=2\n  | pi-node-0-2.pi slots=2\n\n")
    launcher = text[text.index("pod pi-launcher-0-0"):text.index("pod pi-node-0-0")]
    assert "host:" not in launcher   # the launcher is not an MPI host here
    assert "OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile" in launcher
    assert "PRTE_MCA_prte_default_hostfile=/etc/mpi/hostfile" in launcher
    assert "  file /etc/mpi/hostfile (mode 0444) = ConfigMap pi-mpi-hostfile key hostfile, shown above\n" in launcher
    assert "  file /root/.ssh/id_rsa (mode 0600) = Secret pi-mpi-ssh-auth key ssh-privatekey: [secret]\n" in launcher
    assert "ds-finetune" not in text


def test_explain_shows_each_shipped_file_and_script_once(capsys):
    assert main(["explain", str(PROGRAM)]) == 0
    text = capsys.readouterr().out
    assert text.count("  | STEPS = int(os.environ.get(\"TRAIN_STEPS\", \"20\"))\n") == 1
    assert text.startswith("file ConfigMap mnist-ddp-code key train.py, mounted at /workspace/train.py in Job "
                           "mnist-ddp-node-0:\n  | \"\"\"Data-parallel training")
    assert text.count("  file /workspace/train.py (mode 0644) = ConfigMap mnist-ddp-code key train.py, shown above\n") == 2

    assert main(["explain", str(PROGRAM), "--stack", "hpc"]) == 0
    text = capsys.readouterr().out
    assert text.count('echo "all MPI hosts reachable"') == 1
    assert "script 1, run by init container wait-for-hosts in Jobs ds-finetune-launcher-0, pi-launcher-0:\n" in text
    assert text.count("    run: /bin/sh -c <script 1> wait-for-hosts /var/run/trainjobs 300 ") == 2
    assert text.count("    run: /bin/sh -c <script 3> mpi-node /var/run/trainjobs /usr/sbin/sshd -De") == 4   # 1 + 3 MPI workers


def test_rerender_says_which_changes_restart_training(tmp_path, capsys):
    jobs = '[{"kind": "TorchTrainJob", "name": "demo", "num_nodes": 2, "labels": {"team": "a"}}]'
    assert render(tmp_path, "--config", f"jobs={jobs}")[0] == 0
    assert "changes since" not in capsys.readouterr().out     # nothing to compare with yet

    assert render(tmp_path, "--config", f"jobs={jobs}")[0] == 0
    assert "changes since the previous render in" in (out := capsys.readouterr().out) and "\n  none\n" in out

    relabeled = jobs.replace('"team": "a"', '"team": "b"')
    assert render(tmp_path, "--config", f"jobs={relabeled}")[0] == 0
    out = capsys.readouterr().out
    assert "~ Service demo: updated in place (metadata.labels.team)" in out
    assert "! Job demo-node-0: replaced, TRAINING RESTARTS (" in out   # pod template labels changed too

    bigger = relabeled.replace('"num_nodes": 2', '"num_nodes": 3')
    assert render(tmp_path, "--config", f"jobs={bigger}")[0] == 0
    out = capsys.readouterr().out
    assert ("! Job demo-node-0: replaced, TRAINING RESTARTS (spec.completions, spec.parallelism, "
            "spec.template.spec.containers[0].env[0].value)") in out
    assert "~ Service demo" not in out

    other = bigger.replace('"name": "demo"', '"name": "other"')
    assert render(tmp_path, "--config", f"jobs={other}")[0] == 0
    out = capsys.readouterr().out
    assert "- Job demo-node-0: deleted (its training stops)" in out
    assert "+ Job other-node-0: created" in out


CHANGES_SECTION = """## Changes since the previous render

Objects: 2 deleted, 1 replaced.

**Training restarts** for job `a`: its pods are replaced, and training starts again from the beginning.

**Training stops** for job `b`: its pods are deleted.

The change leaves the GPUs requested as they were (0).

```text
! Job a-node-0: replaced, TRAINING RESTARTS (spec.completions, spec.parallelism, spec.template.spec.containers[0].env[0].value)
- Job b-node-0: deleted (its training stops)
- Service b: deleted
```

"""


def test_a_rerender_writes_only_what_changed_and_removes_what_went_away(tmp_path):
    import os
    two = '[{"kind": "TorchTrainJob", "name": "a", "num_nodes": 2}, {"kind": "TorchTrainJob", "name": "b"}]'
    assert render(tmp_path, "--config", f"jobs={two}")[0] == 0
    out = tmp_path / "out"
    first = files(out)
    for path in out.iterdir():   # an old time on every file: a rewrite shows as a new one
        os.utime(path, ns=(1, 1))

    assert render(tmp_path, "--config", f"jobs={two}")[0] == 0
    assert files(out) == first and all(path.stat().st_mtime_ns == 1 for path in out.iterdir())

    one_bigger = '[{"kind": "TorchTrainJob", "name": "a", "num_nodes": 3}]'
    assert render(tmp_path, "--config", f"jobs={one_bigger}")[0] == 0
    rewritten = sorted(path.name for path in out.iterdir() if path.stat().st_mtime_ns != 1)
    assert rewritten == ["batch_v1-job-default-a-node-0.yaml", "ranks.txt", "summary.md", "tree.txt"]
    assert sorted(files(out)) == ["batch_v1-job-default-a-node-0.yaml", "ranks.txt", "summary.md", "tree.txt",
                                  "v1-service-default-a.yaml"]
    fresh = tmp_path / "fresh"
    assert main(["render", str(PROGRAM), "--stack", "dev", "--out", str(fresh), "--config",
                 f"jobs={one_bigger}"]) == 0
    rendered, anew = files(out), files(fresh)
    # The same bytes as rendering into an empty directory, but for what the summary says the change does.
    assert {k: v for k, v in rendered.items() if k != "summary.md"} == {k: v for k, v in anew.items()
                                                                         if k != "summary.md"}
    head, tail = anew["summary.md"].decode().split("Each diagram", 1)
    assert rendered["summary.md"].decode() == head + CHANGES_SECTION + "Each diagram" + tail


def test_changes_only_touching_job_metadata_do_not_restart_training():
    from trainjobs.tools.cli.render import changes
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": {"a": "1"}},
           "spec": {"completions": 1, "activeDeadlineSeconds": 10, "template": {"spec": {}}}}
    updated = {**job, "metadata": {"name": "j", "annotations": {"a": "2"}},
               "spec": {**job["spec"], "activeDeadlineSeconds": 20}}
    assert changes([job], [updated]) == [
        "~ Job j: updated in place (metadata.annotations.a, spec.activeDeadlineSeconds)"]


def test_a_job_taking_the_name_of_a_deleted_jobsets_job_is_said_to_fail():
    """From backend "jobset" to "jobs": Pulumi creates the Jobs before it deletes the JobSet, whose controller
    holds Jobs of the same names until then (tests/cluster/test_changes.py shows the real engine fail)."""
    from trainjobs.tools.cli.render import changes

    def objects(backend):
        return [o for o in kubernetes_objects(run(lambda: MpiTrainJob("m", {
            "image": "mpi:1", "command": ["mpirun", "hostname"], "num_nodes": 2, "backend": backend})))
            if o["kind"] in ("Job", "JobSet")]

    conflict = ("FAILS: JobSet m's controller holds a Job of this name until Pulumi deletes the JobSet, after creating "
                "this one; change the job's run too, or remove the job in one update and add it back in the next")
    assert changes(objects("jobset"), objects("jobs")) == [
        f"+ Job m-launcher-0: created, {conflict}", f"+ Job m-node-0: created, {conflict}",
        "- JobSet m: deleted (its training stops)"]
    # The other way the JobSet's controller waits for the Jobs to go, then makes its own.
    assert changes(objects("jobs"), objects("jobset")) == [
        "- Job m-launcher-0: deleted (its training stops)", "- Job m-node-0: deleted (its training stops)",
        "+ JobSet m: created"]


libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="libyaml is not installed")


@libyaml
@pytest.mark.parametrize("stack", ["dev", "hpc"])
def test_libyaml_and_pure_python_yaml_give_the_same_bytes_on_the_example_stacks(stack):
    assert issubclass(rendering.DUMPER, yaml.CSafeDumper) and rendering.LOADER is yaml.CSafeLoader
    for obj in rendering.kubernetes_objects(run_program(PROGRAM, stack=stack)):
        text = rendering.to_yaml(obj)
        assert rendering.to_yaml(obj, rendering.PythonDumper) == text
        assert yaml.load(text, Loader=rendering.LOADER) == yaml.load(text, Loader=yaml.SafeLoader) == obj


@libyaml
@pytest.mark.parametrize("value", [
    "\x85next line", "emoji \U0001F600", "a\u2028b", "\ufeffbom", "tab\tand\nnewline", "\x1b[31m",
    "long " * 30 + "\nsecond",          # double-quoted (space before a break) and folded
    "kept trailing breaks\n\n", "\n", "\r\n", "", "x" * 128, "x" * 129, "\u00e9" * 64, "\u00e9" * 65,
])
def test_pure_python_yaml_writes_what_libyaml_writes_where_they_differ_by_default(value):
    obj = {"k": value, "list": [value, {"deep": [value]}], value: {value: value}, "zz": "after the rest"}
    text = rendering.to_yaml(obj)
    assert rendering.to_yaml(obj, rendering.PythonDumper) == text
    assert yaml.load(text, Loader=yaml.SafeLoader) == obj


def test_kueue_example_jobset_resized_restarts_training_and_explain_finds_its_pods(tmp_path, capsys):
    """The Kueue example's allreduce job runs as one JobSet: a new num_nodes replaces it (training restarts),
    and `explain --job` finds its pods by the job's name or by a role's Job."""
    assert render(tmp_path, stack="kueue")[0] == 0
    jobs = yaml.safe_load((ROOT / "Pulumi.kueue.yaml").read_text())["config"]["trainjobs-examples:jobs"]
    [allreduce] = [job for job in jobs if job["name"] == "allreduce"]
    assert allreduce["backend"] == "jobset" and allreduce["num_nodes"] == 3
    allreduce["num_nodes"] = 4
    capsys.readouterr()
    assert render(tmp_path, "--config", f"jobs={json.dumps(jobs)}", stack="kueue")[0] == 0
    changed = capsys.readouterr().out.split("changes since the previous render in", 1)[1].splitlines()[1:]
    assert changed == [
        "  ~ ConfigMap allreduce-mpi-hostfile: replaced (data.hostfile)",
        "  ! JobSet allreduce: replaced, TRAINING RESTARTS (spec.replicatedJobs[0].template.spec.completions, "
        "spec.replicatedJobs[0].template.spec.parallelism)"]

    assert main(["explain", str(PROGRAM), "--stack", "kueue", "--job", "allreduce"]) == 0
    pods = [line for line in capsys.readouterr().out.splitlines() if line.startswith("pod ")]
    assert pods == [f"pod allreduce-node-0-{i}  (Job allreduce-node-0, index {i})" for i in range(3)] + [
        "pod allreduce-launcher-0-0  (Job allreduce-launcher-0, index 0)"]
    assert main(["explain", str(PROGRAM), "--stack", "kueue", "--job", "allreduce-launcher-0"]) == 0
    pods = [line for line in capsys.readouterr().out.splitlines() if line.startswith("pod ")]
    assert pods == ["pod allreduce-launcher-0-0  (Job allreduce-launcher-0, index 0)"]
