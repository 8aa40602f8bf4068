"""`trainjobs node-agent`'s arguments are checked before it registers anything (tests/cluster/test_node_agent.py runs
it on a real cluster)."""

import pytest

from trainjobs.kube.client import ApiError
from trainjobs.localrun import agent
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


@pytest.mark.parametrize("args, message", [
    ({"node_labels": ["team"]}, "--node-labels team: expected KEY=VALUE"),
    ({"node_labels": ["a=1,b/c/d=2"]}, '--node-labels b/c/d=2: key "b/c/d" has an invalid prefix "b/c" (must be a '
                                       "DNS subdomain)"),
    ({"node_labels": ["team=-ml"]}, '--node-labels team=-ml: value "-ml" is invalid: at most 63 alphanumerics, "-", '
                                    '"_" or ".", starting and ending with an alphanumeric (or empty)'),
    ({"node_labels": ["kubernetes.io/hostname=h"]},
     "--node-labels kubernetes.io/hostname=h: the agent sets this label itself; choose another key"),
    ({"taints": ["dedicated=ml"]}, "--register-with-taints dedicated=ml: expected KEY=VALUE:EFFECT or KEY:EFFECT"),
    ({"taints": ["=ml:NoSchedule"]}, "--register-with-taints =ml:NoSchedule: expected KEY=VALUE:EFFECT or KEY:EFFECT"),
    ({"taints": ["dedicated=ml:NoRun"]}, "--register-with-taints dedicated=ml:NoRun: 'NoRun' is not a taint effect: "
                                         "use NoSchedule, PreferNoSchedule, NoExecute"),
    ({"taints": ["dedicated=m l:NoSchedule"]}, '--register-with-taints dedicated=m l:NoSchedule: value "m l" is '
                                               'invalid: at most 63 alphanumerics, "-", "_" or ".", starting and '
                                               "ending with an alphanumeric (or empty)"),
])
def test_bad_node_labels_and_taints_are_refused_before_the_cluster_is_asked(tmp_path, args, message):
    with pytest.raises(PlanError) as refused:
        node_agent(str(tmp_path / "no-such-kubeconfig"), run_root=str(tmp_path), **args)
    assert str(refused.value) == message
    assert not list(tmp_path.iterdir())


class FakeKube:
    """The API server as the agent's registration sees it: no Node yet; what it was sent, in order."""

    server = "https://fake"

    def __init__(self):
        self.sent: list[tuple[str, str, object]] = []

    def call(self, method, path, body=None, ok=(200, 201)):
        self.sent.append((method, path, body))
        return None if method == "GET" else body

    def patch(self, path, body, ok=(200,)):
        self.sent.append(("PATCH", path, body))


@pytest.mark.parametrize("labels, taints, node_spec", [
    ([], [], None),
    (["trainjobs.dev/agent=t1,team=ml", "zone=a"], ["trainjobs.dev/agent=t1:NoSchedule,gpu:PreferNoSchedule"],
     {"taints": [{"key": "trainjobs.dev/agent", "value": "t1", "effect": "NoSchedule"},
                 {"key": "gpu", "effect": "PreferNoSchedule"}]}),
])
def test_the_nodes_it_registers_carry_the_labels_and_taints_given(tmp_path, monkeypatch, labels, taints, node_spec):
    monkeypatch.setattr(agent.socket, "gethostname", lambda: "box")
    kube = FakeKube()
    made = agent.NodeAgent(kube, ["t1-0"], tmp_path, print, labels=agent.parse_node_labels(labels),
                           taints=agent.parse_taints(taints))
    made._register("t1-0", 10250)
    (node,) = [body for method, path, body in kube.sent if (method, path) == ("POST", "/api/v1/nodes")]
    extra = {"trainjobs.dev/agent": "t1", "team": "ml", "zone": "a"} if labels else {}
    assert node == {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "t1-0", "labels": {
        **extra, "kubernetes.io/hostname": "t1-0", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "type": "node-agent", "trainjobs.dev/node-agent": "box"}}, **({"spec": node_spec} if node_spec else {})}
