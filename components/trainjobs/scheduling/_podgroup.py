"""The PodGroup object Volcano and coscheduling share the shape of: named after the job, labelled as
every object of the job is."""

from typing import Any

from trainjobs.kube.manifests import metadata
from trainjobs.core.objects import object_labels
from trainjobs.scheduling import Gang

POD_GROUP_ROLE = "podgroup"


def pod_group(gang: Gang, api_version: str, spec: dict[str, Any]) -> dict[str, Any]:
    """PodGroup `N` (as Kubeflow Trainer and the MPI Operator name it) with the gang's spec."""
    args = gang.args
    return {"apiVersion": api_version, "kind": "PodGroup",
            "metadata": metadata(gang.name, args.namespace,
                                 object_labels(gang.name, POD_GROUP_ROLE, args.runtime, args),
                                 {**args.runtime.annotations, **args.annotations}),
            "spec": spec}
