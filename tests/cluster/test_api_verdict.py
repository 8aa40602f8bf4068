"""The real API server's verdict is the rule: every object the project's API rules (trainjobs.kube.apivalidation)
judge also goes to a Kubernetes API server as a server-side dry run, and the two verdicts must agree.

The objects: the hand-made ones of tests/test_apivalidation.py; every family on both backends under every gang
scheduler and placement, the JobSet shapes, a PlatformProfile and a TrainingNamespace (tests/test_crd_schemas.py's
cases); the example stacks; every entry of the bad and hostile corpus (tests/corpus) that reaches the API rules;
and the arguments tests/test_properties.py generates, with a fixed seed. For a render, the objects are what the
rules judge (each backend object replaced by the Jobs its controller creates) and what is sent besides (the
JobSets and custom resources); for a refused input, what the rules judged when they refused it, but the custom
resources (tests/crd_schemas.py judges those).

Agreement, per object: the project's rules refuse it exactly when the server refuses it or, for a Job, one of
the pods the Job controller would create from it (its first and last); and when both refuse, a path the
project names is one the server names (the server may name a map where the project names its key, and leaves
out some parts of a path). A check the project makes on purpose beyond the server (a `later` problem:
docs/api-rules.md) is left out of the comparison, and each such check is shown to be one the server lets through.

    KUBECONFIG=... pytest tests/cluster/test_api_verdict.py -s     # -s prints the counts
"""

import copy
import json
import os
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import trainjobs
from trainjobs.backends import controller_jobs
from trainjobs.backends.copies import EXCLUSIVE_TOPOLOGY, NODE_SELECTOR_STRATEGY
from trainjobs.kube import apivalidation
from trainjobs.kube.apivalidation import Problem, format_path
from trainjobs.testing import attempt, run, run_program

from apiserver import ApiServer, Parts, Verdict, is_dns_label, pods_of, unavailable

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "stacks" / "__main__.py"
PLATFORM = ROOT / "stacks" / "platform" / "__main__.py"
PROPERTY_EXAMPLES = 120


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    config = os.environ.get("KUBECONFIG")
    if not config or not Path(config).is_file():
        unavailable("KUBECONFIG names no kubeconfig file (scripts/engine/cluster.sh up prints one)")
    api = ApiServer(Path(config))
    problem = api.ready()
    if problem:
        api.close()
        unavailable(problem)
    yield api
    api.close()


# --- what the project's rules judge ---------------------------------------------------------------

@dataclass
class Judged:
    """One object and the project's verdict on it: its problems (none: accepted)."""

    source: str
    obj: dict[str, Any]
    problems: list[Problem]
    # The project refused the input as a whole (not by these rules): a controller's admission webhook refusing the
    # object agrees with it (Kueue's refuses what trainjobs.scheduling.kueue refuses, on the controllers cluster).
    input_refused: bool = False


def _plain(value: Any) -> Any:
    """The object as the server gets it: a value known only at deploy time (a generated key) as a string."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else "deploy-time-value"


def _known_shape(obj: dict[str, Any]) -> bool:
    """False for an object whose whole data is known only at deploy time (the Secret of a user's SSH key that
    arrives as an Output, or is refused before it is read): neither the rules nor the server can judge its keys."""
    return all(isinstance(obj.get(field, {}), dict) for field in ("data", "stringData"))


def judged(source: str, objects: list[dict[str, Any]]) -> list[Judged]:
    return [Judged(source, obj, apivalidation.problems([obj])) for obj in objects]


def rendered(source: str, program: Callable[[], Any]) -> list[Judged]:
    """An accepted render: what the rules judge and the objects that stand for them (JobSets), all accepted."""
    manifests = [r.manifest for r in run(program).kubernetes()]
    running = controller_jobs(manifests)
    return judged(source, [*running, *[m for m in manifests if m not in running]])


def refused_or_rendered(source: str, program: Callable[[], Any]) -> list[Judged]:
    """What the rules judged while a program ran, accepted or refused (every call of the rules is recorded)."""
    seen: list[dict[str, Any]] = []
    real = apivalidation.problems

    def recording(manifests):
        manifests = list(manifests)
        seen.extend(manifests)
        return real(manifests)

    apivalidation.problems = recording
    try:
        error, result = attempt(program)
    finally:
        apivalidation.problems = real
    if error is None:
        manifests = [r.manifest for r in result.kubernetes()]
        seen.extend(m for m in manifests if m not in seen)
    else:   # the rules judge Kubernetes' own kinds; a refused custom resource is tests/crd_schemas.py's to judge
        seen = [m for m in seen if not _is_custom_resource(m)]
    return [replace(case, input_refused=error is not None)
            for case in judged(source, [_plain(m) for m in seen if _known_shape(m)])]


def _is_custom_resource(obj: dict[str, Any]) -> bool:
    group = obj.get("apiVersion", "").rpartition("/")[0]
    return "." in group and not group.endswith(".k8s.io")


def handmade() -> list[Judged]:
    import test_apivalidation as unit
    cases = judged("test_apivalidation job()", [unit.job()])
    for i, (change, path, _) in enumerate(unit.RULES):
        manifest = unit.job()
        change(manifest)
        cases += judged(f"test_apivalidation RULES[{i}] {path}", [manifest])
    for i, change in enumerate(unit.ACCEPTED):
        manifest = unit.job()
        change(manifest)
        cases += judged(f"test_apivalidation ACCEPTED[{i}]", [manifest])
    cases += judged("test_apivalidation accepted_objects", unit.accepted_objects())
    return cases + judged("test_apivalidation objects_of_every_kind", unit.objects_of_every_kind())


def families() -> list[Judged]:
    import test_crd_schemas as crd
    cases = []
    for family in crd.FAMILIES:
        component = getattr(trainjobs, family)
        for backend in ("jobs", "jobset"):
            for scheduler in crd.SCHEDULERS:
                args = crd.job_args(family, backend, scheduler)
                cases += rendered(f"{family} {backend} {scheduler}", lambda: component("job", args))
            for scheduler, placement in crd.PLACEMENTS.items():
                args = {**crd.job_args(family, backend, scheduler), "placement": placement}
                mpi = family in ("MpiTrainJob", "DeepSpeedTrainJob", "MlxTrainJob")
                if mpi and (scheduler, backend) in ((None, "jobset"), ("kueue", "jobs")):
                    args.update(crd.ONE_MPI_HOST)
                if mpi and scheduler == "kueue" and not args.get("run_launcher_as_node"):
                    args["placement"] = {"topology": "example.com/block"}
                if scheduler == "kueue":
                    args = crd.kueue_placeable(family, args)
                cases += rendered(f"{family} {backend} {scheduler} placed", lambda: component("job", args))
    for variant, (family, variant_args) in sorted(crd.VARIANTS.items()):
        for scheduler in crd.SCHEDULERS:
            args = {**variant_args, **crd.SCHEDULERS[scheduler], "backend": "jobset", "gang_scheduler": scheduler,
                    "failure_policy": {"max_restarts": 1, "fatal_exit_codes": [2, 3]}}
            cases += rendered(f"{variant} {scheduler}", lambda: getattr(trainjobs, family)("job", args))
    for backend in ("jobs", "jobset"):
        for scheduler in ("kueue", "volcano", "coscheduling"):
            cases += rendered(f"PlatformProfile {backend} {scheduler}", lambda: _profile_jobs(scheduler, backend))
    return cases + rendered("TrainingNamespace", _training_namespace)


def _profile_jobs(scheduler: str, backend: str) -> None:
    profile = trainjobs.PlatformProfile(namespace="ml", gang_scheduler=scheduler, backend=backend,
                                        labels={"team": "llm"}, failure_policy={"fatal_exit_codes": [2]},
                                        **({"queue": "team-llm"} if scheduler != "coscheduling" else {}))
    trainjobs.TorchTrainJob("pretrain", {"profile": profile, "image": "t:1", "num_nodes": 4})
    one_host = {"num_nodes": 1, "run_launcher_as_node": True} if (scheduler, backend) == ("kueue", "jobs") else {}
    trainjobs.MpiTrainJob("allreduce", {"profile": profile, "image": "mpi:1", "command": ["mpirun", "hostname"],
                                        "num_nodes": 2, **one_host})


def _training_namespace() -> None:
    team = trainjobs.TrainingNamespace("llm", {"kueue_cluster_queue": "gpus", "local_queue_name": "team-llm",
                                               "checkpoints_size": "1Ti", "labels": {"team": "llm"}})
    profile = team.profile(backend="jobset")
    trainjobs.MpiTrainJob("allreduce", {"profile": profile, "image": "mpi:1", "command": ["mpirun", "hostname"],
                                        "num_nodes": 3})
    trainjobs.TorchTrainJob("pretrain", {"profile": profile, "image": "t:1", "num_nodes": 2})


def stacks() -> list[Judged]:
    cases = []
    for stack in ("dev", "hpc", "kueue", "volcano"):
        manifests = [r.manifest for r in run_program(PROGRAM, stack=stack).kubernetes()]
        running = controller_jobs(manifests)
        cases += judged(f"stack {stack}", [*running, *[m for m in manifests if m not in running]])
    platform = run_program(PLATFORM, stack="prod", preview=True,
                           stack_outputs={"acme/images/prod": {"trainerImage": "registry.example.com/trainer:1"}})
    manifests = [_plain(r.manifest) for r in platform.kubernetes()]
    running = controller_jobs(manifests)
    return cases + judged("stack platform prod", [*running, *[m for m in manifests if m not in running]])


def corpus() -> list[Judged]:
    import test_corpus
    cases = []
    for entry in test_corpus.ENTRIES:
        component = getattr(trainjobs, entry["family"])
        spec = copy.deepcopy(entry["spec"])
        cases += refused_or_rendered(f"corpus {entry['id']}",
                                     lambda: component(entry.get("name", "demo"), copy.deepcopy(spec)))
    return cases


def properties() -> list[Judged]:
    from hypothesis import HealthCheck, Phase, given, settings

    import test_properties

    drawn = []

    @settings(max_examples=PROPERTY_EXAMPLES, derandomize=True, database=None, phases=[Phase.generate],
              deadline=None, suppress_health_check=list(HealthCheck))
    @given(name=test_properties.names, args=test_properties.job_args)
    def draw(name, args):
        drawn.append((name, args))

    draw()
    cases = []
    for i, (name, args) in enumerate(drawn):
        cases += refused_or_rendered(f"properties[{i}] {name!r}",
                                     lambda: trainjobs.TorchTrainJob(name, copy.deepcopy(args)))
    return cases


SOURCES = {"handmade": handmade, "families": families, "stacks": stacks, "corpus": corpus, "properties": properties}


# --- the server's verdict and the comparison ------------------------------------------------------

def _key(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


def _pod_path(parts: Parts) -> Parts:
    """A pod's field as the field of the Job template it comes from."""
    if parts[:1] == ("spec",):
        return ("spec", "template", *parts)
    if parts[:2] in (("metadata", "labels"), ("metadata", "annotations")):
        return ("spec", "template", *parts)
    return parts


def server_verdict(api: ApiServer, obj: dict[str, Any]) -> Verdict:
    """The server's verdict on an object and, for an accepted Job, on its first and last pods."""
    verdict = api.dry_run(obj)
    if not verdict.accepted or obj.get("kind") != "Job" or obj.get("apiVersion") != "batch/v1":
        return verdict
    for index, pod in pods_of(verdict.stored):
        if index and _follows_its_leader(pod):
            continue
        said = api.dry_run(pod)
        if not said.accepted:
            return Verdict(False, said.code, said.reason, f"its pod {index}: {said.message}",
                           tuple((_pod_path(path), message) for path, message in said.causes))
    return verdict


def _follows_its_leader(pod: dict[str, Any]) -> bool:
    """A pod under JobSet's exclusive placement but its leader (index 0): JobSet's pod webhook admits it only once
    the leader is scheduled, and then in the leader's domain (a transient refusal, by design), so the leader alone
    is judged."""
    annotations = pod["metadata"].get("annotations") or {}
    return EXCLUSIVE_TOPOLOGY in annotations and NODE_SELECTOR_STRATEGY not in annotations


def _names(server_path: Parts, project_path: Parts) -> bool:
    """The server names the project's path, or the map or list it is in, in its own words: it leaves out a
    template's `metadata` (`spec.template.labels`), a claim's `requests` (`spec.resources.storage`), a list index
    (`volumeMounts.subPath`). Its parts are the project's, in order, from the first, some left out."""
    rest = iter(project_path)
    return server_path[:1] == project_path[:1] and all(part in rest for part in server_path) or not server_path


@dataclass
class Compared:
    judged: Judged
    verdict: Verdict

    @property
    def considered(self) -> list[Problem]:
        return [p for p in self.judged.problems if not p.later]

    def disagreement(self) -> str | None:
        project, server = self.considered, self.verdict
        if self.judged.input_refused and not server.accepted and "admission webhook" in server.message:
            return None
        if bool(project) != (not server.accepted):
            return "accepted by the project's rules" if not project else "refused by the project's rules only"
        if project and server.causes and not any(_names(s, p.path) for s, _ in server.causes for p in project):
            return "refused at other paths"
        return None

    def __str__(self) -> str:
        obj = self.judged.obj
        meta = obj.get("metadata") or {}
        project = "; ".join(str(p) for p in self.judged.problems) or "accepted"
        server = ("accepted" if self.verdict.accepted else
                  f"{self.verdict.code} {self.verdict.reason}: " + ("; ".join(
                      f"{format_path(path)}: {message}" for path, message in self.verdict.causes)
                      or self.verdict.message))
        return (f"[{self.judged.source}] {obj.get('kind')}/{meta.get('name') or meta.get('generateName')}: "
                f"{self.disagreement()}\n    project: {project[:600]}\n    server:  {server[:600]}")


def in_own_namespaces(api: ApiServer, cases: list[Judged]) -> list[Judged]:
    """The cases with each namespaced object moved to a namespace of this comparison's own, one for each namespace
    they name (the server's when none): the server's verdict does not depend on the name of a valid namespace, and
    the namespaces the example stacks run in (ml, llm, default) are left to the tests of the stacks. An invalid
    name stays, for the server to refuse."""
    prefix, own = f"verdict-{uuid.uuid4().hex[:6]}", {}
    moved = []
    for case in cases:
        meta = case.obj.get("metadata")
        found = api.resource(case.obj.get("apiVersion", ""), case.obj.get("kind", ""))
        namespace = (meta or {}).get("namespace") or api.default_namespace
        if not isinstance(meta, dict) or not found or not found[1] or not is_dns_label(namespace):
            moved.append(case)
            continue
        own.setdefault(namespace, f"{prefix}-{len(own)}")
        moved.append(replace(case, obj={**case.obj, "metadata": {**meta, "namespace": own[namespace]}}))
    return moved


def compare(api: ApiServer, cases: list[Judged]) -> list[Compared]:
    """Each distinct object once, in a namespace of its own, with the server's verdict."""
    unique: dict[str, Judged] = {}
    for case in cases:
        unique.setdefault(_key(case.obj), case)
    own = in_own_namespaces(api, list(unique.values()))
    api.prepare([c.obj for c in own])
    return [Compared(case, server_verdict(api, case.obj)) for case in own]


def report(name: str, compared: list[Compared]) -> list[Compared]:
    refused = sum(1 for c in compared if c.considered)
    beyond = sum(1 for c in compared if c.judged.problems and not c.considered)
    disagreeing = [c for c in compared if c.disagreement()]
    print(f"\n{name}: {len(compared)} objects compared ({refused} refused by the project's rules, {beyond} only by "
          f"its checks beyond the server), {len(disagreeing)} disagree")
    return disagreeing


@pytest.mark.parametrize("name", list(SOURCES))
def test_the_project_and_the_api_server_agree(server, name):
    disagreeing = report(name, compare(server, SOURCES[name]()))
    assert not disagreeing, "\n".join(str(c) for c in disagreeing)
