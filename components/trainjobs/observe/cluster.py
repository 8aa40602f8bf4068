"""Reading jobs from a running cluster, with the official Kubernetes Python client and the user's kubeconfig and
context, as plain objects (the API server's JSON), by the labels the library puts on every object.

The client is imported on first use: `import trainjobs` and `trainjobs render` never load it.
"""

import json
from typing import Iterator

from trainjobs.kube.manifests import LABEL_JOB, MAIN_CONTAINER
from trainjobs.observe.state import Snapshot
from trainjobs.scheduling.kueue import QUEUE_LABEL

# (group, version, plural) of each custom resource read, and the words a refusal names it by.
JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
POD_GROUPS = (("scheduling.volcano.sh", "v1beta1", "podgroups"), ("scheduling.x-k8s.io", "v1alpha1", "podgroups"))
REQUEST_TIMEOUT = 30
LOG_TIMEOUT = 10


class StatusError(Exception):
    """What stops reading a job's state, said so that the user can act on it."""


class ClusterSource:
    """The jobs of a cluster, read with the kubeconfig's `context` (default: its current context)."""

    def __init__(self, context: str | None = None, kubeconfig: str | None = None):
        try:
            from kubernetes import client, config
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != "kubernetes":
                raise
            raise StatusError("reading a cluster needs the Kubernetes Python client, which is not installed: "
                              "pip install 'trainjobs[cluster]'") from None
        try:
            self.api = config.new_client_from_config(config_file=kubeconfig, context=context)
        except (config.ConfigException, OSError, TypeError, ValueError) as exc:
            raise StatusError(f"no cluster to read: the kubeconfig ({kubeconfig or '$KUBECONFIG or ~/.kube/config'}) "
                              f"gives none{f' for context {context!r}' if context else ''}: {exc}; point KUBECONFIG at "
                              "your cluster's kubeconfig or pass --context") from None
        self.host = self.api.configuration.host
        self.context = context or _current_context(kubeconfig)
        self._client = client

    # -- requests ---------------------------------------------------------------------------

    def _call(self, what: tuple[str, str, str], method, *args, stream: bool = False,
              timeout: float | None = REQUEST_TIMEOUT, failed: str = "", **kwargs):
        """One request by a method of the client's typed APIs (which stay the same across the client's versions):
        the JSON body, or the open response (`stream`); None on a 404. `what` is (verb, resource, namespace) for a
        refusal's message, `failed` what another failure is said of."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        try:
            response = method(*args, _preload_content=False, _request_timeout=timeout, **kwargs)
        except ApiException as exc:
            detail = _message(exc.body or b"") or exc.reason or ""
            if exc.status == 404:
                return None
            if exc.status in (401, 403):
                verb, resource, namespace = what
                where = f" in namespace {namespace}" if namespace else " in any namespace"
                raise StatusError(f"the context {self.context} may not {verb} {resource}{where} ({exc.status} "
                                  f"{exc.reason}): {detail}; ask for that right, or use a context that has it") from None
            raise StatusError(f"{failed}: {detail}" if failed else f"{what[0]} {what[1]}: the API server at {self.host} "
                              f"answered {exc.status} {exc.reason}: {detail}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise StatusError(f"cannot reach the cluster at {self.host} (context {self.context}): "
                              f"{_reason(exc)}; is it running, and is this the kubeconfig and context you meant?") from None
        return response if stream else json.loads(response.data)

    def _list(self, group: str, version: str, plural: str, namespace: str | None, selector: str) -> list[dict] | None:
        """The objects of that resource with the selector; None when the cluster does not serve it (its CRD is
        not installed). Pods through the core API, every other kind through its group's."""
        what = ("list", f"{plural}.{group}" if group else plural, namespace or "")
        options = {"label_selector": selector} if selector else {}
        if not group:
            core = self._client.CoreV1Api(self.api)
            found = (self._call(what, core.list_namespaced_pod, namespace, **options) if namespace
                     else self._call(what, core.list_pod_for_all_namespaces, **options))
        else:
            custom = self._client.CustomObjectsApi(self.api)
            found = (self._call(what, custom.list_namespaced_custom_object, group, version, namespace, plural,
                                **options) if namespace
                     else self._call(what, custom.list_cluster_custom_object, group, version, plural, **options))
        return None if found is None else found.get("items") or []

    # -- the source interface ---------------------------------------------------------------

    def snapshot(self, namespace: str | None, names: list[str]) -> Snapshot:
        """Every object of the named jobs (every job, without names) in `namespace` (None: every namespace)."""
        selector = f"{LABEL_JOB} in ({','.join(names)})" if names else LABEL_JOB
        snapshot = Snapshot(jobs=self._list("batch", "v1", "jobs", namespace, selector) or [],
                            jobsets=self._list(*JOBSETS, namespace, selector) or [],
                            pods=self._list("", "v1", "pods", namespace, selector) or [])
        queued = [(kind, o) for kind, objects in (("Job", snapshot.jobs), ("JobSet", snapshot.jobsets)) for o in objects
                  if QUEUE_LABEL in ((o.get("metadata") or {}).get("labels") or {})]
        if queued:
            for each in sorted({o["metadata"].get("namespace", "default") for _, o in queued}):
                workloads = self._list(*WORKLOADS, each, "")
                if workloads is None:
                    kind, name = queued[0][0], queued[0][1]["metadata"]["name"]
                    raise StatusError(
                        f"{kind} {name} is queued with Kueue ({QUEUE_LABEL}), but the cluster has no "
                        f"Kueue CRDs ({WORKLOADS[2]}.{WORKLOADS[0]}/{WORKLOADS[1]}): install Kueue v0.17 or later, or "
                        "remove the job's queue")
                snapshot.workloads += workloads
        for group in POD_GROUPS:
            snapshot.podgroups += self._list(*group, namespace, selector) or []
        for node in sorted({(p.get("spec") or {}).get("nodeName") for p in snapshot.pods} - {None, ""}):
            found = self._call(("get", "nodes", ""), self._client.CoreV1Api(self.api).read_node, node)
            if found is not None:
                snapshot.nodes[node] = found
        return snapshot

    def log(self, namespace: str, pod: str, tail: int | None = None, container: str = MAIN_CONTAINER) -> list[str]:
        found = self._call(("get", "pods/log", namespace), self._client.CoreV1Api(self.api).read_namespaced_pod_log,
                           pod, namespace, container=container, stream=True, timeout=LOG_TIMEOUT, failed=f"pod {pod}",
                           **({"tail_lines": tail} if tail else {}))
        return [] if found is None else found.data.decode(errors="replace").splitlines()

    def follow(self, namespace: str, pod: str, container: str = MAIN_CONTAINER) -> Iterator[str]:
        """The pod's log lines as they come, until its container stops."""
        found = self._call(("get", "pods/log", namespace), self._client.CoreV1Api(self.api).read_namespaced_pod_log,
                           pod, namespace, container=container, follow=True, stream=True, timeout=None,
                           failed=f"pod {pod}")
        if found is None:
            return
        pending = b""
        for chunk in found.stream(4096, decode_content=True):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            yield from (line.decode(errors="replace") for line in lines)
        if pending:
            yield pending.decode(errors="replace")


def _current_context(kubeconfig: str | None) -> str:
    from kubernetes import config

    try:
        return config.list_kube_config_contexts(config_file=kubeconfig)[1]["name"]
    except Exception:   # an in-cluster or odd config: the name is only for messages
        return "(current)"


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason or exc).split(": ", 1)[-1] if reason else str(exc)


def _message(body: bytes | str) -> str:
    """The API server's message in an error's body (a Status object), else the body itself."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    try:
        return json.loads(text).get("message", "") or text.strip()
    except (ValueError, AttributeError):
        return text.strip()
