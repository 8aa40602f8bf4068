"""A team's training namespace: the Namespace, a ServiceAccount, claims for datasets and checkpoints
that outlive every job, and a Kueue LocalQueue when the cluster queues with Kueue.

As for jobs, the objects are derived as plain manifests (`namespace_plan`, pure) and the component only
registers them. The claims belong to the namespace, not to a job: replacing a job (a changed template,
`pulumi up --replace`) never touches them, so a restarted job finds its checkpoints. With `retain_data`
(the default) the claims and the Namespace itself are registered with `retainOnDelete`: deleting or
replacing the component in Pulumi leaves them on the cluster (deleting a Namespace deletes every claim
in it, so the Namespace is kept too), and only a deliberate `kubectl delete` removes the data.
"""

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import BaseModel, ConfigDict, Field, field_validator

from trainjobs.core.args import AccessMode, Model, PlatformProfile, _quantity, parse_args
from trainjobs.core.errors import IssueCollector
from trainjobs.kube.naming import dns_subdomain_problem, labelled_name_problem, rfc1123_label_problem
from trainjobs.kube import apivalidation
from trainjobs.scheduling.kueue import QUEUE_LABEL

__all__ = ["LOCAL_QUEUE_API", "TrainingNamespace", "TrainingNamespaceArgs", "TrainingNamespaceOutputs",
           "namespace_plan"]

LOCAL_QUEUE_API = "kueue.x-k8s.io/v1beta1"   # served by every Kueue release that has LocalQueues
# Fields the CRD declares immutable (CEL `self == oldSelf`): a change must replace the object, which
# pulumi-kubernetes cannot tell for a custom resource. A LocalQueue cannot move to another ClusterQueue.
IMMUTABLE_FIELDS = {"LocalQueue": ("spec.clusterQueue",)}
DATASETS, CHECKPOINTS = "datasets", "checkpoints"


class TrainingNamespaceArgs(Model):
    """Arguments of TrainingNamespace."""

    namespace: Optional[str] = None
    """Name of the Namespace. Default: the component's name."""
    labels: Optional[dict[str, str]] = Field(default_factory=dict)
    """Labels of every object (e.g. `team`, `cost-center`)."""
    service_account_name: Optional[str] = "trainer"
    """ServiceAccount the team's training pods run as; "" creates none."""
    image_pull_secrets: Optional[list[str]] = Field(default_factory=list)
    """Names of Secrets (created in the namespace by whoever holds the credentials) the ServiceAccount pulls
    images with, so no job needs to list them."""
    datasets_size: Optional[str] = None
    """Storage request of the `datasets` claim, for data shared by the team's jobs. Default: no claim."""
    checkpoints_size: Optional[str] = None
    """Storage request of the `checkpoints` claim, where jobs keep checkpoints across restarts and
    replacements. Default: no claim."""
    storage_class: Optional[str] = None
    """Storage class of the claims. Default: the cluster's. A claim's class cannot change once created."""
    access_mode: Optional[AccessMode] = AccessMode.READ_WRITE_MANY.value
    """Access mode of the claims; the pods of a multi-node job mount them from several nodes at once."""
    kueue_cluster_queue: Optional[str] = None
    """With Kueue: the ClusterQueue the namespace's LocalQueue draws quota from. Default: no LocalQueue."""
    local_queue_name: Optional[str] = "default"
    """Name of the LocalQueue (with kueue_cluster_queue); jobs name it as their queue."""
    retain_data: Optional[bool] = True
    """Keep the claims and the Namespace on the cluster when the component is deleted or replaced in Pulumi
    (`retainOnDelete`); false deletes them, and the data, with the component."""

    @field_validator("datasets_size", "checkpoints_size", mode="before")
    @classmethod
    def _sizes(cls, value: Any) -> Any:
        return None if value is None else _quantity(value)


class TrainingNamespaceOutputs(BaseModel):
    """Outputs of TrainingNamespace."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    """The Namespace's name."""
    service_account_name: Optional[str] = None
    """The ServiceAccount's name, or none."""
    datasets_claim: Optional[str] = None
    """Name of the datasets PersistentVolumeClaim, or none."""
    checkpoints_claim: Optional[str] = None
    """Name of the checkpoints PersistentVolumeClaim, or none."""
    local_queue: Optional[str] = None
    """Name of the Kueue LocalQueue, or none."""


@dataclass(frozen=True)
class NamespacePlan:
    manifests: tuple[dict[str, Any], ...]
    outputs: TrainingNamespaceOutputs


def namespace_plan(name: str, args: TrainingNamespaceArgs) -> NamespacePlan:
    """The namespace's objects, Namespace first, or TrainJobError naming every bad argument."""
    issues = IssueCollector()
    namespace = args.namespace or name
    if problem := rfc1123_label_problem(namespace):
        issues.add("namespace" if args.namespace else "name", f"{problem}; a Namespace name is a DNS label")
    # Names of objects in the namespace, checked on their argument (the objects' own check would name the
    # namespace they are in); the same rules a job's arguments meet.
    if args.service_account_name and (problem := dns_subdomain_problem(args.service_account_name)):
        issues.add("service_account_name", f"{problem}; it names the ServiceAccount the team's pods run as")
    for i, secret in enumerate(args.image_pull_secrets or ()):
        if problem := dns_subdomain_problem(secret):
            issues.add(f"image_pull_secrets[{i}]", f"{problem}; it names a Secret in the namespace")
    # Jobs name the LocalQueue in their queue label (through profile() too), so its name is checked even
    # where this namespace creates none.
    if args.local_queue_name and (problem := labelled_name_problem(args.local_queue_name)):
        issues.add("local_queue_name", f"{problem}; jobs name the LocalQueue in their {QUEUE_LABEL} label")
    labels = {**args.labels, "app.kubernetes.io/managed-by": "trainjobs"}
    meta = {"name": namespace, "labels": labels}
    manifests: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": meta}]
    inside = {"namespace": namespace, "labels": labels}
    if args.service_account_name:
        account: dict[str, Any] = {"apiVersion": "v1", "kind": "ServiceAccount",
                                   "metadata": {"name": args.service_account_name, **inside}}
        if args.image_pull_secrets:
            account["imagePullSecrets"] = [{"name": secret} for secret in args.image_pull_secrets]
        manifests.append(account)
    elif args.image_pull_secrets:
        issues.add("image_pull_secrets", "pull secrets are given to the ServiceAccount: set service_account_name")
    claims = {}
    for claim, size in ((DATASETS, args.datasets_size), (CHECKPOINTS, args.checkpoints_size)):
        if size is None:
            continue
        spec: dict[str, Any] = {"accessModes": [args.access_mode], "resources": {"requests": {"storage": size}}}
        if args.storage_class:
            spec["storageClassName"] = args.storage_class
        manifests.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                          "metadata": {"name": claim, **inside}, "spec": spec})
        claims[claim] = claim
    queue = None
    if args.kueue_cluster_queue:
        queue = args.local_queue_name
        # The LocalQueue names a ClusterQueue (an object name).
        if problem := dns_subdomain_problem(args.kueue_cluster_queue):
            issues.add("kueue_cluster_queue", f"{problem}; it is the name of a Kueue ClusterQueue")
        manifests.append({"apiVersion": LOCAL_QUEUE_API, "kind": "LocalQueue", "metadata": {"name": queue, **inside},
                          "spec": {"clusterQueue": args.kueue_cluster_queue}})
    if not issues.issues:   # a bad name would be reported again in every object's namespace
        for problem in apivalidation.problems(manifests):
            issues.add(_argument_of(problem.path), problem.message)
    issues.raise_if_any("TrainingNamespace", name)
    return NamespacePlan(tuple(manifests), TrainingNamespaceOutputs(
        namespace=namespace, service_account_name=args.service_account_name or None,
        datasets_claim=claims.get(DATASETS), checkpoints_claim=claims.get(CHECKPOINTS), local_queue=queue))


def _argument_of(path: tuple) -> str:
    """The argument behind a refused value of the namespace's objects."""
    if path[:2] == ("metadata", "labels"):
        return "labels" + (f".{path[2]}" if len(path) > 2 else "")
    if "storage" in path:
        return "datasets_size or checkpoints_size"
    if "storageClassName" in path:
        return "storage_class"
    return "namespace"


_CLASSES = {"Namespace": k8s.core.v1.Namespace, "ServiceAccount": k8s.core.v1.ServiceAccount,
            "PersistentVolumeClaim": k8s.core.v1.PersistentVolumeClaim}


class TrainingNamespace(pulumi.ComponentResource):
    """A team's training namespace: Namespace, ServiceAccount, `datasets` and `checkpoints` claims that
    outlive every job, and a Kueue LocalQueue. `profile()` gives the PlatformProfile its jobs start from."""

    args_type = TrainingNamespaceArgs
    outputs_type = TrainingNamespaceOutputs

    def __init__(self, name: str, args: TrainingNamespaceArgs,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: a TrainingNamespaceArgs, or a dict of the same arguments."""
        parsed = parse_args("TrainingNamespace", name, TrainingNamespaceArgs, args)
        plan = namespace_plan(name, parsed)
        super().__init__("trainjobs:index:TrainingNamespace", name, None, opts)
        self.plan = plan
        self.resources: dict[str, pulumi.CustomResource] = {}
        namespace_resource = None
        for manifest in plan.manifests:
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            keep = parsed.retain_data and kind in ("Namespace", "PersistentVolumeClaim")
            immutable = list(IMMUTABLE_FIELDS.get(kind, ()))
            # Replaced by deleting it first: its name is taken until then.
            child_opts = pulumi.ResourceOptions(parent=self, retain_on_delete=keep or None,
                                                depends_on=[namespace_resource] if namespace_resource else None,
                                                replace_on_changes=immutable or None,
                                                delete_before_replace=bool(immutable) or None)
            if kind in _CLASSES:
                props = {key: value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
                props = {"image_pull_secrets" if key == "imagePullSecrets" else key: value for key, value in props.items()}
                resource = _CLASSES[kind](object_name, opts=child_opts, **props)
            else:
                resource = k8s.apiextensions.CustomResource(object_name, opts=child_opts, api_version=manifest["apiVersion"],
                                                            kind=kind, metadata=manifest["metadata"],
                                                            spec=manifest["spec"])
            namespace_resource = namespace_resource or resource
            self.resources[f"{kind}/{object_name}"] = resource
        self.namespace = namespace_resource.metadata.name   # an Output: what uses it waits for the Namespace
        self.register_outputs(dict(plan.outputs))

    def __getattr__(self, attribute: str) -> pulumi.Output:
        plan = self.__dict__.get("plan")
        if plan is None or attribute not in self.outputs_type.model_fields:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attribute!r}")
        return pulumi.Output.from_input(getattr(plan.outputs, attribute))

    def profile(self, **defaults: Any) -> PlatformProfile:
        """A PlatformProfile for the team's jobs: the namespace and the ServiceAccount (as Outputs, so each job
        is created after them), the LocalQueue with Kueue's gang admission when there is one, plus `defaults`
        (any PlatformProfile field)."""
        given: dict[str, Any] = {"namespace": self.namespace}
        account = self.plan.outputs.service_account_name
        if account:
            given["service_account_name"] = self.resources[f"ServiceAccount/{account}"].metadata.name
        if self.plan.outputs.local_queue:
            given.update(queue=self.plan.outputs.local_queue, gang_scheduler="kueue")
        return PlatformProfile(**{**given, **defaults})
