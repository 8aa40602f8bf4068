"""run-local as the node agent: the kubelet of Nodes registered in a real API server.

`trainjobs node-agent --kubeconfig PATH` registers Nodes (capacity and labels like the cluster's fake
ones, so rendered pods schedule on them), keeps their Ready condition and lease fresh, and runs the pods
the scheduler binds to them as run-local runs a rendered pod: a network namespace on a private bridge,
the pod's env and volumes resolved from the real objects, the host's programs (`plan.build_pod`,
`pods.Sandbox`, `jobs.PodRun`). It reports each pod's status back (phase, IP, conditions, container
states with exit codes and times), serves the pods' DNS names from the real headless Services and pods
(their hosts files, rewritten as pods come and go), stops a deleted pod (SIGTERM, SIGKILL after its grace
period) and then deletes it with grace 0, and serves the containers' logs on the kubelet's endpoint so
that `kubectl logs` works through the API server.

Then a pod's fate is decided by the cluster's controllers (the Job controller's podFailurePolicy,
backoffLimitPerIndex, podReplacementPolicy; a JobSet or Kueue controller if the cluster runs one), not by
run-local's emulation of them. `--disrupt HOSTNAME@WHEN` preempts a pod as the kubelet does
(condition DisruptionTarget, reason TerminationByKubelet; the pod fails with reason Preempting).
"""

import datetime
import ipaddress
import json
import re
import secrets
import shutil
import signal
import socket
import ssl
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import requests

from trainjobs.backends import PodSet
from trainjobs.kube.client import ApiError, KubeClient
from trainjobs.kube.naming import COMPLETION_INDEX_ANNOTATION, label_key_problem, label_value_problem
from trainjobs.kube.policies import DISRUPTION_TARGET
from trainjobs.tools.podview import ObjectIndex, PodFacts
from .jobs import Console, Echo, PodRun
from .jobsets import Disruption
from .network import ETC_NETNS, Network, hosts_file, pick_subnet, sweep_stale
from .plan import PlanError, PodSlot, VolumeSpec, build_pod, unpublished
from .pods import Holders, Sandbox, SandboxError

TICK = 0.25
LEASE_SECONDS = 40
RENEW_EVERY = 10.0
NODE_STATUS_EVERY = 60.0
NODE_IP = "127.0.0.1"
# As the cluster's fake Nodes offer (scripts/engine/cluster.sh): rendered pods that ask for GPUs schedule too.
CAPACITY = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8", "ephemeral-storage": "1Ti"}
NODE_LABEL = "trainjobs.dev/node-agent"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
PREEMPTED_POD_REASON = "Preempting"   # the kubelet's pod status reason when it preempts a pod
PREEMPTED_CONDITION_REASON = "TerminationByKubelet"


_EPOCH = time.time() - time.monotonic()   # one offset: a container's times read the same at every report


def own_labels(node: str) -> dict[str, str]:
    """The labels the agent gives each of its Nodes, as the cluster's fake Nodes have them (rendered pods select
    on them), and whose machine runs it."""
    return {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "type": "node-agent", NODE_LABEL: socket.gethostname()[:63].strip("-.") or "localhost"}


def parse_node_labels(texts: list[str]) -> dict[str, str]:
    """kubelet's `--node-labels KEY=VALUE,...` (repeatable): labels added to the agent's Nodes."""
    labels = {}
    for item in (item for text in texts for item in text.split(",") if item):
        key, equals, value = item.partition("=")
        problem = ("expected KEY=VALUE" if not equals else label_key_problem(key) or label_value_problem(value)
                   or (key in own_labels("") and "the agent sets this label itself; choose another key"))
        if problem:
            raise PlanError(f"--node-labels {item}: {problem}")
        labels[key] = value
    return labels


def parse_taints(texts: list[str]) -> list[dict[str, str]]:
    """kubelet's `--register-with-taints KEY=VALUE:EFFECT,...` (or KEY:EFFECT; repeatable): the taints the agent's
    Nodes are registered with: only pods that tolerate them are scheduled there."""
    taints = []
    for item in (item for text in texts for item in text.split(",") if item):
        rest, colon, effect = item.rpartition(":")
        key, _, value = rest.partition("=")
        if not colon or not key:
            problem = "expected KEY=VALUE:EFFECT or KEY:EFFECT"
        elif effect not in TAINT_EFFECTS:
            problem = f"{effect!r} is not a taint effect: use {', '.join(TAINT_EFFECTS)}"
        else:
            problem = label_key_problem(key) or label_value_problem(value)
        if problem:
            raise PlanError(f"--register-with-taints {item}: {problem}")
        taints.append({"key": key, **({"value": value} if value else {}), "effect": effect})
    return taints


def _wall(monotonic: float) -> str:
    """A time.monotonic() instant as the API's RFC 3339 time."""
    at = _EPOCH + monotonic
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class AgentPod:
    """A pod bound to one of the agent's Nodes, and what runs it here."""

    uid: str
    name: str
    namespace: str
    node: str
    slot: PodSlot
    manifest: dict[str, Any]
    run: PodRun | None = None
    veth: str = ""
    error: str = ""           # why its containers cannot be created (CreateContainerConfigError)
    deleting: bool = False
    reported: str = ""        # the last status sent, to send only changes
    preempted: bool = False
    gone: bool = False        # its network and processes are gone
    gone_from_api: bool = False   # force-deleted: nothing left to report to
    log_dir: Path | None = None
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)   # condition -> (status, since)

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{self.name}"


@dataclass
class NodeAgent:
    kube: KubeClient
    nodes: list[str]
    run_dir: Path
    write: Callable[[str], None]
    max_grace: float | None = None
    disruptions: list[Disruption] = field(default_factory=list)
    echo_logs: bool = True
    verbose: bool = False
    labels: dict[str, str] = field(default_factory=dict)   # --node-labels
    taints: list[dict[str, str]] = field(default_factory=list)   # --register-with-taints

    def __post_init__(self) -> None:
        self.console = Console(self.write)
        self.echo = Echo(self.console, self.verbose) if self.echo_logs else None
        self.pods: dict[str, AgentPod] = {}
        self.logs: dict[tuple[str, str], Path] = {}   # (namespace, pod) -> its log directory
        self.network = Network.plan([])
        self.network.subnet = pick_subnet(250)
        self._free = [str(ip) for ip in list(self.network.subnet.hosts())[1:]]
        self._veths = 0
        self._signal: int | None = None
        self.holders: Holders | None = None
        self.server: ThreadingHTTPServer | None = None
        self.registered: list[str] = []   # the Nodes it made, which it removes when it stops

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        for stale in sweep_stale():
            self.console(f"removed the leftovers of an interrupted local run {stale}")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.network.open()
            self.holders = Holders(self.run_dir / "holders.log")
            port = self._serve_logs()
            try:
                for node in self.nodes:
                    self._register(node, port)
            except requests.RequestException as exc:
                raise ApiError(f"the API server {self.kube.server} does not answer: {exc}") from None
            self.console(f"trainjobs node-agent: Nodes {', '.join(self.nodes)} ready; pods on bridge "
                         f"{self.network.bridge}, subnet {self.network.subnet}; container logs on "
                         f"https://{NODE_IP}:{port}; logs in {self.run_dir}/logs")
            renewed = status_sent = time.monotonic()
            while self._signal is None:
                now = time.monotonic()
                if now - renewed >= RENEW_EVERY:
                    renewed = now
                    for node in self.nodes:
                        self._renew(node)
                if now - status_sent >= NODE_STATUS_EVERY:
                    status_sent = now
                    for node in self.nodes:
                        self._node_status(node, port)
                try:
                    self._step(now)
                except (ApiError, requests.RequestException) as exc:   # the API server may be busy: next tick
                    self.console(f"warning: {exc}")
                time.sleep(TICK)
            self.console(f"{signal.Signals(self._signal).name}: stopping every pod and removing the Nodes ...")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, signal.SIG_IGN)
            self._shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def _on_signal(self, signum, frame) -> None:
        self._signal = self._signal or signum

    def _step(self, now: float) -> None:
        seen = self._list()
        for uid, manifest in seen.items():
            pod = self.pods.get(uid)
            if pod is None:
                pod = self._adopt(manifest)
                if pod is None:
                    continue
            pod.manifest = manifest
            if manifest["metadata"].get("deletionTimestamp") and not pod.deleting:
                self._delete(pod, now, manifest["metadata"].get("deletionGracePeriodSeconds"))
        for uid, pod in list(self.pods.items()):
            if uid not in seen and not pod.deleting:   # removed at once (force deletion): no one to report to
                self._delete(pod, now, 0)
                pod.gone_from_api = True
        self._start_new(now)
        for pod in list(self.pods.values()):
            self._advance(pod, now)
        self._write_hosts()

    def _list(self) -> dict[str, dict[str, Any]]:
        found = {}
        for node in self.nodes:
            listed = self.kube.call("GET", "/api/v1/pods", fieldSelector=f"spec.nodeName={node}")
            for manifest in listed["items"]:
                found[manifest["metadata"]["uid"]] = manifest
        return found

    # -- pods -------------------------------------------------------------------------------

    def _adopt(self, manifest: dict[str, Any]) -> AgentPod | None:
        """A pod newly bound to one of the Nodes; None for a finished one (of an earlier agent), which is deleted
        with grace 0 when the API server asks, as the kubelet does."""
        meta, spec = manifest["metadata"], manifest["spec"]
        if manifest.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            if meta.get("deletionTimestamp"):
                self.kube.call("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                               {"gracePeriodSeconds": 0}, ok=(200, 202, 404))
            return None
        annotations = meta.get("annotations") or {}
        index = annotations.get(COMPLETION_INDEX_ANNOTATION)
        hostname = spec.get("hostname") or meta["name"]
        slot = PodSlot(job=(meta.get("labels") or {}).get("job-name", meta["name"]), index=int(index or 0),
                       hostname=hostname, namespace=meta["namespace"], subdomain=spec.get("subdomain"),
                       labels=dict(meta.get("labels") or {}), indexed=bool(spec.get("hostname")),
                       searches=tuple((spec.get("dnsConfig") or {}).get("searches") or ()))
        pod = AgentPod(uid=meta["uid"], name=meta["name"], namespace=meta["namespace"], node=spec["nodeName"],
                       slot=slot, manifest=manifest)
        self.pods[pod.uid] = pod
        if meta.get("deletionTimestamp"):
            pod.deleting = True   # deleted before it ran: nothing to stop
        return pod

    def _start_new(self, now: float) -> None:
        """Give every new pod its address and name files, then start their sandboxes side by side."""
        new = [p for p in self.pods.values() if p.run is None and not p.error and not p.deleting]
        if not new:
            return
        objects = self._objects({p.namespace for p in new})
        index = ObjectIndex(objects)
        for pod in new:
            self._publish(pod, objects)
        runs = []
        for pod in new:
            pod.slot.ip = self._free.pop(0)
            try:
                spec = self._pod_spec(pod, index)
            except PlanError as exc:
                self._free.append(pod.slot.ip)
                pod.slot.ip, pod.error = "", str(exc)
                self.console(f"pod {pod.namespace}/{pod.name}: cannot create its containers: {exc}")
                self._report(pod)
                continue
            pod.slot.prefixlen = self.network.subnet.prefixlen
            pod.slot.netns = f"{self.network.prefix}-p{self._veths}"
            pod.veth = f"{self.network.prefix}-{self._veths}"
            self._veths += 1
            self.network.attach(pod.slot, pod.veth, self._hosts(pod))
            pod.log_dir = self.run_dir / "logs" / f"{pod.namespace}_{pod.name}"
            self.logs[(pod.namespace, pod.name)] = pod.log_dir
            sandbox = Sandbox(spec, scratch=self.run_dir / ".sandboxes" / pod.uid, log_dir=pod.log_dir,
                              claims=self.run_dir / ".claims")
            pod.run = PodRun(spec=spec, job=None, attempt=1, sandbox=sandbox, started=now)
            runs.append(pod)
        for pod in runs:
            try:
                pod.run.sandbox.start(self.holders)
            except SandboxError as exc:
                pod.run.phase, pod.run.reason, pod.run.finished = "Failed", str(exc), time.monotonic()
                pod.run.begin_stop(time.monotonic())
        for pod in runs:
            if pod.run.phase == "Failed":
                continue
            try:
                pod.run.sandbox.wait_ready()
            except SandboxError as exc:
                pod.run.phase, pod.run.reason, pod.run.finished = "Failed", str(exc), time.monotonic()
                pod.run.begin_stop(time.monotonic())
        for pod in runs:
            if pod.run.phase == "Pending":
                pod.run.started = time.monotonic()
                pod.run.start_containers(self.echo, pod.run.started)
                self.console(f"pod {pod.namespace}/{pod.name} started on {pod.node}: {pod.slot.ip}")
            self._report(pod)

    def _objects(self, namespaces: set[str]) -> list[dict[str, Any]]:
        """What the new pods' env, volumes and names come from: their namespaces' ConfigMaps, Secrets, Services
        and PersistentVolumeClaims, as the API server has them."""
        objects = []
        for namespace in sorted(namespaces):
            for kind, plural in (("ConfigMap", "configmaps"), ("Secret", "secrets"), ("Service", "services"),
                                 ("PersistentVolumeClaim", "persistentvolumeclaims")):
                for item in self.kube.call("GET", f"/api/v1/namespaces/{namespace}/{plural}")["items"]:
                    objects.append({"apiVersion": "v1", "kind": kind, **item})
        return objects

    def _pod_spec(self, pod: AgentPod, index: ObjectIndex):
        meta, spec = pod.manifest["metadata"], pod.manifest["spec"]
        pod_set = PodSet(owner=pod.manifest, name=pod.name, template={"metadata": meta, "spec": spec})
        facts = PodFacts(pod_name_suffix="", pod_ip=pod.slot.ip, node_name=pod.node, host_ip=NODE_IP)
        given = {v["name"]: self._projected(pod, v) for v in spec.get("volumes", []) if "projected" in v}
        return build_pod(pod_set, pod.slot, index, facts, pod.name, f"Pod {pod.namespace}/{pod.name}",
                         self.max_grace, given)

    def _projected(self, pod: AgentPod, volume: dict[str, Any]) -> VolumeSpec:
        """A projected volume's files (a service account token among them, as the kubelet requests it)."""
        files: dict[str, tuple[bytes, int]] = {}
        mode = volume["projected"].get("defaultMode", 0o644)
        for source in volume["projected"].get("sources") or []:
            if "serviceAccountToken" in source:
                request = source["serviceAccountToken"]
                account = pod.manifest["spec"].get("serviceAccountName", "default")
                body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
                    "audiences": [request["audience"]] if request.get("audience") else None,
                    "expirationSeconds": request.get("expirationSeconds", 3607),
                    "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid}}}
                answer = self.kube.call("POST", f"/api/v1/namespaces/{pod.namespace}/serviceaccounts/{account}/token",
                                        body)
                files[request["path"]] = (answer["status"]["token"].encode(), mode)
            elif "downwardAPI" in source:
                for item in source["downwardAPI"].get("items") or []:
                    path = (item.get("fieldRef") or {}).get("fieldPath", "")
                    value = {"metadata.namespace": pod.namespace, "metadata.name": pod.name,
                             "metadata.uid": pod.uid}.get(path, "")
                    files[item["path"]] = (value.encode(), item.get("mode", mode))
            else:
                kind, key = ("ConfigMap", "configMap") if "configMap" in source else ("Secret", "secret")
                ref = source.get(key) or {}
                plural = "configmaps" if kind == "ConfigMap" else "secrets"
                found = self.kube.call("GET", f"/api/v1/namespaces/{pod.namespace}/{plural}/{ref.get('name')}",
                                       ok=(200, 404))
                if found is None:
                    if ref.get("optional"):
                        continue
                    raise PlanError(f'Pod {pod.namespace}/{pod.name}: volume "{volume["name"]}": {kind} '
                                    f'"{ref.get("name")}" does not exist')
                index = ObjectIndex([{"kind": kind, **found}])
                data = index.raw_data(kind, ref.get("name")) or {}
                for item in ref.get("items") or [{"key": k, "path": k} for k in sorted(data)]:
                    if item["key"] in data:
                        files[item["path"]] = (data[item["key"]], item.get("mode", mode))
        return VolumeSpec(name=volume["name"], kind="files", files=files)

    def _advance(self, pod: AgentPod, now: float) -> None:
        run = pod.run
        if run is not None and not pod.gone:
            if not run.done:
                run.step(self.echo, now)
                for disruption in self.disruptions:
                    if disruption.due(run, now):
                        disruption.done = True
                        self._preempt(pod, now)
            if run.done and run.stop_deadline is not None:
                run.settle(now)
            if run.settled:
                self._release(pod)
        elif run is None and not pod.gone and (pod.deleting or pod.error):
            pod.gone = True
        if not pod.gone_from_api:
            self._report(pod)
        if pod.deleting and pod.gone:
            if not pod.gone_from_api:
                self.kube.call("DELETE", pod.path, {"gracePeriodSeconds": 0, "preconditions": {"uid": pod.uid}},
                               ok=(200, 202, 404, 409))
            self.console(f"pod {pod.namespace}/{pod.name} deleted")
            del self.pods[pod.uid]

    def _preempt(self, pod: AgentPod, now: float) -> None:
        """As the kubelet preempts a pod: the DisruptionTarget condition first, then its containers are stopped and
        it fails with reason Preempting."""
        self.console(f"preempting pod {pod.namespace}/{pod.name}: DisruptionTarget ({PREEMPTED_CONDITION_REASON})")
        pod.preempted = True
        self._report(pod)
        pod.run.disrupt("preempted by the node agent (--disrupt)", now)

    def _delete(self, pod: AgentPod, now: float, grace: int | None) -> None:
        """The API server deleted the pod: SIGTERM, SIGKILL after the shorter of its grace periods."""
        pod.deleting = True
        run = pod.run
        if run is None or run.settled or pod.gone:
            return
        run.terminate("deleted", now)
        if grace is not None and run.stop_deadline is not None:
            run.stop_deadline = min(run.stop_deadline, now + float(grace) + 0.5)

    def _release(self, pod: AgentPod) -> None:
        """The pod's processes are gone: free its network and address (its logs stay)."""
        problems = self.network.detach(pod.slot)
        if problems:
            self.console(f"pod {pod.namespace}/{pod.name}: could not remove {', '.join(problems)}")
        else:
            self._free.append(pod.slot.ip)
        pod.gone = True

    # -- status -----------------------------------------------------------------------------

    def _report(self, pod: AgentPod) -> None:
        status = self._status(pod)
        text = json.dumps(status, sort_keys=True)
        if text == pod.reported:
            return
        answer = self.kube.patch(f"{pod.path}/status", {"status": status}, ok=(200, 404))
        if answer is not None:
            pod.reported = text

    def _status(self, pod: AgentPod) -> dict[str, Any]:
        run, spec = pod.run, pod.manifest["spec"]
        finished = run is not None and pod.gone
        phase = "Pending"
        if run is not None and run.phase != "Pending":
            phase = "Running"
        if finished:   # a pod stopped from outside (deleted, preempted) fails, as the kubelet reports it
            phase = "Succeeded" if run.phase == "Succeeded" else "Failed"
        status: dict[str, Any] = {"phase": phase, "hostIP": NODE_IP, "hostIPs": [{"ip": NODE_IP}]}
        if run is not None:
            status["startTime"] = _wall(run.started)
        if pod.slot.ip:
            status.update(podIP=pod.slot.ip, podIPs=[{"ip": pod.slot.ip}])
        by_name = {c.spec.name: c for c in run.sandbox.containers} if run else {}
        status["initContainerStatuses"] = [self._container(c, by_name.get(c["name"]), pod, finished, "init")
                                           for c in spec.get("initContainers", [])]
        status["containerStatuses"] = [self._container(c, by_name.get(c["name"]), pod, finished, "main")
                                       for c in spec.get("containers", [])]
        if not status["initContainerStatuses"]:
            del status["initContainerStatuses"]
        ready = phase == "Running" and run.ready and all(s.get("ready") for s in status["containerStatuses"])
        initialized = run is not None and run.phase != "Pending" and (run._waiting_on is None or finished)
        mine = {"PodReadyToStartContainers": run is not None and not finished and bool(run.sandbox.pod_pid),
                "Initialized": initialized, "ContainersReady": ready, "Ready": ready}
        conditions = [{"type": kind, "status": "True" if value else "False"} for kind, value in mine.items()]
        for condition in conditions:
            if condition["type"] in ("ContainersReady", "Ready") and finished:
                condition["reason"] = "PodCompleted"
            before = pod.transitions.get(condition["type"])
            if before is None or before[0] != condition["status"]:
                pod.transitions[condition["type"]] = before = (condition["status"], _wall(time.monotonic()))
            condition["lastTransitionTime"] = before[1]
        if pod.preempted:
            conditions.append({"type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTED_CONDITION_REASON,
                               "message": "Pod was preempted by the node agent (trainjobs node-agent --disrupt)"})
            if finished:
                status.update(reason=PREEMPTED_POD_REASON, message="Pod was preempted by the node agent")
        if pod.error:
            status["message"] = pod.error
        status["conditions"] = conditions
        return status

    def _container(self, raw: dict[str, Any], c, pod: AgentPod, finished: bool, kind: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": raw["name"], "image": raw.get("image") or "", "imageID": "",
                                 "restartCount": 0, "ready": False, "started": False}
        if raw.get("restartPolicy") == "Always":   # a sidecar
            kind = "sidecar"
        if c is None:
            reason = "CreateContainerConfigError" if pod.error else (
                "PodInitializing" if kind == "main" and pod.run is not None else "ContainerCreating")
            entry["state"] = {"waiting": {"reason": reason, **({"message": pod.error} if pod.error else {})}}
            if finished:
                entry["state"] = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown"}}
            return entry
        entry["containerID"] = f"run-local://{c.process.pid}"
        code = c.exit_code if c.exit_code is not None else (c.poll() if finished else None)
        if code is None:
            entry.update(started=True, ready=kind != "init", state={"running": {"startedAt": _wall(c.started)}})
        else:
            entry["state"] = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                             "startedAt": _wall(c.started), "finishedAt": _wall(c.finished or c.started),
                                             "containerID": entry["containerID"]}}
        return entry

    # -- names ------------------------------------------------------------------------------

    def _publish(self, pod: AgentPod, objects: list[dict[str, Any]]) -> None:
        """Whether the pod has DNS names, as run-local decides it (`plan.unpublished`)."""
        services = [o for o in objects if o["kind"] == "Service"]
        pod.slot.published = bool(pod.slot.subdomain) and unpublished(pod.slot, services) is None

    def _live_slots(self) -> list[PodSlot]:
        return [p.slot for p in self.pods.values() if p.run is not None and not p.gone and p.slot.ip]

    def _hosts(self, pod: AgentPod) -> str:
        return hosts_file(pod.slot, self._live_slots() + ([pod.slot] if pod.slot not in self._live_slots() else []))

    def _write_hosts(self) -> None:
        """Each running pod's hosts file with the pods that have addresses now, as the cluster DNS answers."""
        for pod in self.pods.values():
            if pod.run is None or pod.gone:
                continue
            path = ETC_NETNS / pod.slot.netns / "hosts"
            text = self._hosts(pod)
            try:
                if path.read_text() != text:
                    with open(path, "r+") as f:   # in place: the pod has this very file bound at /etc/hosts
                        f.write(text)
                        f.truncate()
            except OSError:
                continue

    # -- Nodes ------------------------------------------------------------------------------

    def _register(self, node: str, port: int) -> None:
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node, "labels": {**self.labels, **own_labels(node)}},
                **({"spec": {"taints": self.taints}} if self.taints else {})}
        existing = self.kube.call("GET", f"/api/v1/nodes/{node}", ok=(200, 404))
        if existing is not None:
            raise ApiError(f"a Node {node} already exists: another node agent runs it, or one that was killed "
                           f"left it; delete it (kubectl delete node {node}) or choose other names (--node-prefix)")
        self.kube.call("POST", "/api/v1/nodes", body)
        self.registered.append(node)
        self._node_status(node, port)
        self.kube.call("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": node},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": self._micro()}},
            ok=(200, 201, 409))

    @staticmethod
    def _micro() -> str:
        return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _renew(self, node: str) -> None:
        self.kube.patch(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}",
                        {"spec": {"renewTime": self._micro(), "holderIdentity": node}}, ok=(200, 404))

    def _node_status(self, node: str, port: int) -> None:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

        def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
            return {"type": kind, "status": status, "reason": reason, "message": message,
                    "lastHeartbeatTime": now, "lastTransitionTime": now}

        status = {
            "capacity": CAPACITY, "allocatable": CAPACITY,
            "conditions": [condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "no memory pressure"),
                           condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
                           condition("PIDPressure", "False", "KubeletHasSufficientPID", "enough PIDs"),
                           condition("Ready", "True", "KubeletReady", "trainjobs node-agent is running pods")],
            "addresses": [{"type": "InternalIP", "address": NODE_IP}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                         "osImage": "this machine (trainjobs node-agent)", "containerRuntimeVersion": "run-local://",
                         "kubeletVersion": "trainjobs-node-agent", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"},
        }
        self.kube.patch(f"/api/v1/nodes/{node}/status", {"status": status})

    # -- logs -------------------------------------------------------------------------------

    def _serve_logs(self) -> int:
        """The kubelet's container log endpoint (`/containerLogs/NS/POD/CONTAINER`), over TLS with a certificate
        of its own: the API server proxies `kubectl logs` to it."""
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                url = urllib.parse.urlparse(self.path)
                match = re.fullmatch(r"/containerLogs/([^/]+)/([^/]+)/([^/]+)", url.path)
                log_dir = agent.logs.get((match.group(1), match.group(2))) if match else None
                if log_dir is None:
                    self.send_error(404, "no such pod on this node")
                    return
                query = urllib.parse.parse_qs(url.query)
                path = log_dir / f"{match.group(3)}.log"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                text = path.read_bytes() if path.exists() else b""
                tail = query.get("tailLines")
                if tail:
                    text = b"".join(text.splitlines(keepends=True)[-int(tail[0]):]) if int(tail[0]) else b""
                self.wfile.write(text)
                if query.get("follow", ["false"])[0] == "true":
                    agent._follow(self.wfile, path, len(path.read_bytes()) if path.exists() else 0, match.group(1),
                                  match.group(2), match.group(3))

        self.server = ThreadingHTTPServer((NODE_IP, 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert, key = _self_signed(self.run_dir)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def _follow(self, out, path: Path, offset: int, namespace: str, name: str, container: str) -> None:
        """What the container prints next, until it exits."""
        while True:
            running = any(p.namespace == namespace and p.name == name and p.run is not None and any(
                c.spec.name == container and c.exit_code is None for c in p.run.sandbox.containers)
                for p in list(self.pods.values()))
            data = path.read_bytes()[offset:] if path.exists() else b""
            if data:
                out.write(data)
                out.flush()
                offset += len(data)
            if not running:
                return
            time.sleep(0.5)

    # -- the end ----------------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Stop every pod (SIGTERM, SIGKILL after its grace period), remove the Nodes, the network."""
        now = time.monotonic()
        for pod in self.pods.values():
            if pod.run is not None and not pod.run.done:
                pod.run.terminate("the node agent stopped", now)
        while any(p.run is not None and not p.gone for p in self.pods.values()):
            for pod in self.pods.values():
                if pod.run is not None and not pod.gone:
                    pod.run.settle(time.monotonic())
                    if pod.run.settled:
                        pod.gone = True
            time.sleep(TICK)
        for node in self.registered:
            try:
                self.kube.call("DELETE", f"/api/v1/nodes/{node}", ok=(200, 202, 404))
                self.kube.call("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}",
                               ok=(200, 202, 404))
            except (ApiError, requests.RequestException) as exc:
                self.console(f"could not remove Node {node}: {exc}")
        if self.server is not None:
            self.server.shutdown()
        if self.holders is not None:
            self.holders.close()
        problems = self.network.teardown()
        shutil.rmtree(self.run_dir / ".sandboxes", ignore_errors=True)
        shutil.rmtree(self.run_dir / ".claims", ignore_errors=True)
        if problems:
            self.console(f"could not remove: {', '.join(problems)}")


def _self_signed(directory: Path) -> tuple[str, str]:
    """A key and a self-signed certificate for the log endpoint (the API server does not check kubelets' certificates
    unless it is given a CA for them: --kubelet-certificate-authority)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trainjobs-node-agent")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(NODE_IP))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "kubelet.crt", directory / "kubelet.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return str(cert_path), str(key_path)


def node_agent(kubeconfig: str | None, nodes: int = 1, node_prefix: str = "run-local", run_root: str | None = None,
               max_grace: float | None = None, disruptions: list[str] = (), echo_logs: bool = True,
               verbose: bool = False, write: Callable[[str], None] | None = None, node_labels: list[str] = (),
               taints: list[str] = ()) -> int:
    """Run the node agent until SIGINT or SIGTERM; 0 once it stopped every pod and removed its Nodes."""
    try:
        evictions = [Disruption.parse(text) for text in disruptions]
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    labels, registered_taints = parse_node_labels(list(node_labels)), parse_taints(list(taints))
    if nodes < 1:
        raise PlanError(f"--nodes {nodes}: give at least 1")
    kube = KubeClient(kubeconfig)
    root = Path(run_root) if run_root else Path(tempfile.gettempdir())
    if write is None:
        def write(line: str) -> None:
            print(line, flush=True)
    agent = NodeAgent(kube, [f"{node_prefix}-{i}" for i in range(nodes)], root / f"trainjobs-agent-{secrets.token_hex(3)}",
                      write, max_grace=max_grace, disruptions=evictions, echo_logs=echo_logs, verbose=verbose,
                      labels=labels, taints=registered_taints)
    return agent.run()
