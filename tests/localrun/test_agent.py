"""`trainjobs node-agent`'s arguments are checked before it registers anything (tests/cluster/test_node_agent.py runs
it on a real cluster)."""

import pytest

from trainjobs.kube.client import ApiError
from trainjobs.localrun.agent import node_agent
from trainjobs.localrun.plan import PlanError


@pytest.mark.parametrize("args, message", [
    ({"disruptions": ["w-1"]}, "--disrupt w-1: expected HOSTNAME@SECONDS or HOSTNAME@output:TEXT"),
    ({"nodes": 0}, "--nodes 0: give at least 1"),
])
def test_bad_arguments_are_refused_before_the_cluster_is_asked(tmp_path, args, message):
    with pytest.raises(PlanError) as refused:
        node_agent(str(tmp_path / "no-such-kubeconfig"), run_root=str(tmp_path), **args)
    assert str(refused.value) == message
    assert not list(tmp_path.iterdir())


def test_a_missing_kubeconfig_is_named(tmp_path):
    with pytest.raises(ApiError) as refused:
        node_agent(str(tmp_path / "no-such-kubeconfig"), run_root=str(tmp_path))
    assert str(refused.value).startswith(f"--kubeconfig {tmp_path / 'no-such-kubeconfig'}: ")
    assert not list(tmp_path.iterdir())
