"""TorchTune family: `tune run` with the recipe, config and rendezvous Kubeflow Trainer would give it.

A torchtune job is a torch job (one Indexed Job `N-node-0`, torchrun reading PET_* env) whose command
is rebuilt from scratch, as Kubeflow Trainer's torch plugin does for a TrainJob whose command is
`tune run`:

    tune run [--rdzv_endpoint=N-node-0-0.N:29500] <recipe> --config <config> <managed overrides>

with the user's torchtune overrides (`batch_size=2`, `model.lora_attn_modules=[q_proj,v_proj]`, ...)
as the container's args. The model comes from the runtime, the recipe and config from the model, the
node and device counts and the LoRA/QLoRA overrides. Of the runtime's own command only the four
overrides the runtime manages (output, tokenizer and checkpoint paths) are kept.
"""

import json
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
from pydantic import Field, field_validator

from trainjobs.core.args import Initializer, PodTemplate, Resources, TrainJobArgs, builtin_runtime
from trainjobs.pipeline.component import TrainJobComponent
from trainjobs.core.errors import IssueCollector
from trainjobs.core.family import Derivation, Family, TrainingRole
from trainjobs.core.objects import container, effective_template, gpu_count, template_env
from trainjobs.core.naming import job_name
from trainjobs.core.outputs import JobOutputs
from trainjobs.kube.templates import upsert_env
from trainjobs.families.torch import (PET_ENV, ROLE, TRAINER_PORT, TorchRuntime, checked_num_proc_per_node, inject_env, master_addr,
                                      resolve_num_proc_per_node, static_pet_env)

ENTRYPOINT = ("tune", "run")
IMAGE = "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.3.0"

LLAMA3_2_1B = "llama3_2/1B"
LLAMA3_2_3B = "llama3_2/3B"
LLAMA3_3_70B = "llama3_3/70B"
QWEN2_5_1_5B = "qwen2_5/1.5B"
SUPPORTED_MODELS = (LLAMA3_2_1B, LLAMA3_2_3B, LLAMA3_3_70B, QWEN2_5_1_5B)
MULTI_NODE_MODELS = (LLAMA3_3_70B,)

FULL_SINGLE_DEVICE = "full_finetune_single_device"
FULL_DISTRIBUTED = "full_finetune_distributed"
LORA_SINGLE_DEVICE = "lora_finetune_single_device"
LORA_DISTRIBUTED = "lora_finetune_distributed"

# The overrides a runtime manages: kept from the runtime's command, refused in the job's args.
MANAGED_OVERRIDES = ("output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file")
LORA_ATTN_MODULES = "model.lora_attn_modules"
QUANTIZE_BASE = "model.quantize_base"
USE_DORA = "model.use_dora"

# Configs of torchtune 0.6.1 (the version in the torchtune-trainer image) that the selection can
# name for a supported model, with their recipe. tests/test_torchtune_cli.py checks this table
# against torchtune's own recipe registry.
TORCHTUNE_CONFIGS = {
    "llama3_2/1B_full_single_device": FULL_SINGLE_DEVICE,
    "llama3_2/3B_full_single_device": FULL_SINGLE_DEVICE,
    "qwen2_5/1.5B_full_single_device": FULL_SINGLE_DEVICE,
    "llama3_2/1B_full": FULL_DISTRIBUTED,
    "llama3_2/3B_full": FULL_DISTRIBUTED,
    "llama3_3/70B_full": FULL_DISTRIBUTED,
    "llama3_3/70B_full_multinode": FULL_DISTRIBUTED,
    "qwen2_5/1.5B_full": FULL_DISTRIBUTED,
    "llama3_2/1B_lora_single_device": LORA_SINGLE_DEVICE,
    "llama3_2/3B_lora_single_device": LORA_SINGLE_DEVICE,
    "llama3_2/1B_qlora_single_device": LORA_SINGLE_DEVICE,
    "llama3_2/3B_qlora_single_device": LORA_SINGLE_DEVICE,
    "qwen2_5/1.5B_lora_single_device": LORA_SINGLE_DEVICE,
    "llama3_2/1B_lora": LORA_DISTRIBUTED,
    "llama3_2/3B_lora": LORA_DISTRIBUTED,
    "llama3_3/70B_lora": LORA_DISTRIBUTED,
    "llama3_3/70B_qlora": LORA_DISTRIBUTED,
    "qwen2_5/1.5B_lora": LORA_DISTRIBUTED,
}


def model_from_runtime_name(runtime_name: str) -> str:
    """The model as Kubeflow Trainer reads it from a runtime name `<any>-<family>-<size>`.

    `torchtune-llama3.2-1b` -> `llama3_2/1B`; a name without exactly three `-`-separated fields
    gives "".
    """
    fields = runtime_name.split("-")
    if len(fields) != 3:
        return ""
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}"


class TorchTuneRuntime(TorchRuntime):
    """A reusable torchtune runtime: the `node` template, its initializers and the model.

    The node template's command is the runtime's `tune run ...` command; only its managed
    overrides (`output_dir=`, `tokenizer.path=`, `checkpointer.checkpoint_dir=`,
    `tokenizer.merges_file=`) reach the job. `model` defaults to what Kubeflow reads from the
    runtime name.
    """

    model: Optional[str] = None
    """The model (e.g. `llama3_2/1B`). Default: read from the runtime's name as Kubeflow does."""

    def resolved_model(self) -> str:
        return self.model if self.model is not None else model_from_runtime_name(self.name)


def _runtime(name: str, model_uri: str, config: str, tokenizer: list[str]) -> TorchTuneRuntime:
    command = ["tune", "run", "--rdzv_endpoint=localhost:29500", FULL_DISTRIBUTED, "--config", config,
               "dataset=torchtune.datasets.instruct_dataset", "dataset.source=parquet",
               "dataset.data_dir=/workspace/dataset/data", "output_dir=/workspace/output", *tokenizer,
               "checkpointer.checkpoint_dir=/workspace/model"]
    return TorchTuneRuntime(
        name=name,
        node=PodTemplate(image=IMAGE, command=command, resources=Resources(limits={"nvidia.com/gpu": "2"})),
        dataset_initializer=Initializer(storage_uri="hf://tatsu-lab/alpaca"),
        model_initializer=Initializer(storage_uri=model_uri),
    )


_LLAMA_TOKENIZER = ["tokenizer.path=/workspace/model/original/tokenizer.model"]
TORCHTUNE_LLAMA3_2_1B = _runtime("torchtune-llama3.2-1b", "hf://meta-llama/Llama-3.2-1B-Instruct",
                                 "llama3_2/1B_full", _LLAMA_TOKENIZER)
TORCHTUNE_LLAMA3_2_3B = _runtime("torchtune-llama3.2-3b", "hf://meta-llama/Llama-3.2-3B-Instruct",
                                 "llama3_2/3B_full", _LLAMA_TOKENIZER)
TORCHTUNE_QWEN2_5_1_5B = _runtime("torchtune-qwen2.5-1.5b", "hf://Qwen/Qwen2.5-1.5B-Instruct",
                                  "qwen2_5/1.5B_full", ["tokenizer.path=/workspace/model/vocab.json",
                                                        "tokenizer.merges_file=/workspace/model/merges.txt"])
BUILTIN_RUNTIMES = {runtime.name: runtime for runtime in
                    (TORCHTUNE_LLAMA3_2_1B, TORCHTUNE_LLAMA3_2_3B, TORCHTUNE_QWEN2_5_1_5B)}


class TorchTuneTrainJobArgs(TrainJobArgs):
    """Arguments of TorchTuneTrainJob.

    `args` are torchtune config overrides (`key=value`). `command` is rebuilt by the job; it may
    only be left unset or be `["tune", "run"]`.
    """

    runtime: TorchTuneRuntime
    """A TorchTuneRuntime (a TorchRuntime is read as one, its model from its name), or the name of a built-in
    one: torchtune-llama3.2-1b, torchtune-llama3.2-3b, torchtune-qwen2.5-1.5b."""
    command: Optional[list[str]] = None
    """Leave unset (or ["tune", "run"]): the job builds the `tune run` command."""
    args: Optional[list[str]] = None
    """torchtune config overrides (`key=value`); they select the recipe and config, so they are plain."""
    num_proc_per_node: Optional[str] = "auto"
    """Processes per pod (PET_NPROC_PER_NODE): a whole number, or "auto"."""
    env_injection: Optional[list[str]] = Field(default_factory=list)
    """Names of sidecars and init containers of the trainer pods that also get the derived torch env."""

    _nproc = field_validator("num_proc_per_node", mode="before")(checked_num_proc_per_node)

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime(cls, value: Any) -> Any:
        value = builtin_runtime(value, "torchtune", BUILTIN_RUNTIMES)
        if isinstance(value, TorchRuntime) and not isinstance(value, TorchTuneRuntime):
            return TorchTuneRuntime.model_construct(**{k: getattr(value, k) for k in type(value).model_fields})
        return value


class TorchTuneOutputs(JobOutputs):
    """Outputs of TorchTuneTrainJob."""

    model: str
    """The model, e.g. `llama3_2/1B`."""
    recipe: str
    """The torchtune recipe run, e.g. `lora_finetune_distributed`."""
    config: str
    """The torchtune config, e.g. `llama3_2/1B_lora`."""
    rdzv_endpoint: Optional[str] = None
    """`<N>-node-0-0.<N>:29500` when torchrun runs (several nodes or devices), else none."""
    num_nodes: int
    """Number of trainer pods."""
    num_proc_per_node: str
    """PET_NPROC_PER_NODE as resolved: a whole number, or "auto" on GPU pods."""


def _key(arg: str) -> str:
    return arg.split("=", 1)[0]


def lora_enabled(args: list[str]) -> bool:
    """LoRA: any argument mentions `model.lora_attn_modules`."""
    return any(LORA_ATTN_MODULES in arg for arg in args)


def _bool_arg(args: list[str], item: str) -> bool:
    for arg in args:
        name, found, value = arg.partition("=")
        if found and item in name and value.strip().lower() == "true":
            return True
    return False


def qlora_enabled(args: list[str]) -> bool:
    """QLoRA: an argument whose key contains `model.quantize_base` is true, and DoRA is not on."""
    return not _bool_arg(args, USE_DORA) and _bool_arg(args, QUANTIZE_BASE)


def is_single_device(num_nodes: int, nproc: str, gpus: int) -> bool:
    """One node with one process (an explicit or derived 1) or one GPU."""
    return num_nodes == 1 and (nproc == "1" or gpus == 1)


def select_recipe(model: str, num_nodes: int, nproc: str, gpus: int, args: list[str]) -> tuple[str, str]:
    """(recipe, config) as Kubeflow Trainer chooses them; `nproc` is the resolved PET_NPROC_PER_NODE."""
    qlora, lora = qlora_enabled(args), lora_enabled(args)
    if is_single_device(num_nodes, nproc, gpus):
        if qlora:
            recipe, suffix = LORA_SINGLE_DEVICE, "_qlora_single_device"
        elif lora:
            recipe, suffix = LORA_SINGLE_DEVICE, "_lora_single_device"
        else:
            recipe, suffix = FULL_SINGLE_DEVICE, "_full_single_device"
    elif num_nodes == 1 and qlora:
        recipe, suffix = LORA_DISTRIBUTED, "_qlora"
    elif num_nodes == 1 and lora:
        recipe, suffix = LORA_DISTRIBUTED, "_lora"
    elif num_nodes > 1:
        recipe, suffix = FULL_DISTRIBUTED, "_full_multinode"
    else:
        recipe, suffix = FULL_DISTRIBUTED, "_full"
    return recipe, model + suffix


def needs_rendezvous(num_nodes: int, nproc: str, gpus: int) -> bool:
    """torchrun (the rendezvous flag) only for several nodes or several devices per node."""
    return num_nodes > 1 or (nproc != "auto" and int(nproc) > 1) or (nproc == "auto" and gpus > 1)


def rdzv_endpoint(name: str) -> str:
    return f"{master_addr(name)}:{TRAINER_PORT}"


def managed_overrides(runtime_command: list[str] | None) -> list[str]:
    """The runtime command's elements that set a managed override, in their order."""
    return [part for part in runtime_command or [] if _key(part) in MANAGED_OVERRIDES]


@dataclass(frozen=True)
class TuneRun:
    """The rebuilt `tune run` command."""

    recipe: str
    config: str
    rdzv_endpoint: str | None
    overrides: tuple[str, ...]

    def command(self) -> list[str]:
        rdzv = [f"--rdzv_endpoint={self.rdzv_endpoint}"] if self.rdzv_endpoint else []
        return [*ENTRYPOINT, *rdzv, self.recipe, "--config", self.config, *self.overrides]


def tune_run(name: str, runtime: TorchTuneRuntime, num_nodes: int, nproc: str, gpus: int,
             args: list[str]) -> TuneRun:
    recipe, config = select_recipe(runtime.resolved_model(), num_nodes, nproc, gpus, args)
    return TuneRun(recipe, config, rdzv_endpoint(name) if needs_rendezvous(num_nodes, nproc, gpus) else None,
                   tuple(managed_overrides(runtime.node.command)))


def check_torchtune(issues: IssueCollector, args: TorchTuneTrainJobArgs, run: TuneRun, nproc: str, gpus: int,
                    tune_args: list[str]) -> None:
    """Kubeflow Trainer's TorchTune checks, with their messages, plus the combinations torchtune refuses."""
    runtime = args.runtime
    model = runtime.resolved_model()
    model_field = "runtime.model" if runtime.model is not None else "runtime"
    supported = ", ".join(SUPPORTED_MODELS)
    if args.command is not None and tuple(args.command) != ENTRYPOINT:
        issues.add("command", 'the job runs "tune run" with the recipe and config it selects; leave command unset '
                              "and give torchtune overrides in args (use TorchTrainJob for another command)")
    if model not in SUPPORTED_MODELS:
        how = ("set the runtime's model" if runtime.model is not None else
               'name the runtime "<prefix>-<family>-<size>" (e.g. torchtune-llama3.2-1b) or set its model')
        issues.add(model_field, f"must have a supported pretrained model, invalid model configured: {model}; "
                                f"supported: {supported}; {how}")
    else:
        before = len(issues.issues)
        if args.num_nodes > 1 and model not in MULTI_NODE_MODELS:
            issues.add("num_nodes", f"must be 1 for {model} model")
        if "_qlora" in run.config:
            if model == QWEN2_5_1_5B:
                issues.add(model_field, f"QLoRA is not supported for {model} model; drop {QUANTIZE_BASE}=True "
                                        "(LoRA is supported)")
            if "_qlora_single_device" not in run.config and model in (LLAMA3_2_1B, LLAMA3_2_3B):
                if args.num_proc_per_node not in ("auto", "1"):
                    issues.add("num_proc_per_node", f"must be auto or 1 for {model} model when using QLoRA; "
                                                    "torchtune has only a single-device QLoRA config for it")
                issues.add("resources_per_node", f"must have gpu resource with value 1 for {model} model when "
                                                 f"using QLoRA (pod has {gpus}); torchtune has only a "
                                                 "single-device QLoRA config for it (or set num_proc_per_node: 1)")
        if len(issues.issues) == before and run.config not in TORCHTUNE_CONFIGS:
            if run.recipe in (FULL_SINGLE_DEVICE, LORA_SINGLE_DEVICE):
                issues.add("num_proc_per_node", f'torchtune has no single-device config "{run.config}" for {model}; '
                                                "run on several devices (num_proc_per_node > 1, or \"auto\" with "
                                                "several GPUs per pod) or several nodes")
            else:
                issues.add(model_field, f'torchtune has no config "{run.config}" for recipe {run.recipe}')
    if args.num_nodes > 1 and (lora_enabled(tune_args) or qlora_enabled(tune_args)):
        issues.add("num_nodes", "LoRA fine-tuning is not supported for multi-node training in TorchTune; "
                                "use num_nodes: 1, or drop the LoRA overrides for full fine-tuning")
    if run.rdzv_endpoint and run.recipe in (FULL_SINGLE_DEVICE, LORA_SINGLE_DEVICE):
        issues.add("num_proc_per_node", f"{nproc} processes on a pod with {gpus} GPU select the single-device "
                                        f"recipe {run.recipe}, which tune run refuses to start under torchrun; "
                                        f'use num_proc_per_node: 1 (or "auto"), or give the pod {nproc} GPUs')
    for i, arg in enumerate(tune_args):
        key = _key(arg)
        if key in MANAGED_OVERRIDES:
            issues.add(f"args[{i}]", f"must not set immutable config {json.dumps(key)} in trainer args; "
                                     "it is managed by the runtime")


class TorchTuneFamily(Family):
    """`tune run` under torchrun, the command rebuilt as Kubeflow Trainer's torch plugin rebuilds it."""

    component = "TorchTuneTrainJob"
    args_type = TorchTuneTrainJobArgs
    outputs_type = TorchTuneOutputs
    reserved_env = PET_ENV   # torchrun reads PET_* from the env: a stray one would override the derived launch

    def roles(self, job: Derivation) -> list[TrainingRole]:
        name, args = job.name, job.args
        template = effective_template(args.runtime.node, args)
        tune_args = list(template.args or [])
        gpus = gpu_count(template)
        nproc = resolve_num_proc_per_node(args.num_proc_per_node, template)
        run = tune_run(name, args.runtime, args.num_nodes, nproc, gpus, tune_args)
        job.derived.update(tune_args=tune_args, gpus=gpus, nproc=nproc, run=run)
        template = template.model_copy(update={"command": run.command()})
        static = static_pet_env(name, args.num_nodes, nproc)
        # As Kubeflow: the node container gets no PET_MASTER_* (the rendezvous is the flag); sidecars and
        # init containers named in env_injection get all five.
        template = inject_env(job.issues, template, args.env_injection, static)
        env = upsert_env(template_env(template), static[:3])
        node = container(template, env, ports=[{"containerPort": TRAINER_PORT}], extra_mounts=[])
        return [TrainingRole(ROLE, args.num_nodes, template, node)]

    def check(self, job: Derivation, roles: list[TrainingRole]) -> None:
        d = job.derived
        check_torchtune(job.issues, job.args, d["run"], d["nproc"], d["gpus"], d["tune_args"])

    def restart_refusal(self, job: Derivation) -> str | None:
        return ("TorchTune's recipes run with the static rendezvous Kubeflow gives them: each pod's rank is fixed "
                "when training starts, so a replaced pod cannot rejoin the running ranks")

    def outputs(self, job: Derivation, roles: list[TrainingRole]) -> TorchTuneOutputs:
        name, args, run = job.name, job.args, job.derived["run"]
        return TorchTuneOutputs.model_construct(
            service_name=name, job_name=job_name(name, ROLE), namespace=args.namespace,
            model=args.runtime.resolved_model(), recipe=run.recipe, config=run.config,
            rdzv_endpoint=run.rdzv_endpoint, num_nodes=args.num_nodes, num_proc_per_node=job.derived["nproc"])


TORCHTUNE = TorchTuneFamily()


class TorchTuneTrainJob(TrainJobComponent):
    """torchtune fine-tuning on any cluster: headless Service `N` + Indexed Job `N-node-0` running `tune run`."""

    family = TORCHTUNE

    def __init__(self, name: str, args: TorchTuneTrainJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: a TorchTuneTrainJobArgs, or a dict of the same arguments (as stack config gives them)."""
        super().__init__(name, args, opts)
