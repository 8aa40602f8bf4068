"""TorchTrainJobs whose pods are not all training pods. `e2e-roles:scenario` picks one:

- `volcano`: `torchrun: false` on 4 pods (rank 0 the master, ranks 1-3 workers) running
  `init_process_group("gloo")` from the env and an all_reduce, plus an extra role of 4 pods that
  checks it got no training variable;
- `sidecars`: 2 torchrun-mode pods whose main container shows its env and waits for its sidecars
  to report: a native sidecar and an init container named in `env_injection`, and a sidecar
  that is not.

Scripts ship as a ConfigMap at /opt/e2e. What each pod must see is literal config here (EXPECT_*),
independent of how the library derives it.
"""

import shlex
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import TorchTrainJob

HERE = Path(__file__).resolve().parent
config = pulumi.Config()
scenario = config.require("scenario")
TRAINING_VARS = "MASTER_ADDR,MASTER_PORT,WORLD_SIZE,RANK,PET_*,JAX_*"
code_volume = {"name": "code", "configMap": {"name": f"e2e-{scenario}-code"}}
code_mount = {"name": "code", "mountPath": "/opt/e2e", "readOnly": True}


def show_env(container: str, *checks: str) -> list[str]:
    return ["python", "/opt/e2e/show_env.py", container, *checks]


code = k8s.core.v1.ConfigMap(f"e2e-{scenario}-code", metadata={"name": f"e2e-{scenario}-code"},
                             data={f: (HERE / f).read_text() for f in ("ddp.py", "show_env.py")})
opts = pulumi.ResourceOptions(depends_on=[code])

if scenario == "volcano":
    TorchTrainJob("vc", {
        "num_nodes": 4,
        "torchrun": False,
        "command": ["python", "/opt/e2e/ddp.py"],
        "env": {"OMP_NUM_THREADS": "1", "EXPECT_WORLD_SIZE": "4", "EXPECT_MASTER_ADDR": "vc-node-0-0.vc",
                "EXPECT_MASTER_PORT": "29500"},
        "volumes": [code_volume],
        "volume_mounts": [code_mount],
        "extra_roles": {"extras": {
            "image": "python:3.11-slim",
            "num_pods": 4,
            "command": show_env("extras", f"--absent={TRAINING_VARS}"),
            "env": {"OMP_NUM_THREADS": "1"},
            "volumes": [code_volume],
            "volume_mounts": [code_mount],
        }},
    }, opts)

elif scenario == "sidecars":
    # The main container ends once the sidecars have reported (a file each in a shared emptyDir),
    # so a sidecar is never stopped before it has printed.
    handshake = {"name": "handshake", "mountPath": "/handshake"}
    wait_for_sidecars = ('for f in metrics logs; do i=0; until [ -f /handshake/$f ]; do i=$((i+1)); '
                         '[ $i -gt 300 ] && { echo "sidecar $f never reported" >&2; exit 1; }; sleep 0.1; done; done')

    def sidecar(name: str, *checks: str) -> dict:
        return {"name": name, "image": "python:3.11-slim", "volumeMounts": [code_mount, handshake],
                "command": ["sh", "-c", f"{shlex.join(show_env(name, *checks))} && touch /handshake/{name} "
                                        "&& exec sleep 300"]}

    TorchTrainJob("sc", {
        "num_nodes": 2,
        "num_proc_per_node": 1,
        "command": ["sh", "-c", f'{shlex.join(show_env("node", "--present=PET_*"))} && {wait_for_sidecars}'],
        "volumes": [code_volume, {"name": "handshake", "emptyDir": {}}],
        "volume_mounts": [code_mount, handshake],
        "init_containers": [{"name": "warmup", "image": "python:3.11-slim", "volumeMounts": [code_mount],
                             "command": show_env("warmup", "--present=PET_*", "--absent=MASTER_ADDR,WORLD_SIZE,RANK")}],
        "sidecars": [sidecar("metrics", "--present=PET_*", "--absent=MASTER_ADDR,WORLD_SIZE,RANK"),
                     sidecar("logs", f"--absent={TRAINING_VARS}")],
        "env_injection": ["warmup", "metrics"],
    }, opts)

else:
    raise ValueError(f"unknown scenario {scenario!r}")
