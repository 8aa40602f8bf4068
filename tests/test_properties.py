"""Properties over generated arguments: accepted args give valid, consistent objects; rejected
args raise TrainJobError and register nothing."""

import kubernetes_validate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainjobs import TorchTrainJob, TrainJobError
from trainjobs.testing import attempt
from trainjobs.testing.checks import manifest_problems
from trainjobs.families.torch import TORCH

names = st.one_of(
    st.from_regex(r"[a-z]([-a-z0-9]{0,58}[a-z0-9])?", fullmatch=True),
    st.text(alphabet="abcXYZ-_.019", min_size=1, max_size=70),
)
cpu = st.one_of(st.integers(0, 256).map(str), st.integers(1, 64000).map(lambda m: f"{m}m"),
                st.decimals(min_value="0.1", max_value="64", places=2).map(str), st.just("lots"))
env_names = st.one_of(st.sampled_from(sorted(TORCH.reserved_env)), st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True))
job_args = st.fixed_dictionaries({}, optional={
    "num_nodes": st.integers(-1, 300),
    "num_proc_per_node": st.one_of(st.just("auto"), st.integers(0, 16)),
    "resources_per_node": st.fixed_dictionaries({}, optional={
        "requests": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), cpu, max_size=2),
        "limits": st.dictionaries(st.sampled_from(["cpu", "nvidia.com/mig-1g.5gb"]), cpu, max_size=2),
    }),
    "env": st.dictionaries(env_names, st.text(max_size=8), max_size=3),
    "namespace": st.sampled_from(["ml", "team-a", "Bad_NS"]),
    "rendezvous": st.sampled_from(["static", "c10d"]),
})


def register(name, args):
    error, result = attempt(lambda: TorchTrainJob(name, args))
    assert error is None or isinstance(error, TrainJobError), error
    return error, [r.manifest for r in result.kubernetes()], result.resources


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names, args=job_args)
def test_accepted_args_render_valid_consistent_objects(name, args):
    error, objects, registered = register(name, args)
    if error is not None:
        assert registered == [], "a rejected job registered resources"
        assert error.issues and all(issue.message for issue in error.issues)
        return
    nodes = args.get("num_nodes", 1)
    service, job = objects
    assert service["metadata"]["name"] == name
    assert job["metadata"]["name"] == f"{name}-node-0"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == nodes >= 1
    assert len(f"{name}-node-0-{nodes - 1}") <= 63
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PET_NNODES"]["value"] == str(nodes)
    nproc = env["PET_NPROC_PER_NODE"]["value"]
    assert nproc == "auto" or int(nproc) >= 1
    assert manifest_problems(objects) == []
    for obj in objects:
        kubernetes_validate.validate(obj, "1.31.0", strict=True)


@settings(max_examples=60, deadline=None)
@given(name=st.from_regex(r"[a-z][-a-z0-9]{0,20}[a-z0-9]", fullmatch=True),
       nodes=st.integers(1, 64), nproc=st.one_of(st.just("auto"), st.integers(1, 16)))
def test_valid_args_are_never_rejected(name, nodes, nproc):
    error, objects, _ = register(name, {"num_nodes": nodes, "num_proc_per_node": nproc})
    assert error is None
    assert len(objects) == 2
