"""A real Kubernetes API server's verdict on objects: a server-side dry run (`dryRun=All`), as `kubectl create
--dry-run=server` sends it, with strict field validation.

The server is the cluster the KUBECONFIG environment variable names (`scripts/engine/cluster.sh up` prints it).
Without one the tests that need it are skipped, and under CI=true they fail: CI must really ask a server.

A dry run goes through defaulting, validation and admission but stores nothing. What admission looks up must
exist, so `prepare` creates, for real, the namespaces, service accounts and priority classes the objects name;
`close` deletes the namespaces and service accounts. A priority class, cluster-wide, is kept: another test may
name it at the same time (the example stacks' are the cluster's from its start, scripts/engine/cluster.sh).
A Job's pods are not objects trainjobs sends, but the project's rules on a Job stand for its pods too (their
hostnames, their labels): `pods_of` makes the pods the Job controller would create from the server's own
defaulted Job, for their dry run.
"""

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from trainjobs.kube.client import KubeClient

Parts = tuple[str | int, ...]


@dataclass(frozen=True)
class Verdict:
    """What the server said of one object: accepted, or refused with its HTTP code, reason and causes
    (`(field path, message)`; the field path as parts, empty when the server names none)."""

    accepted: bool
    code: int = 201
    reason: str = ""
    message: str = ""
    causes: tuple[tuple[Parts, str], ...] = ()
    stored: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the defaulted object


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI=true and no API server to ask: {reason}", pytrace=False)
    pytest.skip(reason)


def parse_field(text: str) -> Parts:
    """`spec.containers[0].resources.requests[nvidia.com/gpu]` -> ("spec", "containers", 0, ...)."""
    parts: list[str | int] = []
    for name, key in re.findall(r"([^.\[\]]+)|\[([^\]]*)\]", text):
        if name:
            parts.append(name)
        elif key.strip('"'):
            key = key.strip('"')
            parts.append(int(key) if key.isdigit() else key)
    return tuple(parts)


class ApiServer:
    """The server of the current context of a kubeconfig, through the library's JSON client (`KubeClient`)."""

    def __init__(self, kubeconfig: Path):
        from kubernetes import config

        client = KubeClient(str(kubeconfig))
        self.base, self.session = client.server, client.session
        self.default_namespace = config.list_kube_config_contexts(str(kubeconfig))[1]["context"].get(
            "namespace", "default")
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}
        self._prepared: set[tuple[str, str, str]] = set()
        self._created: list[dict[str, Any]] = []

    def close(self) -> None:
        """Deletes what `create` made, last first, and waits until it is gone: a later test may create objects of
        the same names (a namespace, a PriorityClass of another value), which a Terminating or a leftover one would
        refuse. Waits up to 5 minutes, generous for a busy machine."""
        try:
            urls = [f"{self._url(obj)}/{obj['metadata']['name']}" for obj in reversed(self._created)]
            for url in urls:
                self.session.delete(url, timeout=60)
            deadline = time.monotonic() + 300
            for url in urls:
                while self.session.get(url, timeout=60).status_code != 404 and time.monotonic() < deadline:
                    time.sleep(1)
        finally:
            self.session.close()

    def ready(self) -> str | None:
        """None if the server answers ready, else why not."""
        try:
            response = self.session.get(f"{self.base}/readyz", timeout=10)
        except requests.RequestException as exc:
            return f"{self.base} does not answer: {exc}"
        return None if response.ok else f"{self.base}/readyz says {response.status_code}: {response.text[:200]}"

    def version(self) -> str:
        return self.session.get(f"{self.base}/version", timeout=10).json()["gitVersion"]

    def resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """The collection path of a kind (`/apis/batch/v1`, `jobs`) and whether it is namespaced; None if not served."""
        key = (api_version, kind)
        if key not in self._resources:
            group_path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            response = self.session.get(self.base + group_path, timeout=30)
            for entry in response.json().get("resources", []) if response.ok else []:
                if "/" not in entry["name"]:
                    self._resources[(api_version, entry["kind"])] = (f"{group_path}/{entry['name']}",
                                                                     entry["namespaced"])
            self._resources.setdefault(key, None)
        return self._resources[key]

    def _url(self, obj: dict[str, Any]) -> str | None:
        found = self.resource(obj.get("apiVersion", ""), obj.get("kind", ""))
        if found is None:
            return None
        path, namespaced = found
        if namespaced:
            namespace = (obj.get("metadata") or {}).get("namespace") or self.default_namespace
            group, _, plural = path.rpartition("/")
            path = f"{group}/namespaces/{namespace}/{plural}"
        return self.base + path

    def dry_run(self, obj: dict[str, Any]) -> Verdict:
        url = self._url(obj)
        if url is None:
            return Verdict(False, 404, "NotServed", f"the server serves no {obj.get('apiVersion')} {obj.get('kind')}")
        response = self.session.post(url, params={"dryRun": "All", "fieldValidation": "Strict"}, json=obj, timeout=60)
        body = _json(response)
        if response.ok:
            return Verdict(True, response.status_code, stored=body)
        if body.get("reason") == "AlreadyExists":   # one prepare() created: the server checks that after validation
            return Verdict(True, response.status_code)
        details = body.get("details") or {}
        causes = tuple((parse_field(c.get("field", "")), c.get("message", "")) for c in details.get("causes") or [])
        message = body.get("message", response.text[:500])
        if not causes:   # strict decoding names its field only in the message
            causes = tuple((parse_field(f), message) for f in re.findall(r'unknown field "([^"]+)"', message))
        return Verdict(False, response.status_code, body.get("reason", ""), message, causes)

    def create(self, obj: dict[str, Any], keep: bool = False) -> None:
        """Creates an object for real, unless it is there already; `close` deletes it, unless `keep`."""
        response = self.session.post(self._url(obj), json=obj, timeout=60)
        if not response.ok and response.status_code != 409:
            raise AssertionError(f"cannot create {obj['kind']}/{obj['metadata']['name']}: {response.text[:500]}")
        if response.ok and not keep:
            self._created.append(obj)

    def prepare(self, objects: list[dict[str, Any]]) -> None:
        """What admission looks up for these objects and their pods: namespaces, service accounts, priority classes."""
        for obj in objects:
            namespace = (obj.get("metadata") or {}).get("namespace") or self.default_namespace
            if not is_dns_label(namespace):
                continue   # the server refuses the object; nothing to create
            pod = _pod_spec(obj)
            wanted = [("Namespace", "", namespace)]
            if pod is not None:
                account = pod.get("serviceAccountName") or "default"
                wanted.append(("ServiceAccount", namespace, account))
                if pod.get("priorityClassName"):
                    wanted.append(("PriorityClass", "", pod["priorityClassName"]))
            for kind, ns, name in wanted:
                if (kind, ns, name) in self._prepared or not isinstance(name, str) or not _is_dns_subdomain(name):
                    continue
                self._prepared.add((kind, ns, name))
                if kind == "Namespace":
                    self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
                elif kind == "ServiceAccount":
                    self.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                 "metadata": {"name": name, "namespace": ns}})
                else:
                    self.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": name}, "value": 1000}, keep=True)


def _json(response: requests.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def is_dns_label(text: Any) -> bool:
    return isinstance(text, str) and re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", text) is not None


def _is_dns_subdomain(text: Any) -> bool:
    return (isinstance(text, str) and len(text) <= 253
            and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", text) is not None)


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj.get("kind") == "Job":
        spec = ((obj.get("spec") or {}).get("template") or {}).get("spec")
        return spec if isinstance(spec, dict) else None
    return None


# The Job controller's pods (kubernetes pkg/controller/job/job_controller.go manageJob, indexed_job_utils.go and
# pkg/controller/controller_utils.go GetPodFromTemplate): the template's labels, annotations and spec, owned by
# the Job, with its tracking finalizer; in an Indexed Job the completion index as an annotation, a label and
# JOB_COMPLETION_INDEX, the failure count when the Job counts failures per index, the hostname <job>-<index>
# and the name <job>-<index>-<random>.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


def pods_of(job: dict[str, Any]) -> list[tuple[int | None, dict[str, Any]]]:
    """The first and the last pod of a Job (the only one of a NonIndexed Job), from the server's defaulted Job."""
    spec, meta = job["spec"], job["metadata"]
    indexed = spec.get("completionMode") == "Indexed"
    indexes = sorted({0, (spec.get("completions") or 1) - 1}) if indexed else [None]
    template = spec["template"]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta.get("uid") or "0",
             "controller": True, "blockOwnerDeletion": True}
    pods = []
    for index in indexes:
        pod_meta = {"generateName": f"{meta['name']}-" if index is None else f"{meta['name']}-{index}-",
                    "namespace": meta.get("namespace"),
                    "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                    "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                    "finalizers": [TRACKING_FINALIZER], "ownerReferences": [owner]}
        pod_spec = dict(template["spec"])
        if index is not None:
            pod_meta["labels"][COMPLETION_INDEX] = str(index)
            pod_meta["annotations"][COMPLETION_INDEX] = str(index)
            if spec.get("backoffLimitPerIndex") is not None:
                pod_meta["annotations"][FAILURE_COUNT] = "0"
            pod_spec["hostname"] = f"{meta['name']}-{index}"
            reference = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
            index_env = {"name": "JOB_COMPLETION_INDEX", "valueFrom": reference}
            for group in [g for g in ("initContainers", "containers") if g in pod_spec]:
                pod_spec[group] = [c if any(e.get("name") == index_env["name"] for e in c.get("env") or [])
                                   else {**c, "env": [*(c.get("env") or []), index_env]}
                                   for c in pod_spec[group]]
        pods.append((index, {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}))
    return pods
