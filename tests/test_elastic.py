"""Elastic torch jobs: a node range renders torchrun's MIN:MAX and its restarts on a Job made for MAX;
under Kueue the Job opts into partial admission or workload slices; every other combination is refused
naming the argument (the corpus, tests/corpus/elastic.yaml, feeds the refusals three ways)."""

import pytest

from trainjobs import TorchTrainJob, TorchTrainJobArgs, TrainJobError, XGBoostTrainJob
from trainjobs.core.args import parse_args
from trainjobs.pipeline.pipeline import derive
from trainjobs.testing import run
from trainjobs.tools.cli.main import main

ELASTIC = {"num_nodes": "2:4", "rendezvous": "c10d"}
KUEUE = {"gang_scheduler": "kueue", "queue": "team"}


def plan(args, component=TorchTrainJob, name="train"):
    return derive(component.family, name, parse_args(component.__name__, name, component.family.args_type, args))


def job_of(args):
    (job,) = [m for m in plan(args).manifests if m["kind"] == "Job"]
    return job


def env_of(job):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def problems(args, component=TorchTrainJob):
    with pytest.raises(TrainJobError) as caught:
        plan(args, component)
    return {issue.field: issue.message for issue in caught.value.issues}


def test_a_node_range_renders_torchruns_min_max_on_a_job_made_for_the_most_pods():
    job = job_of(ELASTIC)
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["completionMode"]) == (4, 4, "Indexed")
    env = env_of(job)
    assert {k: v for k, v in env.items() if k.startswith("PET_")} == {
        "PET_NNODES": "2:4", "PET_NPROC_PER_NODE": "1", "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": "train-node-0-0.train:29500", "PET_RDZV_ID": "train", "PET_MAX_RESTARTS": "7",
        "PET_RDZV_CONF": "last_call_timeout=30"}   # torchrun's default, shown: each resize idles that long
    assert "PET_NODE_RANK" not in env
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"   # a pod that joins a later round finds its store
    # The Job says the most pods; the fewest, for every tool that counts them:
    assert job["metadata"]["annotations"] == {"pulumi.com/waitFor": "jsonpath={.metadata.uid}", "trainjobs.io/min-pods": "2"}


def test_the_same_range_in_every_shape_renders_the_same_job():
    typed = TorchTrainJobArgs(num_nodes=4, min_nodes=2, rendezvous="c10d")
    assert (typed.num_nodes, typed.min_nodes) == (4, 2)
    assert TorchTrainJobArgs(num_nodes="2:4", rendezvous="c10d") == typed
    assert job_of(typed) == job_of({"num_nodes": 4, "min_nodes": 2, "rendezvous": "c10d"}) == job_of(ELASTIC)


@pytest.mark.parametrize("low, high, restarts", [(1, 2, "5"), (2, 4, "7"), (4, 16, "27")])
def test_torchrun_restarts_are_sized_for_the_pods_the_job_may_lose(low, high, restarts):
    assert env_of(job_of({"num_nodes": f"{low}:{high}", "rendezvous": "c10d"}))["PET_MAX_RESTARTS"] == restarts


def test_the_jobs_own_torchrun_restarts_win():
    env = env_of(job_of({**ELASTIC, "env": {"PET_MAX_RESTARTS": "50"}}))
    assert env["PET_MAX_RESTARTS"] == "50"


def test_the_jobs_own_rendezvous_configuration_wins():
    env = env_of(job_of({**ELASTIC, "env": {"PET_RDZV_CONF": "last_call_timeout=10,join_timeout=900"}}))
    assert env["PET_RDZV_CONF"] == "last_call_timeout=10,join_timeout=900"


def test_the_store_of_each_round_is_derived_for_c10d_only_and_reserved():
    # A fixed-size c10d job's replaced pod joins a later round as a grown job's new pod does.
    assert env_of(job_of({"num_nodes": 2, "rendezvous": "c10d"}))["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in env_of(job_of({"num_nodes": 2}))
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in env_of(job_of({"num_nodes": 2, "torchrun": False}))
    assert problems({**ELASTIC, "env": {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"}}) == {"env": (
        "must not have reserved envs, invalid envs configured: [TORCH_DISABLE_SHARE_RDZV_TCP_STORE]. "
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE comes from rendezvous c10d (1: each rendezvous round gives the workers "
        "a store of its own, which pods that join later find)")}


def test_a_fixed_size_job_is_unchanged():
    env = env_of(job_of({"num_nodes": 4, "rendezvous": "c10d"}))
    assert env["PET_NNODES"] == "4" and "PET_MAX_RESTARTS" not in env and "PET_RDZV_CONF" not in env


def test_under_kueue_the_job_is_admitted_in_part_by_default():
    job = job_of({**ELASTIC, **KUEUE})
    assert job["metadata"]["annotations"] == {
        "pulumi.com/waitFor": "jsonpath={.metadata.uid}", "kueue.x-k8s.io/job-min-parallelism": "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true", "trainjobs.io/min-pods": "2"}
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"
    # Kueue marks the Job, not its pods.
    assert not any(k.startswith("kueue.") for k in job["spec"]["template"]["metadata"].get("annotations", {}))
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 4


def test_under_kueue_slices_make_an_elastic_job():
    job = job_of({**ELASTIC, **KUEUE, "elastic_admission": "slices"})
    assert {k: v for k, v in job["metadata"]["annotations"].items() if k.startswith("kueue.")} == {
        "kueue.x-k8s.io/elastic-job": "true"}


def test_pulumi_leaves_the_sizes_kueue_or_a_resize_change_alone():
    assert plan({**ELASTIC, **KUEUE}).ignore_changes == (
        ("train-node-0", ("spec.suspend", "spec.parallelism", "spec.completions")),)
    assert plan({"num_nodes": 4, "rendezvous": "c10d", **KUEUE}).ignore_changes == (
        ("train-node-0", ("spec.suspend",)),)
    stack = run(lambda: TorchTrainJob("train", {**ELASTIC, **KUEUE, "elastic_admission": "slices"}))
    assert stack.get(kind="Job", name="train-node-0").ignore_changes == (
        "spec.suspend", "spec.parallelism", "spec.completions")


def test_on_a_jobset_kueue_admits_a_range_whole():
    (jobset,) = [m for m in plan({**ELASTIC, **KUEUE, "backend": "jobset"}).manifests if m["kind"] == "JobSet"]
    annotations = [jobset["metadata"].get("annotations", {})] + [
        r["template"]["metadata"].get("annotations", {}) for r in jobset["spec"]["replicatedJobs"]]
    assert not any(k.startswith("kueue.x-k8s.io/") for a in annotations for k in a)
    assert plan({**ELASTIC, "backend": "jobset"}).manifests   # without Kueue too


@pytest.mark.parametrize("mode, verb", [("partial", "admits part of"), ("slices", "resizes")])
def test_kueue_refuses_both_modes_on_a_jobset(mode, verb):
    assert problems({**ELASTIC, **KUEUE, "backend": "jobset", "elastic_admission": mode}) == {
        "elastic_admission": f'Kueue {verb} a batch Job only, not a JobSet (backend "jobset"): set backend "jobs", '
                             "or remove elastic_admission (Kueue then admits the job whole)"}


def test_partial_admission_and_an_elastic_job_together_are_refused():
    found = problems({**ELASTIC, **KUEUE, "annotations": {"kueue.x-k8s.io/elastic-job": "true"}})
    assert found == {"annotations.kueue.x-k8s.io/elastic-job": (
        "is how the job opts into Kueue's partial admission or elastic Jobs, which follows from num_nodes and "
        'elastic_admission: give num_nodes a range (e.g. "2:4") and set elastic_admission, and remove this '
        "annotation")}


def test_elastic_admission_needs_a_range_and_kueue():
    assert problems({"num_nodes": 4, "rendezvous": "c10d", **KUEUE, "elastic_admission": "slices"}) == {
        "elastic_admission": 'applies to an elastic job: give num_nodes a range (e.g. "2:4") or min_nodes, or '
                             "remove elastic_admission"}
    assert problems({**ELASTIC, "elastic_admission": "slices"}) == {
        "elastic_admission": "is how Kueue admits an elastic job, and no gang scheduler reads it: set "
                             "gang_scheduler, or remove elastic_admission"}


def test_a_range_is_refused_with_the_static_rendezvous_torchrun_false_and_other_families():
    assert problems({"num_nodes": "2:4"}) == {"num_nodes": (
        "a node range (2:4) makes the job elastic, and TorchTrainJob cannot be: the static rendezvous fixes "
        "PET_NNODES and each pod's rank: set rendezvous: c10d, whose rendezvous admits pods joining and leaving, "
        "or give num_nodes as a number")}
    assert problems({"num_nodes": "2:4", "torchrun": False})["num_nodes"].endswith(
        "with torchrun: false each process gets a fixed RANK and WORLD_SIZE: set torchrun: true and rendezvous: "
        "c10d, or give num_nodes as a number")
    assert problems({"num_nodes": "2:4"}, XGBoostTrainJob) == {"num_nodes": (
        "a node range (2:4) makes the job elastic, and XGBoostTrainJob cannot be: the family fixes the number "
        "of processes and each one's rank when the job starts")}


@pytest.mark.parametrize("args, field, message", [
    ({"num_nodes": "4:2"}, "num_nodes",
     '"4:2" is not a node range MIN:MAX with MIN < MAX (e.g. "2:4"); for a fixed size give a number'),
    ({"num_nodes": 4, "min_nodes": 4}, "min_nodes",
     "4 is not below num_nodes 4: a node range MIN:MAX has MIN < MAX; for a fixed size give num_nodes alone"),
    ({"num_nodes": "2:4", "min_nodes": 3}, "min_nodes",
     'num_nodes "2:4" already gives the fewest nodes: remove min_nodes, or give num_nodes as a number'),
    ({"num_nodes": "2-4"}, "num_nodes",
     '"2-4" is neither a number of nodes nor a node range MIN:MAX (e.g. "2:4": 2 to 4 nodes)'),
    ({"num_nodes": "yes"}, "num_nodes",
     '"yes" is neither a number of nodes nor a node range MIN:MAX (e.g. "2:4": 2 to 4 nodes)'),
    ({"num_nodes": "0:4"}, "num_nodes", '"0:4" starts at 0 nodes: a node range MIN:MAX has MIN at least 1 (e.g. "1:4")'),
])
def test_a_range_must_be_a_range(args, field, message):
    with pytest.raises(TrainJobError) as caught:
        TorchTrainJobArgs(rendezvous="c10d", **args)
    assert [(i.field, i.message) for i in caught.value.issues] == [(field, message)]


def test_a_number_in_a_string_is_still_a_number():
    assert TorchTrainJobArgs(num_nodes=" 3 ").num_nodes == 3


def test_explain_shows_the_range_and_no_fixed_rank(tmp_path, capsys):
    program = tmp_path / "__main__.py"
    program.write_text("from trainjobs import TorchTrainJob\n"
                       f"TorchTrainJob('ela', {{**{ELASTIC!r}, 'image': 'img:1', 'command': ['torchrun', 't.py']}})\n")
    (tmp_path / "Pulumi.yaml").write_text("name: ela\nruntime: python\n")
    assert main(["explain", str(program), "--job", "ela"]) == 0
    out = capsys.readouterr().out
    assert out.count("PET_NNODES=2:4") == 4 and "PET_NODE_RANK" not in out
    assert out.count("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1") == 4
    assert "pod ela-node-0-3  (Job ela-node-0, index 3)" in out
    assert "Job ela-node-0: 2–4 pods, each requests nothing; in all nothing" in out


@pytest.mark.parametrize("backend", ["jobs", "jobset"])
def test_the_tree_and_the_summary_count_a_range_of_pods(tmp_path, backend):
    program = tmp_path / "__main__.py"
    program.write_text("from trainjobs import TorchTrainJob\n"
                       f"TorchTrainJob('ela', {{**{ELASTIC!r}, 'backend': {backend!r}, 'image': 'img:1'}})\n"
                       "TorchTrainJob('fixed', {'num_nodes': 3, 'image': 'img:1'})\n")
    (tmp_path / "Pulumi.yaml").write_text("name: ela\nruntime: python\n")
    assert main(["render", str(program), "--stack", "dev", "--out", str(tmp_path / "out")]) == 0
    tree = (tmp_path / "out" / "tree.txt").read_text().splitlines()
    holder = "Job ela-node-0  (2–4 pods" if backend == "jobs" else "JobSet ela  (ela-node-0: 2–4 pods"
    assert [line for line in tree if "pods" in line and "ela" in line][0].split("─ ", 1)[1].startswith(holder)
    assert any("Job fixed-node-0  (3 pods, " in line for line in tree)
    assert tree[-1] == "Stack requests: nothing in 5–7 pods"
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "2 jobs: 5–7 pods." in summary and "\n2–4 pods\n" in summary and "\n3 pods\n" in summary
