"""The thin Pulumi layer: a family's plan becomes child resources of one component."""

import re
from typing import Any, Callable, ClassVar

import pulumi
import pulumi_kubernetes as k8s
import pulumi_tls as tls
from pydantic import BaseModel

from .args import parse_args
from .core import GeneratedSSHKey, TrainJobPlan

PACKAGE = "trainjobs"

_RESOURCE_CLASSES: dict[tuple[str, str], Callable[..., pulumi.CustomResource]] = {
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


class TrainJobComponent(pulumi.ComponentResource):
    """Base of every job component: validate, derive, then register the plan's manifests.

    Validation and derivation run before the component itself registers, so bad arguments
    raise TrainJobError and leave nothing in the stack. Each child's logical name is its
    Kubernetes name (derived from the job name), parented to the component; the caller's
    options (provider, protect, aliases, depends_on) flow to the children.
    """

    args_type: ClassVar[type[BaseModel]]
    derive: ClassVar[Callable[[str, Any], TrainJobPlan]]

    def __init__(self, name: str, args: Any, opts: pulumi.ResourceOptions | None = None) -> None:
        component = type(self).__name__
        parsed = parse_args(component, name, self.args_type, args)
        plan = type(self).derive(name, parsed)
        super().__init__(f"{PACKAGE}:index:{component}", name, None, opts)
        self.args = parsed
        self.plan = plan
        caller_depends = list((opts.depends_on if opts and isinstance(opts.depends_on, list)
                               else [opts.depends_on] if opts and opts.depends_on else []))
        self.resources: dict[str, pulumi.CustomResource] = {}
        self._keys: dict[str, tls.PrivateKey] = {}
        prerequisites: list[pulumi.Resource] = []
        by_name: dict[str, pulumi.CustomResource] = {}
        for manifest in plan.manifests:
            manifest = self._resolve_generated(manifest, caller_depends)
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            ordered_after = [by_name[before] for after, before in plan.ordering if after == object_name]
            child_opts = pulumi.ResourceOptions(
                parent=self,
                depends_on=caller_depends + (prerequisites if kind == "Job" else []) + ordered_after,
            )
            resource = self._register(manifest, child_opts)
            self.resources[f"{kind}/{object_name}"] = resource
            by_name[object_name] = resource
            if kind != "Job":
                prerequisites.append(resource)

        # Outputs resolve once every child is registered, so dependents wait for the whole job;
        # URNs are known during preview, so previews still show the values.
        registered = pulumi.Output.all(*[r.urn for r in self.resources.values()])
        outputs = {key: registered.apply(lambda _, value=value: value) for key, value in plan.outputs.items()}
        for key, value in outputs.items():
            setattr(self, key, value)
        self.register_outputs(outputs)

    def _resolve_generated(self, value: Any, caller_depends: list) -> Any:
        """Replace GeneratedSSHKey placeholders with outputs of a key pair kept in Pulumi state."""
        if isinstance(value, dict):
            return {k: self._resolve_generated(v, caller_depends) for k, v in value.items()}
        if isinstance(value, list):
            return [self._resolve_generated(v, caller_depends) for v in value]
        if isinstance(value, GeneratedSSHKey):
            key = self._keys.get(value.name)
            if key is None:
                algorithm = {"ECDSA-P521": {"algorithm": "ECDSA", "ecdsa_curve": "P521"},
                             "ED25519": {"algorithm": "ED25519"}}[value.algorithm]
                key = tls.PrivateKey(value.name, **algorithm,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=caller_depends))
                self._keys[value.name] = key
                self.resources[f"PrivateKey/{value.name}"] = key
            return key.private_key_openssh if value.part == "private" else key.public_key_openssh
        return value

    @staticmethod
    def _register(manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
        resource_class = _RESOURCE_CLASSES[(manifest["apiVersion"], manifest["kind"])]
        props = {_snake(k): v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
        return resource_class(manifest["metadata"]["name"], opts=opts, **props)
