"""A platform program: what a team gets, and the training jobs that use it.

The team's namespace and service account are created here; the Hugging Face token comes from
secret config (`pulumi config set --secret hfToken ...`); the trainer image is an output of the
stack that builds images. Every job argument that passes a value into the objects takes these
Outputs as they are: the jobs' objects land in the namespace, depend on what they use, and keep
the token secret.
"""

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import Initializer, JaxTrainJob, TorchTrainJob, TorchTrainJobArgs

config = pulumi.Config()
hf_token = config.require_secret("hfToken")
image = pulumi.StackReference(config.require("imagesStack")).require_output("trainerImage")

namespace = k8s.core.v1.Namespace("team", metadata={"name": config.require("team")})
ns = namespace.metadata.name
account = k8s.core.v1.ServiceAccount("trainer", metadata={"name": "trainer", "namespace": ns})
token = k8s.core.v1.Secret("hf-token", metadata={"name": "hf-token", "namespace": ns},
                           string_data={"HF_TOKEN": hf_token})

# Typed arguments, with IDE completion; any value may be an Output.
pretrain = TorchTrainJob("pretrain", TorchTrainJobArgs(
    namespace=ns,
    image=image,
    service_account_name=account.metadata.name,
    command=["torchrun", "-m", "train.pretrain"],
    num_nodes=4,
    resources_per_node={"limits": {"nvidia.com/gpu": "8"}},
    env={"HF_TOKEN": hf_token, "WANDB_PROJECT": "pretrain"},
    labels={"team": ns},
))

# The same as a dict, as stack config would give it; the dataset initializer reads the token Secret.
finetune = TorchTrainJob("finetune", {
    "namespace": ns,
    "image": image,
    "service_account_name": account.metadata.name,
    "command": ["torchrun", "-m", "train.finetune"],
    "num_nodes": 2,
    "resources_per_node": {"limits": {"nvidia.com/gpu": "4"}},
    "dataset_initializer": Initializer(storage_uri="hf://acme/instructions", secret_name=token.metadata.name),
    "workspace_access_mode": "ReadWriteMany",
})

evaluate = JaxTrainJob("evaluate", {
    "namespace": ns,
    "image": image,
    "service_account_name": account.metadata.name,
    "command": ["python", "-m", "train.evaluate"],
    "num_nodes": 2,
})

pulumi.export("master_addr", pretrain.master_addr)
pulumi.export("coordinator", evaluate.coordinator_address)
