"""TorchTuneTrainJob: the `tune run` command rebuilt as Kubeflow Trainer v2.3 does, its built-in
runtimes, and every TorchTune validation with Kubeflow's message."""

import kubernetes_validate
import pytest

from trainjobs import (TORCHTUNE_LLAMA3_2_1B, TORCHTUNE_LLAMA3_2_3B, TORCHTUNE_QWEN2_5_1_5B, PodTemplate,
                       TorchRuntime, TorchTuneRuntime, TorchTuneTrainJob, TrainJobError)
from trainjobs.tools.cli.render import kubernetes_objects
from trainjobs.pipeline.pipeline import derive
from trainjobs.testing import run
from trainjobs.testing.checks import manifest_problems
from trainjobs.families.torchtune import (TORCHTUNE, TorchTuneTrainJobArgs, model_from_runtime_name,
                                          needs_rendezvous)

COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
IMAGE = "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.3.0"
LLAMA_OVERRIDES = ["output_dir=/workspace/output", "tokenizer.path=/workspace/model/original/tokenizer.model",
                   "checkpointer.checkpoint_dir=/workspace/model"]
LORA = "model.lora_attn_modules=[q_proj,v_proj]"
QLORA = [LORA, "model.quantize_base=True"]
ONE_GPU = {"limits": {"nvidia.com/gpu": 1}}

# No built-in 70B runtime (Kubeflow ships none); a platform team defines one like this.
LLAMA3_3_70B = TorchTuneRuntime(
    name="torchtune-llama3.3-70b",
    node=PodTemplate(image=IMAGE, resources={"limits": {"nvidia.com/gpu": 8}}, command=[
        "tune", "run", "full_finetune_distributed", "--config", "llama3_3/70B_full",
        "output_dir=/workspace/output", "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model"]),
)


def render(args, name="ft"):
    return run(lambda: TorchTuneTrainJob(name, args))


def node_of(result, name="ft"):
    return result.get("Job", f"{name}-node-0").manifest["spec"]["template"]["spec"]["containers"][0]


def rejected(args, name="ft"):
    with pytest.raises(TrainJobError) as info:
        render(args, name)
    return [(issue.field, issue.message) for issue in info.value.issues]


def issue_for(issues, field):
    found = [message for f, message in issues if f == field]
    assert len(found) == 1, issues
    return found[0]


# --- built-in runtimes -------------------------------------------------------------------------

def test_builtin_llama3_2_1b_renders_kubeflows_rebuilt_command():
    result = render({"runtime": "torchtune-llama3.2-1b", "args": ["batch_size=2", "epochs=1"]})
    node = node_of(result)
    assert node["image"] == IMAGE
    assert node["command"] == ["tune", "run", "--rdzv_endpoint=ft-node-0-0.ft:29500", "full_finetune_distributed",
                               "--config", "llama3_2/1B_full", *LLAMA_OVERRIDES]
    assert node["args"] == ["batch_size=2", "epochs=1"]
    assert node["resources"] == {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}
    assert {"name": "initializer", "mountPath": "/workspace"} in node["volumeMounts"]


@pytest.mark.parametrize("runtime, model_uri, config, tokenizer", [
    (TORCHTUNE_LLAMA3_2_1B, "hf://meta-llama/Llama-3.2-1B-Instruct", "llama3_2/1B_full",
     ["tokenizer.path=/workspace/model/original/tokenizer.model"]),
    (TORCHTUNE_LLAMA3_2_3B, "hf://meta-llama/Llama-3.2-3B-Instruct", "llama3_2/3B_full",
     ["tokenizer.path=/workspace/model/original/tokenizer.model"]),
    (TORCHTUNE_QWEN2_5_1_5B, "hf://Qwen/Qwen2.5-1.5B-Instruct", "qwen2_5/1.5B_full",
     ["tokenizer.path=/workspace/model/vocab.json", "tokenizer.merges_file=/workspace/model/merges.txt"]),
])
def test_builtin_runtimes_as_kubeflow_ships_them(runtime, model_uri, config, tokenizer):
    assert runtime.node.image == IMAGE
    assert runtime.node.command == [
        "tune", "run", "--rdzv_endpoint=localhost:29500", "full_finetune_distributed", "--config", config,
        "dataset=torchtune.datasets.instruct_dataset", "dataset.source=parquet",
        "dataset.data_dir=/workspace/dataset/data", "output_dir=/workspace/output", *tokenizer,
        "checkpointer.checkpoint_dir=/workspace/model"]
    assert runtime.node.resources.limits == {"nvidia.com/gpu": "2"}
    assert runtime.dataset_initializer.storage_uri == "hf://tatsu-lab/alpaca"
    assert runtime.model_initializer.storage_uri == model_uri

    result = render({"runtime": runtime.name})
    node = node_of(result)
    # Of the runtime's command only the managed overrides survive; dataset settings are dropped.
    assert node["command"] == ["tune", "run", "--rdzv_endpoint=ft-node-0-0.ft:29500", "full_finetune_distributed",
                               "--config", config, "output_dir=/workspace/output", *tokenizer,
                               "checkpointer.checkpoint_dir=/workspace/model"]
    assert "args" not in node
    assert result.get("Job", "ft-model-initializer-0").manifest["spec"]["template"]["spec"]["initContainers"][0][
        "env"] == [{"name": "STORAGE_URI", "value": model_uri}]
    assert result.get("Job", "ft-dataset-initializer-0").manifest["spec"]["template"]["spec"]["initContainers"][0][
        "env"] == [{"name": "STORAGE_URI", "value": "hf://tatsu-lab/alpaca"}]
    assert result.get("PersistentVolumeClaim", "ft-initializer").manifest["spec"] == {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}


@pytest.mark.parametrize("runtime", ["torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b"])
def test_builtin_runtimes_render_schema_valid_objects(runtime):
    objects = kubernetes_objects(render({"runtime": runtime, "namespace": "ml", "args": [LORA, "batch_size=2"]}))
    assert sorted(o["metadata"]["name"] for o in objects) == [
        "ft", "ft-dataset-initializer-0", "ft-initializer", "ft-model-initializer-0", "ft-node-0"]
    for obj in objects:
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    assert manifest_problems(objects) == []


def test_env_has_no_master_address_and_the_trainer_port():
    result = render({"runtime": "torchtune-llama3.2-1b", "num_nodes": 1, "env": {"HF_HUB_OFFLINE": "1"}})
    node = node_of(result)
    assert node["env"] == [
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        {"name": "PET_NNODES", "value": "1"},
        {"name": "PET_NPROC_PER_NODE", "value": "auto"},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
    ]
    assert node["ports"] == [{"containerPort": 29500}]


def test_outputs():
    plan = derive(TORCHTUNE, "ft", TorchTuneTrainJobArgs(runtime="torchtune-qwen2.5-1.5b", args=[LORA]))
    assert plan.outputs.model_dump() == {
        "service_name": "ft", "job_name": "ft-node-0", "model": "qwen2_5/1.5B", "recipe": "lora_finetune_distributed",
        "config": "qwen2_5/1.5B_lora", "rdzv_endpoint": "ft-node-0-0.ft:29500", "num_nodes": 1,
        "num_proc_per_node": "auto", "namespace": None, "requests": {"nvidia.com/gpu": "2"}}


def test_env_injection_gives_sidecars_all_five_torch_variables():
    result = render({"runtime": "torchtune-llama3.2-1b", "sidecars": [{"name": "probe", "image": "probe:1"}],
                     "env_injection": ["probe"]})
    pod = result.get("Job", "ft-node-0").manifest["spec"]["template"]["spec"]
    probe = next(c for c in pod["initContainers"] if c["name"] == "probe")
    assert [e["name"] for e in probe["env"]] == [
        "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"]
    assert {"name": "PET_MASTER_ADDR", "value": "ft-node-0-0.ft"} in probe["env"]
    assert "PET_MASTER_ADDR" not in [e["name"] for e in node_of(result)["env"]]


def test_job_overrides_the_runtime_image_and_initializers():
    result = render({"runtime": "torchtune-llama3.2-1b", "image": "registry.local/torchtune:1",
                     "model_initializer": {"secret_name": "hf-token"}})
    assert node_of(result)["image"] == "registry.local/torchtune:1"
    init = result.get("Job", "ft-model-initializer-0").manifest["spec"]["template"]["spec"]["initContainers"][0]
    assert init["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    assert init["env"] == [{"name": "STORAGE_URI", "value": "hf://meta-llama/Llama-3.2-1B-Instruct"}]


# --- model, recipe and config ---------------------------------------------------------------------

@pytest.mark.parametrize("runtime_name, model", [
    ("torchtune-llama3.2-1b", "llama3_2/1B"),
    ("torchtune-llama3.2-3b", "llama3_2/3B"),
    ("torchtune-llama3.3-70b", "llama3_3/70B"),
    ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B"),
    ("torchtune-llama3.2", ""),
    ("torchtune-llama3.2-1b-extra", ""),
    ("", ""),
])
def test_model_from_runtime_name_as_kubeflow(runtime_name, model):
    assert model_from_runtime_name(runtime_name) == model


def test_explicit_model_wins_over_the_runtime_name():
    runtime = TORCHTUNE_LLAMA3_2_1B.model_copy(update={"name": "team-finetune", "model": "llama3_2/3B"})
    node = node_of(render({"runtime": runtime}))
    assert node["command"][3:6] == ["full_finetune_distributed", "--config", "llama3_2/3B_full"]


GPUS = lambda n: {"limits": {"nvidia.com/gpu": n}}  # noqa: E731


@pytest.mark.parametrize("runtime, job, recipe, config, rdzv", [
    # one node, one process or one GPU: single device, plain `tune run` (no torchrun)
    (TORCHTUNE_LLAMA3_2_1B, {"num_proc_per_node": 1, "args": QLORA}, "lora_finetune_single_device",
     "llama3_2/1B_qlora_single_device", False),
    (TORCHTUNE_LLAMA3_2_3B, {"resources_per_node": ONE_GPU, "args": QLORA}, "lora_finetune_single_device",
     "llama3_2/3B_qlora_single_device", False),
    (TORCHTUNE_QWEN2_5_1_5B, {"resources_per_node": ONE_GPU, "args": [LORA]}, "lora_finetune_single_device",
     "qwen2_5/1.5B_lora_single_device", False),
    (TORCHTUNE_LLAMA3_2_1B, {"num_proc_per_node": 1}, "full_finetune_single_device",
     "llama3_2/1B_full_single_device", False),
    # one node, several devices
    (LLAMA3_3_70B, {"args": QLORA}, "lora_finetune_distributed", "llama3_3/70B_qlora", True),
    (TORCHTUNE_LLAMA3_2_3B, {"args": [LORA]}, "lora_finetune_distributed", "llama3_2/3B_lora", True),
    (TORCHTUNE_QWEN2_5_1_5B, {}, "full_finetune_distributed", "qwen2_5/1.5B_full", True),
    (TORCHTUNE_LLAMA3_2_1B, {"num_proc_per_node": 4}, "full_finetune_distributed", "llama3_2/1B_full", True),
    # several nodes
    (LLAMA3_3_70B, {"num_nodes": 2}, "full_finetune_distributed", "llama3_3/70B_full_multinode", True),
    # DoRA turns QLoRA off; quantize_base=False is not QLoRA; the value is case-insensitive
    (TORCHTUNE_LLAMA3_2_1B, {"args": [*QLORA, "model.use_dora=True"]}, "lora_finetune_distributed",
     "llama3_2/1B_lora", True),
    (TORCHTUNE_LLAMA3_2_1B, {"args": [LORA, "model.quantize_base=False"]}, "lora_finetune_distributed",
     "llama3_2/1B_lora", True),
    (TORCHTUNE_LLAMA3_2_1B, {"resources_per_node": ONE_GPU, "args": [LORA, "model.quantize_base=TRUE"]},
     "lora_finetune_single_device", "llama3_2/1B_qlora_single_device", False),
    # CPU pods: "auto" becomes the CPU count first
    (TORCHTUNE_LLAMA3_2_1B, {"resources_per_node": {"limits": {"nvidia.com/gpu": 0, "cpu": 4}}},
     "full_finetune_distributed", "llama3_2/1B_full", True),
    (TORCHTUNE_LLAMA3_2_1B, {"resources_per_node": {"limits": {"nvidia.com/gpu": 0, "cpu": 1}}},
     "full_finetune_single_device", "llama3_2/1B_full_single_device", False),
])
def test_recipe_and_config_selection(runtime, job, recipe, config, rdzv):
    node = node_of(render({"runtime": runtime, **job}))
    expected = ["tune", "run", *(["--rdzv_endpoint=ft-node-0-0.ft:29500"] if rdzv else []),
                recipe, "--config", config, "output_dir=/workspace/output"]
    assert node["command"][:len(expected)] == expected
    assert node.get("args") == job.get("args")


@pytest.mark.parametrize("num_nodes, nproc, gpus, expected", [
    (2, "1", 0, True),
    (1, "2", 0, True),
    (1, "8", 1, True),
    (1, "1", 8, False),
    (1, "auto", 2, True),
    (1, "auto", 1, False),
])
def test_rendezvous_only_for_several_nodes_or_devices(num_nodes, nproc, gpus, expected):
    assert needs_rendezvous(num_nodes, nproc, gpus) is expected


def test_only_the_four_managed_overrides_of_the_runtime_command_are_kept():
    runtime = TorchTuneRuntime(name="torchtune-llama3.2-1b", node=PodTemplate(image="i", command=[
        "tune", "run", "--nnodes=9", "lora_finetune_distributed", "--config", "mine.yaml", "seed=1",
        "tokenizer.merges_file=/m", "output_dir=/o", "output_dir_extra=/x", "tokenizer.path=/t",
        "checkpointer.checkpoint_dir=/c", "checkpointer.output_dir=/co"]))
    node = node_of(render({"runtime": runtime, "num_proc_per_node": 1}))
    assert node["command"] == ["tune", "run", "full_finetune_single_device", "--config",
                               "llama3_2/1B_full_single_device", "tokenizer.merges_file=/m", "output_dir=/o",
                               "tokenizer.path=/t", "checkpointer.checkpoint_dir=/c"]


def test_command_tune_run_is_accepted_and_rebuilt():
    node = node_of(render({"runtime": "torchtune-llama3.2-1b", "command": ["tune", "run"]}))
    assert node["command"][:4] == ["tune", "run", "--rdzv_endpoint=ft-node-0-0.ft:29500", "full_finetune_distributed"]


def test_a_plain_torch_runtime_is_taken_as_a_torchtune_runtime():
    runtime = TorchRuntime(name="torchtune-llama3.2-1b", node=PodTemplate(image="i"))
    node = node_of(render({"runtime": runtime, "resources_per_node": ONE_GPU}))
    assert node["command"] == ["tune", "run", "full_finetune_single_device", "--config",
                               "llama3_2/1B_full_single_device"]


# --- validations: Kubeflow Trainer's TorchTune messages ------------------------------------------

def test_unsupported_model_from_the_runtime_name():
    runtime = TorchTuneRuntime(name="torchtune-gemma2-2b", node=PodTemplate(image="i"))
    message = issue_for(rejected({"runtime": runtime}), "runtime")
    assert message.startswith("must have a supported pretrained model, invalid model configured: gemma2/2B; ")
    assert "supported: llama3_2/1B, llama3_2/3B, llama3_3/70B, qwen2_5/1.5B" in message


def test_unsupported_explicit_model_names_the_model_field():
    runtime = TorchTuneRuntime(name="mine", model="llama2/7B", node=PodTemplate(image="i"))
    message = issue_for(rejected({"runtime": runtime}), "runtime.model")
    assert message.startswith("must have a supported pretrained model, invalid model configured: llama2/7B")


@pytest.mark.parametrize("runtime, model", [("torchtune-llama3.2-1b", "llama3_2/1B"),
                                            ("torchtune-llama3.2-3b", "llama3_2/3B"),
                                            ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B")])
def test_only_llama3_3_70b_runs_on_several_nodes(runtime, model):
    assert rejected({"runtime": runtime, "num_nodes": 2}) == [("num_nodes", f"must be 1 for {model} model")]


@pytest.mark.parametrize("job", [{}, {"resources_per_node": ONE_GPU}])
def test_qlora_is_not_supported_for_qwen(job):
    issues = rejected({"runtime": "torchtune-qwen2.5-1.5b", "args": QLORA, **job})
    assert issues == [("runtime", "QLoRA is not supported for qwen2_5/1.5B model; drop model.quantize_base=True "
                                  "(LoRA is supported)")]


def test_distributed_qlora_on_llama3_2_needs_one_process():
    issues = rejected({"runtime": "torchtune-llama3.2-3b", "num_proc_per_node": 2, "args": QLORA})
    assert issue_for(issues, "num_proc_per_node") == (
        "must be auto or 1 for llama3_2/3B model when using QLoRA; torchtune has only a single-device QLoRA "
        "config for it")


def test_distributed_qlora_on_llama3_2_needs_one_gpu():
    issues = rejected({"runtime": "torchtune-llama3.2-1b", "args": QLORA})
    # num_proc_per_node is "auto" already: only the resources are wrong.
    assert issues == [("resources_per_node",
                       "must have gpu resource with value 1 for llama3_2/1B model when using QLoRA (pod has 2); "
                       "torchtune has only a single-device QLoRA config for it (or set num_proc_per_node: 1)")]


@pytest.mark.parametrize("args", [[LORA], QLORA])
def test_lora_is_not_supported_on_several_nodes(args):
    issues = rejected({"runtime": LLAMA3_3_70B, "num_nodes": 2, "args": args})
    assert issues == [("num_nodes", "LoRA fine-tuning is not supported for multi-node training in TorchTune; "
                                    "use num_nodes: 1, or drop the LoRA overrides for full fine-tuning")]


@pytest.mark.parametrize("key", ["output_dir", "tokenizer.path", "checkpointer.checkpoint_dir",
                                 "tokenizer.merges_file"])
def test_managed_overrides_are_immutable_in_args(key):
    issues = rejected({"runtime": "torchtune-qwen2.5-1.5b", "args": ["batch_size=2", f"{key}=/elsewhere"]})
    assert issues == [("args[1]", f'must not set immutable config "{key}" in trainer args; '
                                  "it is managed by the runtime")]


def test_every_problem_is_reported_at_once():
    issues = rejected({"runtime": "torchtune-llama3.2-1b", "num_nodes": 3, "args": [LORA, "output_dir=/x"],
                       "env": {"PET_NNODES": "3"}})
    assert [field for field, _ in issues] == ["env", "num_nodes", "num_nodes", "args[1]"]
    assert issue_for(issues, "env").startswith(
        "must not have reserved envs, invalid envs configured: [PET_NNODES]. PET_NNODES comes from num_nodes")


# --- validations beyond Kubeflow (combinations torchtune itself refuses) ---------------------------

def test_llama3_3_70b_has_no_single_device_config():
    issues = rejected({"runtime": LLAMA3_3_70B, "num_proc_per_node": 1})
    assert issues == [("num_proc_per_node", 'torchtune has no single-device config "llama3_3/70B_full_single_device" '
                                            'for llama3_3/70B; run on several devices (num_proc_per_node > 1, or '
                                            '"auto" with several GPUs per pod) or several nodes')]


def test_several_processes_on_one_gpu_are_refused():
    issues = rejected({"runtime": "torchtune-llama3.2-1b", "num_proc_per_node": 2, "resources_per_node": ONE_GPU})
    assert issues == [("num_proc_per_node", "2 processes on a pod with 1 GPU select the single-device recipe "
                                            "full_finetune_single_device, which tune run refuses to start under "
                                            'torchrun; use num_proc_per_node: 1 (or "auto"), or give the pod 2 GPUs')]


def test_another_command_is_refused():
    issues = rejected({"runtime": "torchtune-llama3.2-1b", "command": ["python", "train.py"]})
    assert issue_for(issues, "command").startswith('the job runs "tune run" with the recipe and config it selects')


def test_pet_rendezvous_env_is_reserved():
    issues = rejected({"runtime": "torchtune-llama3.2-1b", "env": {"PET_RDZV_BACKEND": "c10d"}})
    assert issue_for(issues, "env").startswith(
        "must not have reserved envs, invalid envs configured: [PET_RDZV_BACKEND]. PET_RDZV_BACKEND comes from "
        "the job's rendezvous")


def test_runtime_is_required_and_named_builtins_are_listed():
    assert rejected({}) == [("runtime", "Field required")]
    assert rejected({"runtime": "torchtune-llama3.3-70b"}) == [
        ("runtime", 'unknown runtime "torchtune-llama3.3-70b"; built-in torchtune runtimes: '
                    "torchtune-llama3.2-1b, torchtune-llama3.2-3b, torchtune-qwen2.5-1.5b")]
