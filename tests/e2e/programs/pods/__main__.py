"""Jobs described in config, plus the ConfigMaps and Secrets they use.

    config:
      e2e-pods:configMaps: {NAME: {KEY: VALUE or "@file next to this program"}}
      e2e-pods:secrets: {NAME: {KEY: VALUE}}
      e2e-pods:claims: [NAME]        # PersistentVolumeClaims
      e2e-pods:jobs: [{name: NAME, <TorchTrainJob arguments>}]

TorchTrainJob is used for its pods only: the commands here are plain programs.
"""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import TorchTrainJob

HERE = Path(__file__).resolve().parent
config = pulumi.Config()


def value(text: str) -> str:
    return (HERE / text[1:]).read_text() if text.startswith("@") else text


objects = [k8s.core.v1.ConfigMap(name, metadata={"name": name}, data={k: value(v) for k, v in data.items()})
           for name, data in (config.get_object("configMaps") or {}).items()]
objects += [k8s.core.v1.Secret(name, metadata={"name": name}, string_data=data)
            for name, data in (config.get_object("secrets") or {}).items()]
objects += [k8s.core.v1.PersistentVolumeClaim(name, metadata={"name": name}, spec={
                "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}})
            for name in config.get_object("claims") or []]
for spec in config.require_object("jobs"):
    spec = dict(spec)
    TorchTrainJob(spec.pop("name"), spec, pulumi.ResourceOptions(depends_on=objects))
