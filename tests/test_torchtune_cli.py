"""The rendered `tune run` command against real torchtune: its own CLI parses it and picks the intended
launch (torchrun or single device), torchrun's launch config comes out as intended, the recipe and
config exist in torchtune's recipe registry, and the recipe's own config parser merges every override.

Nothing is trained: torchrun's launcher and the single-device `runpy` call are replaced by recorders.
torchtune comes with the `e2e` extra (`pip install -e '.[test,e2e]'`); in CI (CI set) a missing
torchtune fails these tests instead of skipping them.
"""

import itertools
import os
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainjobs import (TORCHTUNE_LLAMA3_2_1B, TORCHTUNE_LLAMA3_2_3B, TORCHTUNE_QWEN2_5_1_5B, PodTemplate,
                       TorchTuneRuntime, TorchTuneTrainJob, TrainJobError)
from trainjobs.pipeline.pipeline import derive
from trainjobs.testing import run
from trainjobs.families.torchtune import SUPPORTED_MODELS, TORCHTUNE, TORCHTUNE_CONFIGS, TorchTuneTrainJobArgs, TuneRun


@pytest.fixture(scope="module")
def tt() -> SimpleNamespace:
    """torchtune's CLI, recipe registry and config parser, imported here rather than at collection: torch,
    torchao and torchtune take seconds of CPU to import, and only the worker that runs these tests needs them."""
    if os.environ.get("CI"):
        import torchtune  # noqa: F401  (must be installed in CI)
    else:
        pytest.importorskip("torchtune", reason="torchtune is not installed: pip install -e '.[test,e2e]'")
    import torchtune._cli.run as tune_cli_run
    from torch.distributed.run import config_from_args
    from torchtune._cli.tune import TuneCLIParser
    from torchtune._recipe_registry import get_all_recipes
    from torchtune.config import validate
    from torchtune.config._parse import TuneRecipeArgumentParser
    from torchtune.config._utils import _merge_yaml_and_cli_args

    return SimpleNamespace(
        cli_run=tune_cli_run, config_from_args=config_from_args, TuneCLIParser=TuneCLIParser, validate=validate,
        TuneRecipeArgumentParser=TuneRecipeArgumentParser, merge=_merge_yaml_and_cli_args,
        registry={recipe.name: {config.name for config in recipe.configs} for recipe in get_all_recipes()},
        recipes={recipe.name: recipe for recipe in get_all_recipes()})


LORA = "model.lora_attn_modules=[q_proj,v_proj]"
QLORA = [LORA, "model.quantize_base=True"]
USER = ["batch_size=2", "epochs=1", "dtype=bf16"]
LLAMA3_3_70B = TorchTuneRuntime(
    name="torchtune-llama3.3-70b",
    node=PodTemplate(image="ghcr.io/kubeflow/trainer/torchtune-trainer:v2.3.0",
                     resources={"limits": {"nvidia.com/gpu": 8}},
                     command=["tune", "run", "full_finetune_distributed", "--config", "llama3_3/70B_full",
                              "output_dir=/workspace/output",
                              "tokenizer.path=/workspace/model/original/tokenizer.model",
                              "checkpointer.checkpoint_dir=/workspace/model"]),
)
RUNTIMES = [TORCHTUNE_LLAMA3_2_1B, TORCHTUNE_LLAMA3_2_3B, TORCHTUNE_QWEN2_5_1_5B, LLAMA3_3_70B]
ONE_GPU = {"limits": {"nvidia.com/gpu": 1}}
IMAGE_ONLY_COMPONENTS = {"bitsandbytes.optim.PagedAdamW", "bitsandbytes.optim.PagedAdamW8bit"}

# Every branch of the selection table, on every runtime where it is accepted.
CASES = {
    "qlora-single-device": ({"resources_per_node": ONE_GPU, "args": [*QLORA, *USER]}, [TORCHTUNE_LLAMA3_2_1B,
                                                                                         TORCHTUNE_LLAMA3_2_3B]),
    "lora-single-device": ({"num_proc_per_node": 1, "args": [LORA, *USER]}, RUNTIMES[:3]),
    "full-single-device": ({"resources_per_node": ONE_GPU, "args": USER}, RUNTIMES[:3]),
    "qlora-distributed": ({"args": [*QLORA, *USER]}, [LLAMA3_3_70B]),
    "lora-distributed": ({"args": [LORA, *USER]}, RUNTIMES),
    "full-multinode": ({"num_nodes": 2, "args": USER}, [LLAMA3_3_70B]),
    "full-distributed": ({"args": USER}, RUNTIMES),
    "full-distributed-cpu": ({"resources_per_node": {"limits": {"nvidia.com/gpu": 0, "cpu": 4}}}, RUNTIMES[:3]),
    "runtime-defaults": ({}, RUNTIMES),
}
PARAMS = [pytest.param(runtime, job, id=f"{runtime.name}-{case}")
          for case, (job, runtimes) in CASES.items() for runtime in runtimes]


def test_config_table_matches_torchtunes_registry(tt):
    for config, recipe in TORCHTUNE_CONFIGS.items():
        assert config in tt.registry[recipe], f"{config} is not a {recipe} config in torchtune"
    # ... and misses none a supported model has for the four recipes the selection uses.
    suffixes = ("_full_single_device", "_lora_single_device", "_qlora_single_device", "_full", "_full_multinode",
                "_lora", "_qlora")
    for recipe in ("full_finetune_single_device", "full_finetune_distributed", "lora_finetune_single_device",
                   "lora_finetune_distributed"):
        for config in tt.registry[recipe]:
            if any(config == model + suffix for model in SUPPORTED_MODELS for suffix in suffixes):
                assert TORCHTUNE_CONFIGS.get(config) == recipe


def test_every_accepted_combination_names_a_real_recipe_and_config(tt):
    accepted = set()
    modes = {"full": [], "lora": [LORA], "qlora": QLORA, "dora": [*QLORA, "model.use_dora=True"]}
    for runtime, num_nodes, nproc, gpus, mode in itertools.product(
            RUNTIMES, (1, 2, 3), ("auto", 1, 2, 8), (0, 1, 2, 8), modes):
        resources = {"limits": {"nvidia.com/gpu": gpus, "cpu": 4}}
        args = TorchTuneTrainJobArgs(runtime=runtime, num_nodes=num_nodes, num_proc_per_node=nproc,
                                     resources_per_node=resources, args=modes[mode] or None)
        try:
            plan = derive(TORCHTUNE, "ft", args)
        except TrainJobError:
            continue
        recipe, config = plan.outputs.recipe, plan.outputs.config
        assert config in tt.registry[recipe], (runtime.name, num_nodes, nproc, gpus, mode, recipe, config)
        accepted.add(config)
    assert accepted == set(TORCHTUNE_CONFIGS)   # every config of the table is reachable


def rendered(runtime, job):
    result = run(lambda: TorchTuneTrainJob("ft", {"runtime": runtime, **job}))
    node = result.get("Job", "ft-node-0").manifest["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "0") for e in node["env"]}   # PET_NODE_RANK: pod 0's index
    return node["command"], node.get("args", []), env


class Launch:
    """What `tune run` would have started: torchrun's args, or the single-device script and argv."""

    def __init__(self, tt, monkeypatch):
        self.torchrun = None
        self.script = None
        self.argv = None
        monkeypatch.setattr(tt.cli_run, "run", self._torchrun)
        monkeypatch.setattr(runpy, "run_path", self._run_path)

    def _torchrun(self, args):
        self.torchrun = args

    def _run_path(self, path, run_name=None):
        self.script, self.argv = path, list(sys.argv)


def tune_run(tt, monkeypatch, command, args, env):
    """Run torchtune's own `tune run` on the rendered command and args, in the pod's env."""
    assert command[:2] == ["tune", "run"]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(sys, "argv", [*command, *args])
    monkeypatch.setattr(sys, "path", list(sys.path))
    launch = Launch(tt, monkeypatch)
    parser = tt.TuneCLIParser()   # torchrun's options read their PET_* defaults now
    namespace = parser._parser.parse_args([*command[1:], *args])
    namespace.func(namespace)
    return launch


def recipe_config(tt, recipe_args):
    """The config the recipe would build: torchtune's recipe parser plus its merge of the overrides."""
    yaml_args, overrides = tt.TuneRecipeArgumentParser().parse_known_args(recipe_args)
    return tt.merge(yaml_args, overrides)


@pytest.mark.parametrize("runtime, job", PARAMS)
def test_tune_run_accepts_the_rendered_command(tt, monkeypatch, runtime, job):
    command, args, env = rendered(runtime, job)
    launch = tune_run(tt, monkeypatch, command, args, env)

    rdzv = [part for part in command if part.startswith("--rdzv_endpoint=")]
    recipe, config = command[2 + len(rdzv)], command[4 + len(rdzv)]
    assert command[3 + len(rdzv)] == "--config"
    assert config in tt.registry[recipe]
    recipe_file = str(Path(tt.cli_run.ROOT / "recipes" / tt.recipes[recipe].file_path))
    config_file = next(str(Path(tt.cli_run.ROOT / "recipes" / "configs" / c.file_path))
                       for c in tt.recipes[recipe].configs if c.name == config)
    expected_recipe_args = ["--config", config_file, *command[5 + len(rdzv):], *args]

    if rdzv:
        assert launch.script is None and launch.torchrun is not None
        assert tt.recipes[recipe].supports_distributed
        launch_config, _, script_args = tt.config_from_args(launch.torchrun)
        nodes = int(env["PET_NNODES"])
        assert (launch_config.min_nodes, launch_config.max_nodes) == (nodes, nodes)
        assert launch_config.rdzv_backend == "static"
        assert launch_config.rdzv_endpoint == "ft-node-0-0.ft:29500" == rdzv[0].split("=", 1)[1]
        assert launch_config.rdzv_configs["rank"] == 0
        if env["PET_NPROC_PER_NODE"] != "auto":
            assert launch_config.nproc_per_node == int(env["PET_NPROC_PER_NODE"])
        assert script_args == ["-u", recipe_file, *expected_recipe_args]
        recipe_args = script_args[2:]
    else:
        assert launch.torchrun is None
        assert not tt.recipes[recipe].supports_distributed and env["PET_NNODES"] == "1"
        assert (launch.script, launch.argv) == (recipe_file, [recipe_file, *expected_recipe_args])
        recipe_args = launch.argv[1:]

    cfg = recipe_config(tt, recipe_args)
    assert cfg.output_dir == "/workspace/output"
    assert cfg.checkpointer.checkpoint_dir == "/workspace/model"
    if runtime is TORCHTUNE_QWEN2_5_1_5B:
        assert (cfg.tokenizer.path, cfg.tokenizer.merges_file) == ("/workspace/model/vocab.json",
                                                                  "/workspace/model/merges.txt")
    else:
        assert cfg.tokenizer.path == "/workspace/model/original/tokenizer.model"
    if LORA in args:
        assert list(cfg.model.lora_attn_modules) == ["q_proj", "v_proj"]
    if "batch_size=2" in args:
        assert cfg.batch_size == 2
    # Every component of the config binds its arguments; optimizers from bitsandbytes (installed in
    # the torchtune-trainer image, not needed here) are only checked by name.
    image_only = [key for key, node in cfg.items() if str(getattr(node, "_component_", "")).startswith("bitsandbytes.")]
    for key in image_only:
        assert cfg[key]._component_ in IMAGE_ONLY_COMPONENTS
        del cfg[key]
    tt.validate(cfg)


def test_tune_run_refuses_several_processes_with_the_single_device_recipe(tt, monkeypatch):
    """Why num_proc_per_node > 1 on a one-GPU pod is rejected: the command Kubeflow's rules give it."""
    command = TuneRun("full_finetune_single_device", "llama3_2/1B_full_single_device", "ft-node-0-0.ft:29500",
                      ()).command()
    with pytest.raises(SystemExit):
        tune_run(tt, monkeypatch, command, [], {"PET_NNODES": "1", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": "0"})


def test_torchtune_has_no_single_device_config_for_llama3_3_70b(tt):
    """Why a single-device llama3_3/70B job is rejected."""
    for suffix in ("_full_single_device", "_lora_single_device", "_qlora_single_device"):
        assert not any("llama3_3/70B" + suffix in configs for configs in tt.registry.values())
