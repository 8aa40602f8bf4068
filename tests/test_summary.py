"""The render's summary.md: one Mermaid diagram per job, with its objects, their order, pods and totals,
drawn by Mermaid itself (mermaid-cli in headless Chromium, installed by scripts/install-mermaid), so a
diagram a Markdown viewer would refuse fails here."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from trainjobs import MpiTrainJob, TorchTrainJob
from trainjobs.testing import run
from trainjobs.tools.cli.main import main
from trainjobs.tools.cli.summary import SUMMARY_FILE, summary

REPO = Path(__file__).resolve().parents[1]
MERMAID = REPO / "scripts" / "mermaid"
MMDC = MERMAID / "node_modules" / ".bin" / "mmdc"
CHROMIUM = Path("/usr/bin/chromium")
# A bound for a hung browser, not for a slow machine.
DRAW_SECONDS = 600
EXAMPLES = [("stacks/__main__.py", "dev", 2), ("stacks/__main__.py", "hpc", 2), ("stacks/__main__.py", "kueue", 3),
            ("stacks/__main__.py", "volcano", 3),
            ("stacks/platform/__main__.py", "prod", 4)]   # three jobs and the TrainingNamespace


def blocks(markdown: str) -> list[str]:
    return re.findall(r"^```mermaid\n(.*?)^```", markdown, re.M | re.S)


def test_a_job_is_its_objects_in_creation_order_with_pods_and_totals():
    stack = run(lambda: TorchTrainJob("llm", {
        "image": "ghcr.io/acme/train:1", "num_nodes": 4,
        "resources_per_node": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": "8"}},
        "dataset_initializer": {"storage_uri": "hf://acme/data", "image": "acme/init:1",
                                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}}))
    text = summary(stack)
    assert text.splitlines()[:3] == ["# Stack test-test", "", "1 job: 5 pods · 32 GPUs · CPU 33 · memory 258Gi."]
    assert text.split("## TorchTrainJob llm\n\n", 1)[1] == (
        "5 pods · 32 GPUs · CPU 33 · memory 258Gi\n\n"
        "```mermaid\n"
        "flowchart LR\n"
        "  classDef outside stroke-dasharray: 4 3\n"
        '  subgraph job["llm"]\n'
        '    o0["Service llm"]\n'
        '    o1["Job llm-dataset-initializer-0<br/>1 pod"]\n'
        '    o2["Job llm-node-0<br/>4 pods"]\n'
        '    o3["PersistentVolumeClaim llm-initializer"]\n'
        "  end\n"
        "  o0 --> o1\n"
        "  o3 --> o1\n"
        "  o1 --> o2\n"
        "```\n")


def test_objects_from_outside_the_job_are_drawn_dashed_and_totals_only_when_requested():
    import pulumi_kubernetes as k8s

    def program():
        ns = k8s.core.v1.Namespace("team", metadata={"name": "ml"})
        MpiTrainJob("pi", {"image": "mpioperator/mpi-pi:openmpi", "command": ["mpirun", "/home/mpiuser/pi"],
                           "num_nodes": 2, "namespace": ns.metadata.name})

    text = summary(run(program))
    assert "1 job: 3 pods." in text   # no pod requests anything: no totals
    [diagram] = blocks(text)
    assert '  o6["Namespace ml"]:::outside\n' in diagram
    assert '    o5["PrivateKey pi-ssh-key"]\n' in diagram and '    o4["Job pi-node-0<br/>2 pods"]\n' in diagram
    # The Namespace before every namespaced object; the key pair before its Secret; each Job after the
    # Secret, the hostfile and the Service (and so after the Namespace, which needs no arrow of its own).
    edges = set(re.findall(r"^  (o\d) --> (o\d)$", diagram, re.M))
    assert edges == {("o5", "o0"), ("o6", "o0"), ("o6", "o1"), ("o6", "o2"),
                     *{(before, job) for job in ("o3", "o4") for before in ("o0", "o1", "o2")}}


def test_render_writes_the_summary_beside_the_objects(tmp_path):
    out = tmp_path / "out"
    assert main(["render", str(REPO / "stacks/__main__.py"), "--stack", "hpc", "--out", str(out)]) == 0
    text = (out / SUMMARY_FILE).read_text()
    assert [h for h in text.splitlines() if h.startswith("## ")] == ["## DeepSpeedTrainJob ds-finetune",
                                                                     "## MpiTrainJob pi"]
    assert len(blocks(text)) == 2


# --- drawn by Mermaid ---------------------------------------------------------------------------------

def mermaid_available() -> None:
    """Skip where Mermaid cannot run, saying why; under CI=true that is a failure instead."""
    missing = [str(p) for p in (MMDC, CHROMIUM) if not p.exists()]
    if missing:
        reason = f"Mermaid cannot run here: missing {', '.join(missing)} (scripts/install-mermaid installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def draw(markdown: Path, out: Path) -> subprocess.CompletedProcess:
    """Every Mermaid block of `markdown` drawn as an SVG file beside `out`, as mermaid-cli does for Markdown."""
    return subprocess.run([str(MMDC), "--quiet", "--puppeteerConfigFile", str(MERMAID / "puppeteer.json"),
                           "--input", str(markdown), "--output", str(out)],
                          capture_output=True, text=True, timeout=DRAW_SECONDS)


@pytest.mark.parametrize("program, stack, jobs", EXAMPLES, ids=[f"{p}:{s}" for p, s, _ in EXAMPLES])
def test_every_diagram_of_the_example_stacks_is_drawn_by_mermaid(tmp_path, program, stack, jobs):
    mermaid_available()
    out = tmp_path / "rendered"
    assert main(["render", str(REPO / program), "--stack", stack, "--out", str(out)]) == 0
    text = (out / SUMMARY_FILE).read_text()
    assert len(blocks(text)) == jobs
    done = draw(out / SUMMARY_FILE, tmp_path / "drawn.md")
    assert done.returncode == 0, done.stderr[-4000:]
    drawn = sorted(tmp_path.glob("drawn-*.svg"))
    assert len(drawn) == jobs
    # Each picture holds its job's objects, by the names the diagram gave them.
    for diagram, svg in zip(blocks(text), sorted(drawn, key=lambda p: int(p.stem.rsplit("-", 1)[1]))):
        picture = svg.read_text()
        for label in re.findall(r'\["([^"<]+)', diagram):
            assert label in picture, (label, svg.name)
    assert (tmp_path / "drawn.md").read_text().count("![diagram](./drawn-") == jobs


def test_the_readme_draws_the_summary_with_the_command_it_gives(tmp_path):
    mermaid_available()
    [command] = [line for line in (REPO / "README.md").read_text().splitlines() if line.startswith(
        "scripts/mermaid/node_modules/.bin/mmdc ")]
    rendered = tmp_path / "rendered" / "dev"
    assert main(["render", str(REPO / "stacks" / "__main__.py"), "--stack", "dev", "--out", str(rendered)]) == 0
    done = subprocess.run(command.replace("rendered/dev/", f"{rendered}/").split(), cwd=REPO, capture_output=True,
                          text=True, timeout=DRAW_SECONDS)
    assert done.returncode == 0, done.stderr[-4000:]
    assert len(list(rendered.glob("drawn-*.svg"))) == 2


def test_a_diagram_mermaid_refuses_fails_the_check(tmp_path):
    mermaid_available()
    good = summary(run(lambda: TorchTrainJob("llm", {"image": "ghcr.io/acme/train:1", "num_nodes": 2})))
    broken = good.replace('o0["Service llm"]', 'o0["Service llm]')
    assert broken != good
    (tmp_path / "broken.md").write_text(broken)
    done = draw(tmp_path / "broken.md", tmp_path / "drawn.md")
    assert done.returncode != 0
    assert "Parse error" in done.stderr or "Error" in done.stderr


def _rerendered_summary(tmp_path: Path, backend: str) -> str:
    """summary.md of a render of one MPI job of 3 hosts x 4 GPUs, over a render of the same job with 2."""
    def render(nodes: int) -> None:
        job = {"kind": "MpiTrainJob", "name": "allreduce", "backend": backend, "image": "mpi:1",
               "command": ["mpirun", "allreduce"], "num_nodes": nodes,
               "resources_per_node": {"limits": {"nvidia.com/gpu": 4, "cpu": "16", "memory": "64Gi"}}}
        assert main(["render", str(REPO / "stacks" / "__main__.py"), "--out", str(tmp_path / "out"),
                     "--config", f"jobs=[{json.dumps(job)}]"]) == 0
    render(2)
    render(3)
    return (tmp_path / "out" / SUMMARY_FILE).read_text()


CHANGED = {
    "jobset": """\
Objects: 2 replaced.

**Training restarts** for job `allreduce`: its pods are replaced, and training starts again from the beginning.

The change adds 4 GPUs (8 before, 12 after).

```text
~ ConfigMap allreduce-mpi-hostfile: replaced (data.hostfile)
! JobSet allreduce: replaced, TRAINING RESTARTS (spec.replicatedJobs[0].template.spec.completions, \
spec.replicatedJobs[0].template.spec.parallelism)
```
""",
    "jobs": """\
Objects: 2 replaced.

**Training restarts** for job `allreduce`: its pods are replaced, and training starts again from the beginning.

The change adds 4 GPUs (8 before, 12 after).

```text
~ ConfigMap allreduce-mpi-hostfile: replaced (data.hostfile)
! Job allreduce-node-0: replaced, TRAINING RESTARTS (spec.completions, spec.parallelism)
```
""",
}


@pytest.mark.parametrize("backend", sorted(CHANGED))
def test_a_rerender_summary_says_what_the_change_replaces_restarts_and_costs(tmp_path, capsys, backend):
    """A reviewer reads in summary.md what the terminal's change list says, with the jobs that restart and
    the GPUs the change adds, whichever backend runs the job."""
    text = _rerendered_summary(tmp_path, backend)
    section = text.split("## Changes since the previous render\n\n", 1)[1].split("\nEach diagram", 1)[0]
    assert section == CHANGED[backend]
    printed = capsys.readouterr().out.split("changes since the previous render in", 1)[1]
    assert [line.strip() for line in printed.splitlines()[1:] if line.strip()] == \
        section.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()


def test_a_rerender_that_adds_or_removes_a_job_says_which_starts_or_stops_and_the_gpus(tmp_path):
    job = {"kind": "TorchTrainJob", "name": "pretrain", "image": "t:1", "num_nodes": 2,
           "resources_per_node": {"limits": {"nvidia.com/gpu": 8}}}
    out = tmp_path / "out"
    program = str(REPO / "stacks" / "__main__.py")

    def render(jobs: list) -> str:
        assert main(["render", program, "--out", str(out), "--config", f"jobs={json.dumps(jobs)}"]) == 0
        section = (out / SUMMARY_FILE).read_text().split("## Changes since the previous render\n\n", 1)[1]
        return section.split("\nEach diagram", 1)[0]

    assert main(["render", program, "--out", str(out), "--config", f"jobs={json.dumps([job])}"]) == 0
    assert render([job, {**job, "name": "probe", "num_nodes": 1}]) == """\
Objects: 2 created.

Training starts for job `probe`.

The change adds 8 GPUs (16 before, 24 after).

```text
+ Job probe-node-0: created
+ Service probe: created
```
"""
    assert render([job]) == """\
Objects: 2 deleted.

**Training stops** for job `probe`: its pods are deleted.

The change frees 8 GPUs (24 before, 16 after).

```text
- Job probe-node-0: deleted (its training stops)
- Service probe: deleted
```
"""
