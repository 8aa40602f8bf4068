"""A platform program: a team's training namespace, the defaults its jobs inherit, and the jobs.

The platform team sets up the namespace once (TrainingNamespace: the Namespace, the `trainer`
ServiceAccount, a checkpoints claim that outlives every job) and says once what every job inherits
(a PlatformProfile: namespace, service account, GPU pool, priority, labels for cost, shm size, failure
policy). The jobs then say only what is theirs. The Hugging Face token comes from secret config
(`pulumi config set --secret hfToken ...`); the trainer image is an output of the stack that builds
images. Every job argument that passes a value into the objects takes these Outputs as they are: the
jobs' objects land in the namespace, depend on what they use, and keep the token secret.
"""

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import Initializer, JaxTrainJob, TorchTrainJob, TorchTrainJobArgs, TrainingNamespace

config = pulumi.Config()
hf_token = config.require_secret("hfToken")
image = pulumi.StackReference(config.require("imagesStack")).require_output("trainerImage")

team = TrainingNamespace(config.require("team"), {"checkpoints_size": "2Ti", "labels": {"team": config.require("team")}})
token = k8s.core.v1.Secret("hf-token", metadata={"name": "hf-token", "namespace": team.namespace},
                           string_data={"HF_TOKEN": hf_token})

# What every job of the team inherits; a job's own arguments override it.
profile = team.profile(
    labels={"team": config.require("team"), "cost-center": "research"},
    node_selector={"nvidia.com/gpu.product": "H100-SXM"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    priority_class_name="training",
    shm_size="16Gi",
    volumes=[{"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}}],
    volume_mounts=[{"name": "checkpoints", "mountPath": "/checkpoints"}],
)

# Typed arguments, with IDE completion; any value may be an Output.
pretrain = TorchTrainJob("pretrain", TorchTrainJobArgs(
    profile=profile,
    image=image,
    command=["torchrun", "-m", "train.pretrain"],
    num_nodes=4,
    resources_per_node={"limits": {"nvidia.com/gpu": "8"}},
    env={"HF_TOKEN": hf_token, "WANDB_PROJECT": "pretrain"},
))

# The same as a dict, as stack config would give it; the dataset initializer reads the token Secret.
finetune = TorchTrainJob("finetune", {
    "profile": profile,
    "image": image,
    "command": ["torchrun", "-m", "train.finetune"],
    "num_nodes": 2,
    "resources_per_node": {"limits": {"nvidia.com/gpu": "4"}},
    "dataset_initializer": Initializer(storage_uri="hf://acme/instructions", secret_name=token.metadata.name),
    "workspace_access_mode": "ReadWriteMany",
})

# Evaluation needs less of the GPU pool: one GPU per pod, and no priority over training.
evaluate = JaxTrainJob("evaluate", {
    "profile": profile,
    "image": image,
    "command": ["python", "-m", "train.evaluate"],
    "num_nodes": 2,
    "resources_per_node": {"limits": {"nvidia.com/gpu": "1"}},
    "priority_class_name": "batch",
})

pulumi.export("master_addr", pretrain.master_addr)
pulumi.export("coordinator", evaluate.coordinator_address)
