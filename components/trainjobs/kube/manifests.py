"""Plain Kubernetes object parts every job's objects share: the job's labels and Pulumi's await
annotations, metadata blocks, the completion-index env var, a pod on its node's network. Nothing here
knows a framework or the job's arguments (trainjobs.core.objects builds from those)."""

from typing import Any

from trainjobs.kube.naming import COMPLETION_INDEX_ANNOTATION

LABEL_JOB = "trainjobs.io/job-name"
LABEL_ROLE = "trainjobs.io/role"
LABEL_RUN = "trainjobs.io/run"
RESERVED_LABELS = (LABEL_JOB, LABEL_ROLE, LABEL_RUN)
# On the object that holds an elastic job's training pods: the fewest it trains with (min_nodes), where the
# object itself says only the most; every tool that counts pods reads it.
MIN_PODS = "trainjobs.io/min-pods"
COMPLETION_INDEX_FIELD = f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"
SKIP_AWAIT = "pulumi.com/skipAwait"
TIMEOUT_SECONDS = "pulumi.com/timeoutSeconds"
WAIT_FOR = "pulumi.com/waitFor"
# What `pulumi up` awaits of a Job it does not wait for: that it exists. Unlike skipAwait, which pulumi-kubernetes
# also applies to a Job's deletion, waitFor leaves deletion awaited, so a replacement Job of the same name is
# created only once the old one and its pods are gone.
EXISTS = "jsonpath={.metadata.uid}"
MAIN_CONTAINER = "node"
SHM_VOLUME = "dshm"
SERVICE_ROLE = "network"


def completion_index_env(name: str) -> dict[str, Any]:
    """An env var holding the pod's completion index (its rank among the Job's pods), by the downward API."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}}


def metadata(name: str, namespace: str | None, labels: dict, annotations: dict) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def host_network(pod: dict[str, Any]) -> None:
    """The pod on its node's network. Its DNS policy becomes ClusterFirstWithHostNet, as with the default
    policy a host-network pod resolves through the node's resolver and cannot find the job's Service or
    its peers. Each container port is declared as the same host port (what the API server would default):
    the scheduler then places at most one pod using a port on each node, instead of a second pod failing
    to bind it."""
    pod["hostNetwork"] = True
    pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    for field in ("initContainers", "containers"):
        if field in pod:
            pod[field] = [{**c, "ports": [{**p, "hostPort": p["containerPort"]} for p in c["ports"]]} if c.get("ports")
                          else c for c in pod[field]]


def metadata_without_name(labels: dict, annotations: dict) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta
