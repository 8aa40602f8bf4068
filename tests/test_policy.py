"""The policy rules on objects the test kit captured, one passing and one failing stack each, and the
policy pack as pulumi-policy loads and runs it."""

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pulumi_policy as pp
import pytest
import yaml

import trainjobs
from trainjobs import MpiTrainJob, TorchTrainJob
from trainjobs.policy import PACK_DESCRIPTION, RULES, directory, rules, violations
from trainjobs.tools.cli.main import main

REPO = Path(__file__).resolve().parents[1]
GOOD = {"image": "ghcr.io/acme/train:1.4", "namespace": "ml", "num_nodes": 2,
        "resources_per_node": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"memory": "16Gi"}}}
PI = {**GOOD, "image": "mpioperator/mpi-pi:openmpi", "command": ["mpirun", "/home/mpiuser/pi"]}


def torch(name="good", **changes):
    return lambda: TorchTrainJob(name, {**GOOD, **changes})


def objects(stack):
    return [r.manifest for r in stack.kubernetes()]


def found(rule, stack):
    """The rule's messages over every object of a captured stack, run as the pack runs it."""
    from trainjobs.policy import run_rule
    [entry] = [r for r in RULES if r.check is rule]
    everything = objects(stack)
    return [m for obj in everything for m in run_rule(entry, obj, everything)]


def hand_written_job(name="hand", completions=2, subdomain="hand", namespace="ml", resources=None):
    """A Job written without the library: a kit-captured object the library itself would refuse to make."""
    def program():
        k8s.batch.v1.Job(name, metadata={"name": name, "namespace": namespace}, spec={
            "completionMode": "Indexed", "completions": completions, "parallelism": completions,
            "template": {"spec": {
                "subdomain": subdomain, "restartPolicy": "Never",
                "containers": [{"name": "node", "image": "ghcr.io/acme/train:1.4", "resources": resources or {}}]}}})
    return program


def test_a_well_formed_job_passes_every_rule(pulumi_stack):
    assert violations(objects(pulumi_stack(torch()))) == []


def test_requests_and_limits(pulumi_stack):
    assert found(rules.requests_and_limits, pulumi_stack(torch())) == []
    messages = found(rules.requests_and_limits, pulumi_stack(torch(resources_per_node={"limits": {"cpu": "2"}})))
    assert messages == ["Job good-node-0: container node has no requests.memory, limits.memory; set them "
                        "(resources_per_node) so the pods land on nodes that fit them"]


def test_gpu_limit_equals_request(pulumi_stack):
    gpus = {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"}, "limits": {"memory": "64Gi"}}
    stack = pulumi_stack(torch(resources_per_node=gpus))
    assert found(rules.gpu_limit_equals_request, stack) == []
    # The library sets device limits equal to requests; a hand-written Job may not.
    uneven = {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "4"}}
    assert found(rules.gpu_limit_equals_request, pulumi_stack(hand_written_job(resources=uneven))) == [
        "Job hand: container node requests nvidia.com/gpu 8 but limits it to 4; give the same count on both sides (the container's resources)"]


def dra_job(name="dra", resources=None, claims=({"name": "gpus", "resourceClaimTemplateName": "eight-gpus"},),
            used=("gpus",), template=True):
    """A hand-written Job whose pods claim devices, and the ResourceClaimTemplate they claim them from."""
    def program():
        if template:
            k8s.resource.v1.ResourceClaimTemplate("eight-gpus", metadata={"name": "eight-gpus", "namespace": "ml"},
                                                  spec={"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                                                      "deviceClassName": "gpu.nvidia.com", "count": 8}}]}}})
        k8s.batch.v1.Job(name, metadata={"name": name, "namespace": "ml"}, spec={"template": {"spec": {
            "restartPolicy": "Never", "resourceClaims": list(claims),
            "containers": [{"name": "node", "image": "ghcr.io/acme/train:1.4",
                            "resources": {**(resources or {}), "claims": [{"name": c} for c in used]}}]}}})
    return program


def test_device_claims(pulumi_stack):
    # The library's own claims pass every rule, and count as GPUs in the requests the tools show.
    stack = pulumi_stack(torch(devices_per_node=[{"count": 8}]))
    assert violations(objects(stack)) == []
    assert found(rules.device_claims, pulumi_stack(dra_job())) == []
    assert found(rules.device_claims, pulumi_stack(dra_job(template=False, used=()))) == [
        "Job dra: its pods claim devices from ResourceClaimTemplate eight-gpus, which the stack does not create; "
        "without it they are never scheduled",
        "Job dra: no container uses the pod's resource claim gpus, so its devices are allocated and no container "
        "sees them; list it in the main container's resources.claims, or remove it (the pod's resourceClaims)"]
    twice = {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}
    assert found(rules.device_claims, pulumi_stack(dra_job(resources=twice))) == [
        "Job dra: its pods ask for GPUs both as nvidia.com/gpu and through a resource claim; ask one way (the "
        "pod's resourceClaims, or the container's resources)"]


def test_shm(pulumi_stack):
    assert found(rules.shm_large_enough, pulumi_stack(torch())) == []
    assert found(rules.shm_large_enough, pulumi_stack(torch(shm_size="64Mi"))) == [
        "Job good-node-0: container node has a /dev/shm of 64Mi; data loader workers need at least 1Gi: "
        "raise shm_size"]
    assert found(rules.shm_large_enough, pulumi_stack(torch(shm_size="0"))) == [
        "Job good-node-0: container node has no memory-backed /dev/shm, so it gets the runtime's 64Mi; mount an "
        "emptyDir with medium Memory (shm_size, at least 1Gi)"]
    job = objects(pulumi_stack(torch()))[1]
    assert rules.shm_large_enough(job, minimum="2Gi")[0].endswith("need at least 2Gi: raise shm_size")


def test_shm_is_for_training_pods_only(pulumi_stack):
    stack = pulumi_stack(torch(dataset_initializer={"storage_uri": "hf://acme/data", "image": "acme/init:1"},
                               extra_roles={"tensorboard": {"image": "tensorflow/tensorflow:2.16.1"}}))
    assert len(stack.find(kind="Job")) == 3
    assert found(rules.shm_large_enough, stack) == []


@pytest.mark.parametrize("image", ["ghcr.io/acme/train:latest", "ghcr.io/acme/train", "localhost:5000/train"])
def test_pinned_images(pulumi_stack, image):
    assert found(rules.pinned_images, pulumi_stack(torch(image="ghcr.io/acme/train@sha256:" + "a" * 64))) == []
    assert found(rules.pinned_images, pulumi_stack(torch(image="localhost:5000/train:3"))) == []
    [message] = found(rules.pinned_images, pulumi_stack(torch(image=image)))
    assert message.startswith(f"Job good-node-0: container node runs {image!r}, ")
    assert message.endswith("; name a version tag or a digest (image)")


def test_no_secret_literals(pulumi_stack):
    from_secret = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]
    assert found(rules.no_secret_literals, pulumi_stack(torch(env=from_secret))) == []
    assert found(rules.no_secret_literals, pulumi_stack(torch(env={"TOKENIZER": "bpe", "WANDB_PROJECT": "x"}))) == []
    expected = ["Job good-node-0: container node sets {} as a literal value, readable by anyone who can read the "
                "Job; put it in a Secret and use valueFrom.secretKeyRef in env, or env_from"]
    assert found(rules.no_secret_literals, pulumi_stack(torch(env={"WANDB_API_KEY": "abc123"}))) == [
        expected[0].format("WANDB_API_KEY")]
    # A Pulumi secret is still a literal in the Job that anyone with read access sees.
    stack = pulumi_stack(lambda: TorchTrainJob("good", {**GOOD, "env": {"HF_TOKEN": pulumi.Output.secret("hf_x")}}))
    assert found(rules.no_secret_literals, stack) == [expected[0].format("HF_TOKEN")]
    # A credential under an innocent name.
    stack = pulumi_stack(torch(env={"HUB": "hf_" + "a1B2" * 8}))
    assert found(rules.no_secret_literals, stack) == [expected[0].format("HUB")]


def test_headless_service(pulumi_stack):
    assert found(rules.headless_service, pulumi_stack(torch())) == []
    assert found(rules.headless_service, pulumi_stack(hand_written_job(completions=1))) == []
    assert found(rules.headless_service, pulumi_stack(hand_written_job())) == [
        "Job hand: no Service hand in the stack for its pods' subdomain; add a headless Service of that name "
        "selecting them"]
    assert found(rules.headless_service, pulumi_stack(hand_written_job(subdomain=None))) == [
        "Job hand: its pods have no subdomain, so they get no DNS names; set subdomain to the name of a headless "
        "Service that selects them"]


def test_a_jobset_without_the_jobs_service_has_the_one_its_controller_makes(pulumi_stack):
    """A MultiKueue job registers its JobSet alone; the JobSet controller makes the headless Service."""
    stack = pulumi_stack(torch("mk", backend="jobset", multikueue=True, queue="team-llm"))
    assert [o["kind"] for o in objects(stack)] == ["JobSet"]
    assert found(rules.headless_service, stack) == []


def test_headless_service_counts_a_jobs_pods_across_its_jobs(pulumi_stack):
    """One launcher and one worker: two Jobs of one pod each, one job of two pods."""
    stack = pulumi_stack(lambda: MpiTrainJob("pi", PI))
    assert found(rules.headless_service, stack) == []
    everything = [o for o in objects(stack) if o["kind"] != "Service"]
    launcher = next(o for o in everything if o["metadata"]["name"] == "pi-launcher-0")
    assert rules.headless_service(launcher, everything) == [
        "Job pi-launcher-0: no Service pi in the stack for its pods' subdomain; add a headless Service of that "
        "name selecting them"]


def test_gang_scheduling(pulumi_stack):
    queued = {"labels": {rules.KUEUE_QUEUE_LABEL: "team-a"}}
    # One Job queued whole: Kueue admits all its pods at once.
    assert found(rules.gang_scheduled, pulumi_stack(torch(**queued))) == []
    # A Volcano queue with the pods in a PodGroup the stack creates.
    def volcano():
        TorchTrainJob("good", {**GOOD, "pod_annotations": {rules.VOLCANO_QUEUE_ANNOTATION: "q",
                                                            rules.VOLCANO_GROUP_ANNOTATION: "good"}})
        k8s.apiextensions.CustomResource("good-group", api_version="scheduling.volcano.sh/v1beta1", kind="PodGroup",
                                         metadata={"name": "good", "namespace": "ml"},
                                         spec={"minMember": 2, "queue": "q"})
    assert found(rules.gang_scheduled, pulumi_stack(volcano)) == []
    # An MPI job is two Jobs: queued one by one, the launcher can start while the workers wait.
    stack = pulumi_stack(lambda: MpiTrainJob("pi", {**PI, **queued}))
    assert sorted(found(rules.gang_scheduled, stack)) == [
        f"Job {job}: waits in queue team-a with no gang: it is admitted apart from Job {other}, so part of the job "
        "can hold resources while the rest waits; set gang_scheduler (kueue, volcano or coscheduling)"
        for job, other in (("pi-launcher-0", "pi-node-0"), ("pi-node-0", "pi-launcher-0"))]
    # A group annotation naming a PodGroup nobody creates.
    stack = pulumi_stack(torch(pod_annotations={rules.VOLCANO_QUEUE_ANNOTATION: "q",
                                                rules.VOLCANO_GROUP_ANNOTATION: "missing"}))
    assert found(rules.gang_scheduled, stack) == [
        "Job good-node-0: its pods name PodGroup missing, which the stack does not create; without it they are "
        "never scheduled"]


def test_names_fit(pulumi_stack):
    assert found(rules.names_fit, pulumi_stack(torch(name="a" * 49, num_nodes=10))) == []
    assert found(rules.names_fit, pulumi_stack(hand_written_job(name="h" * 62, completions=10))) == [
        f"Job {'h' * 62}: pod hostname {'h' * 62}-9 is 64 characters; the limit is 63 (shorten the job name by 1)"]


def test_namespace(pulumi_stack):
    assert found(rules.not_in_default_namespace, pulumi_stack(torch())) == []
    messages = found(rules.not_in_default_namespace, pulumi_stack(torch(namespace="default")))
    assert messages == [f"{what} is in namespace default; give the job a namespace of its own (namespace argument)"
                        for what in ("Service good", "Job good-node-0")]
    [service, job] = objects(pulumi_stack(torch(namespace=None)))
    assert rules.not_in_default_namespace(job, provider_namespace="ml") == []
    assert rules.not_in_default_namespace(job)[0].startswith("Job good-node-0 has no namespace, so it lands in")


# --- the pack, through pulumi-policy's own API ---------------------------------------------------------

@pytest.fixture
def pack(monkeypatch):
    """policy/__main__.py run as pulumi runs it, its analyzer server stopped as soon as it starts serving;
    the pack's servicer (what the engine talks to) is kept for the test."""
    return served(monkeypatch, REPO / "policy" / "__main__.py")


def served(monkeypatch, main: Path):
    """The servicer of the pack whose entry point is `main`, run as pulumi runs it."""
    import pulumi_policy.policy as policy_module

    servicers = []
    real = policy_module._PolicyAnalyzerServicer

    class Recorded(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            servicers.append(self)

    def stop(_seconds):
        raise KeyboardInterrupt   # PolicyPack's own loop stops its server on this

    monkeypatch.setattr(policy_module, "_PolicyAnalyzerServicer", Recorded)
    monkeypatch.setattr(policy_module.time, "sleep", stop)
    runpy.run_path(str(main), run_name="__main__")
    [servicer] = servicers
    return servicer


def test_the_pack_serves_one_policy_per_rule(pack):
    info = pack.GetAnalyzerInfo(None, None)
    assert info.name == "trainjobs"
    assert [p.name for p in info.policies] == [rule.name for rule in RULES]
    assert {p.enforcementLevel for p in info.policies} == {0}   # advisory: the pack's default
    assert all(p.description for p in info.policies)
    shm = next(p for p in info.policies if p.name == "trainjobs-shm-size")
    assert "minimum" in shm.configSchema.properties


def _policies(pack):
    return {p.name: p for p in pack._PolicyAnalyzerServicer__policies}


def _resource_args(resource, config=None):
    return pp.ResourceValidationArgs(resource.type, resource.inputs, resource.urn, resource.name,
                                     opts=None, provider=None, config=config)


def test_each_resource_policy_reports_what_its_rule_finds(pack, pulumi_stack):
    bad = pulumi_stack(torch(image="acme/train:latest", namespace="default", shm_size="64Mi",
                             env={"DB_PASSWORD": "hunter2"}, resources_per_node={"limits": {"memory": "1Gi"}}))
    good = pulumi_stack(torch())
    policies = _policies(pack)
    for rule in RULES:
        if rule.reads_stack:
            continue
        policy = policies[rule.name]
        assert isinstance(policy, pp.ResourceValidationPolicy)
        for stack in (good, bad):
            for resource in stack.kubernetes():
                reported = []
                policy.validate(_resource_args(resource), lambda message, urn=None: reported.append(message))
                assert reported == rule.check(resource.manifest), (rule.name, resource.name)
    job = bad.get("Job", "good-node-0")
    reported = []
    policies["trainjobs-shm-size"].validate(_resource_args(job, {"minimum": "32Mi"}),
                                            lambda message, urn=None: reported.append(message))
    assert reported == []
    assert any(rules.not_in_default_namespace(r.manifest) for r in bad.kubernetes())
    assert all(rule.check(job.manifest) for rule in RULES if not rule.reads_stack
               and rule.check not in (rules.gpu_limit_equals_request, rules.names_fit))


def test_each_stack_policy_reports_against_the_object_at_fault(pack, pulumi_stack):
    stack = pulumi_stack(lambda: (MpiTrainJob("pi", {**PI, "labels": {rules.KUEUE_QUEUE_LABEL: "team-a"}}),
                                  hand_written_job()()))
    resources = [pp.PolicyResource(r.type, r.inputs, r.urn, r.name, None, None, None, [], {})
                 for r in stack.resources if r.custom]
    policies = _policies(pack)
    reported = {}
    for name in ("trainjobs-headless-service", "trainjobs-gang-scheduling"):
        policy = policies[name]
        assert isinstance(policy, pp.StackValidationPolicy)
        policy.validate(pp.StackValidationArgs(resources),
                        lambda message, urn=None, name=name: reported.setdefault(name, []).append((urn, message)))
    urn = {r.name: r.urn for r in stack.resources}
    assert [u for u, _ in reported["trainjobs-headless-service"]] == [urn["hand"]]
    assert sorted(u for u, _ in reported["trainjobs-gang-scheduling"]) == sorted([urn["pi-launcher-0"],
                                                                                 urn["pi-node-0"]])


@pytest.mark.parametrize("gang, backend", [("kueue", "jobset"), ("volcano", "jobs"), ("volcano", "jobset"),
                                           ("coscheduling", "jobs"), ("coscheduling", "jobset")])
def test_the_librarys_own_gangs_pass_the_gang_rule(pulumi_stack, gang, backend):
    """An MPI job (launcher and workers, which must run at once) with each gang integration and backend."""
    queue = {"queue": "team-a"} if gang != "coscheduling" else {}
    stack = pulumi_stack(lambda: MpiTrainJob("pi", {**PI, "gang_scheduler": gang, "backend": backend, **queue}))
    assert found(rules.gang_scheduled, stack) == []
    # Without the PodGroup its pods name, they would never be scheduled: reported for each of its Jobs.
    if gang != "kueue":
        without = [obj for obj in objects(stack) if obj["kind"] != "PodGroup"]
        assert len(without) < len(objects(stack))
        reported = [m for obj in without for m in rules.gang_scheduled(obj, without)]
        assert reported and all("its pods name PodGroup pi, which the stack does not create" in m for m in reported)


def test_the_packs_readme_lists_every_rule():
    readme = (REPO / "policy" / "README.md").read_text()
    assert [rule.name for rule in RULES if f"| `{rule.name}` |" in readme] == [rule.name for rule in RULES]


def test_the_installed_package_writes_a_pack_that_serves_every_rule(tmp_path, monkeypatch, capsys):
    """`trainjobs policy-pack DIR` needs no checkout: the pack runs the rules of the trainjobs it was written by,
    in the virtualenv that trainjobs is installed in."""
    target = tmp_path / "pack"
    assert main(["policy-pack", str(target)]) == 0
    assert capsys.readouterr().out == (f"wrote the trainjobs policy pack to {target}/ (PulumiPolicy.yaml, __main__.py, "
                                       f"requirements.txt); enable it with:\n  pulumi preview --policy-pack {target}\n")
    assert sorted(p.name for p in target.iterdir()) == ["PulumiPolicy.yaml", "__main__.py", "requirements.txt"]
    settings = yaml.safe_load((target / "PulumiPolicy.yaml").read_text())
    in_virtualenv = sys.prefix != sys.base_prefix
    assert settings == {"description": PACK_DESCRIPTION, "version": trainjobs.__version__,
                        "runtime": {"name": "python", "options": {
                            "toolchain": "pip", "virtualenv": sys.prefix if in_virtualenv else "venv"}}}
    assert (target / "requirements.txt").read_text() == f"trainjobs[policy] @ {REPO.as_uri()}\n"
    info = served(monkeypatch, target / "__main__.py").GetAnalyzerInfo(None, None)
    assert info.name == "trainjobs" and [p.name for p in info.policies] == [rule.name for rule in RULES]

    assert main(["policy-pack", str(target)]) == 0   # rewritten in place
    (target / "notes.txt").write_text("mine")
    assert main(["policy-pack", str(target)]) == 2
    assert capsys.readouterr().err == (f"error: {target} holds other files (notes.txt); give an empty or new "
                                       "directory\n")


def test_outside_a_virtualenv_pip_installs_this_trainjobs_from_the_written_requirements(tmp_path):
    """No package index has trainjobs: the requirement names this checkout, which pip resolves."""
    assert main(["policy-pack", str(tmp_path / "pack")]) == 0
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                    "--ignore-installed", "--quiet", "--disable-pip-version-check", "--report", report,
                    "-r", tmp_path / "pack" / "requirements.txt"], cwd=tmp_path, check=True, timeout=600)
    [install] = json.loads(report.read_text())["install"]
    assert (install["metadata"]["name"], install["metadata"]["version"], install["requested_extras"]) == (
        "trainjobs", trainjobs.__version__, ["policy"])


@pytest.mark.parametrize("origin, written", [
    ({"url": "file:///wheels/trainjobs-0.1.0-py3-none-any.whl", "archive_info": {}},
     "trainjobs[policy] @ file:///wheels/trainjobs-0.1.0-py3-none-any.whl"),
    ({"url": "https://git.example/acme/trainjobs", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
     "trainjobs[policy] @ git+https://git.example/acme/trainjobs@abc123"),
    (None, f"trainjobs[policy]=={trainjobs.__version__}"),   # from a package index
])
def test_an_installed_trainjobs_is_required_from_where_it_came(monkeypatch, tmp_path, origin, written):
    class Installed:
        def read_text(self, name):
            return json.dumps(origin) if name == "direct_url.json" and origin else None

    monkeypatch.setattr(directory, "__file__", str(tmp_path / "site-packages" / "trainjobs" / "policy" / "directory.py"))
    monkeypatch.setattr(directory.importlib.metadata, "distribution", lambda name: Installed())
    assert directory.requirement() == written


def test_the_repositorys_pack_describes_itself_as_the_written_one():
    settings = yaml.safe_load((REPO / "policy" / "PulumiPolicy.yaml").read_text())
    assert settings["description"] == PACK_DESCRIPTION
