"""An MPI job whose launcher runs a plain `mpirun python hello.py` (or `mpiexec ...`).

The stack config picks the MPI implementation, the number of hosts and slots, whether the launcher
is one of the hosts, and who runs it: root with keys in /root/.ssh, or the unprivileged `mpiuser`
(uid 1000) with Kubeflow's layout (keys in /home/mpiuser/.ssh, sshd on port 2222 started from
/home/mpiuser/.sshd_config). That user, its home and ~/.sshd_config are the `image`'s (one of
mpi-operator's, or Kubeflow's runtime image for DeepSpeed and MLX), which run-local sets up in each pod
as the image has them. The root jobs' image is unknown to run-local: their pods get only sshd's
privilege separation directory, and the workers make their own host key. `mpi_venv` (given by the test) is a
virtualenv holding mpi4py and, except for Debian's OpenMPI, the MPI itself; it comes first on the
job's PATH as it would in an image. The script ships as a ConfigMap.

`python` is found on every host through the PATH forwarded with the job's env: ranks started over
ssh get sshd's environment, and only the launcher's env makes OpenMPI (OMPI_MCA_mca_base_env_list)
or Hydra (by default) give them the job's. The E2E_* variables show what reaches them.

`export` (comma-separated names) makes the command `mpirun -x NAME ... python <script>`.

Worker faults for the lifecycle tests: `sshd_delay` starts every worker's sshd that many seconds
late, `missing_index` makes that worker never start sshd.
"""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from trainjobs import DeepSpeedTrainJob, MlxTrainJob, MpiRuntime, MpiTrainJob, PodTemplate

HERE = Path(__file__).resolve().parent
KINDS = {"MpiTrainJob": MpiTrainJob, "DeepSpeedTrainJob": DeepSpeedTrainJob, "MlxTrainJob": MlxTrainJob}
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

config = pulumi.Config()
name = config.require("name")
kind = config.get("kind") or "MpiTrainJob"
script = config.get("script") or "hello.py"
user = config.get("user") or "root"
sshd_delay = config.get_int("sshd_delay") or 0
missing_index = config.get_int("missing_index")
venv = config.require("mpi_venv")


# Kubeflow's runtimes run as their image's mpiuser.
SECURITY_CONTEXT = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}


def sshd_command() -> list[str]:
    """The workers' container: sshd in the foreground, set up as an sshd image would be."""
    steps = []
    if missing_index is not None:
        steps.append(f'if [ "$JOB_COMPLETION_INDEX" = {missing_index} ]; then '
                     'echo "this worker never starts sshd"; exec sleep 3600; fi')
    if sshd_delay:
        steps.append(f"echo 'sshd starts in {sshd_delay}s'; sleep {sshd_delay}")
    if user == "root":
        steps += ["ssh-keygen -q -t ed25519 -N '' -f /tmp/ssh_host_ed25519_key",
                  "exec /usr/sbin/sshd -De -o PidFile=/tmp/sshd.pid -o HostKey=/tmp/ssh_host_ed25519_key "
                  "-o StrictModes=no"]
    else:
        steps.append(f"exec /usr/sbin/sshd -De -f /home/{user}/.sshd_config")
    return ["/bin/sh", "-c", "; ".join(steps)]


def runtime() -> MpiRuntime:
    pod = {} if user == "root" else {"security_context": SECURITY_CONTEXT}
    return MpiRuntime(
        name=f"e2e-{user}-sshd",
        launcher=PodTemplate(**pod),
        node=PodTemplate(**pod, command=sshd_command()),
        mpi_implementation=config.get("implementation") or "OpenMPI",
        ssh_auth_mount_path="/root/.ssh" if user == "root" else f"/home/{user}/.ssh",
        ssh_port=22 if user == "root" else 2222,
    )


code = k8s.core.v1.ConfigMap(f"{name}-code", metadata={"name": f"{name}-code", "namespace": config.get("namespace")},
                             data={script: (HERE / script).read_text()})
args = {
    # Not pulled by run-local; a real cluster needs an image with the MPI, mpi4py and sshd set up like this machine
    # (the tests give mpi-operator's images for mpiuser).
    "image": config.get("image") or "localhost/trainjobs-e2e-mpi:latest",
    "num_nodes": config.require_int("num_nodes"),
    "num_proc_per_node": config.get_int("slots") or 1,
    # mpirun/mpiexec and python from PATH, no flags (`export`: `-x NAME` for each name it lists).
    "command": [config.get("launcher") or "mpirun", *[arg for name in (config.get("export") or "").split(",") if name
                                                      for arg in ("-x", name)], "python", f"/opt/e2e/{script}"],
    "env": {
        "PATH": f"{venv}/bin:{SYSTEM_PATH}",
        "OMP_NUM_THREADS": "1",
        "E2E_MARKER": "from the job's env",
        "E2E_FLAGS": "--a=1 --b=2",   # OpenMPI would cut it at its first "=" if forwarded by name
        "E2E_LIST": "x;y",            # the separator of OpenMPI's list, inside a value
        **(config.get_object("env") or {}),
    },
    "volumes": [{"name": "code", "configMap": {"name": f"{name}-code"}}],
    "volume_mounts": [{"name": "code", "mountPath": "/opt/e2e", "readOnly": True}],
    "launcher_wait_timeout_seconds": config.get_int("launcher_wait_timeout_seconds") or 60,
}
for key in ("mpi_implementation", "namespace", "backend"):
    if config.get(key):
        args[key] = config.get(key)
if config.get_bool("run_launcher_as_node") is not None:
    args["run_launcher_as_node"] = config.get_bool("run_launcher_as_node")
if kind == "MpiTrainJob":
    args["runtime"] = runtime()
else:
    del args["image"]  # Kubeflow's built-in runtime as is: its image, its user

# The job's SSH key from the stack (tests/cluster gives one of tests/mpi_keys under `pulumi up`, whose CLI has no TLS
# provider to make one), else made at deploy time.
if config.get("ssh_private_key"):
    args["ssh_private_key"] = config.get_secret("ssh_private_key")

job = KINDS[kind](name, args, pulumi.ResourceOptions(depends_on=[code]))
pulumi.export("hosts", job.hosts)
