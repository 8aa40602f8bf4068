"""MPI family: mpirun over SSH from a launcher pod, with no operator.

Objects for job `N`: headless Service `N`, SSH Secret `N-mpi-ssh-auth` (a key pair generated once and
kept in Pulumi state, or the user's private key and its derived public key), hostfile ConfigMap
`N-mpi-hostfile` (with Horovod's discover_hosts.sh), launcher Job `N-launcher-0` (1 pod) and, when there
are hosts besides the launcher, node Job `N-node-0` whose pods run sshd.

Lifecycle without an operator:
- the launcher pod's init container waits, up to `launcher_wait_timeout_seconds`, until every host in
  the mounted hostfile resolves and its sshd answers, and the job's key logs in to one worker; on the
  deadline it fails naming each host it could not reach and why, and tells the workers that came up
  to exit 1;
- when the launcher's command ends, it tells every node pod its exit code over SSH; node pods then stop
  sshd and exit with that code, so success completes every Job and failure fails them.
Both read the hosts from the hostfile, not from their arguments, and reach at most 32 hosts at a time
(components/trainjobs/scripts/fan-out.sh), so the launcher Job's size does not depend on the host count.
"""

import enum
import re
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pulumi
from pydantic import Field, field_validator

from trainjobs.kube.apivalidation import MAX_ENV_STRING
from trainjobs.core.args import (EnvVar, PodTemplate, TrainingRuntime, TrainJobArgs, builtin_runtime,
                                 shared_runtime)
# The names pydantic resolves pulumi.Input's forward reference with, in the module that declares an Input field
# (ssh_private_key), so the models are complete when their classes are created (trainjobs.core.args).
from trainjobs.core.args import Output, T  # noqa: F401
from trainjobs.pipeline.component import TrainJobComponent
from trainjobs.core.errors import Issue, TrainJobError, shown
from trainjobs.core.deferred import ENCRYPTED, UNKNOWN, Derived, GeneratedSSHKey, concat
from trainjobs.core.family import Derivation, Family, TrainingRole
from trainjobs.kube.manifests import metadata
from trainjobs.core.objects import container, gpu_count, object_labels, template_env
from trainjobs.core.naming import job_name, pod_dns_name
from trainjobs.kube.naming import CLUSTER_DOMAIN
from trainjobs.core.outputs import JobOutputs
from trainjobs.scripts import script
from trainjobs.kube.templates import overlay, upsert_env

LAUNCHER, NODE, MPI_ROLE = "launcher", "node", "mpi"   # MPI_ROLE: the label role of the hostfile and key
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE = f"{HOSTFILE_DIR}/hostfile"
# Horovod's elastic mode reads the hosts that are up from this script, where the MPI Operator mounts it.
DISCOVER_HOSTS = "discover_hosts.sh"
CONTROL_DIR = "/var/run/trainjobs"
DEFAULT_SSHD = ["/usr/sbin/sshd", "-De"]
MODE_OWNER_ONLY, MODE_GROUP_READ, MODE_PUBLIC, MODE_READ_ONLY, MODE_SCRIPT = 0o600, 0o640, 0o644, 0o444, 0o555


class Implementation(str, enum.Enum):
    """The MPI implementation of the image: it decides the hostfile format and the launcher's env."""

    OPENMPI = "OpenMPI"
    INTEL_MPI = "IntelMPI"
    MPICH = "MPICH"


class SshKeyAlgorithm(str, enum.Enum):
    """Algorithm of the job's generated SSH key pair."""

    ECDSA_P521 = "ECDSA-P521"
    ED25519 = "ED25519"


class MpiRuntime(TrainingRuntime):
    """A reusable MPI runtime: launcher and node templates plus the MPI policy."""

    launcher: Optional[PodTemplate] = Field(default_factory=PodTemplate)
    """Template of the launcher pod (runs the command, e.g. mpirun)."""
    node: Optional[PodTemplate] = Field(default_factory=lambda: PodTemplate(command=DEFAULT_SSHD))
    """Template of the node pods (run sshd). Default command: /usr/sbin/sshd -De."""
    mpi_implementation: Optional[Implementation] = Implementation.OPENMPI.value
    """OpenMPI, IntelMPI or MPICH."""
    num_proc_per_node: Optional[int] = Field(default=1, ge=1)
    """Slots per host."""
    ssh_auth_mount_path: Optional[str] = "/root/.ssh"
    """Where the SSH key pair is mounted (the ssh user's ~/.ssh): an absolute path of letters, digits and
    . _ - + @, since mpirun passes it in ssh options it splits at white space."""
    ssh_port: Optional[int] = Field(default=22, ge=1, le=65535)
    """Port the node pods' sshd listens on."""
    run_launcher_as_node: Optional[bool] = False
    """Whether the launcher is also an MPI host."""


def _kubeflow_mpi_runtime(name: str, image: str) -> MpiRuntime:
    """Kubeflow's built-in MPI runtimes: non-root user 1000, sshd on 2222, launcher as a node."""
    pod = {"image": image, "security_context": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}}
    return MpiRuntime(
        name=name,
        launcher=PodTemplate(**pod),
        node=PodTemplate(**pod, command=["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]),
        ssh_auth_mount_path="/home/mpiuser/.ssh",
        ssh_port=2222,
        run_launcher_as_node=True,
    )


MPI_DISTRIBUTED = MpiRuntime(name="mpi-distributed")
DEEPSPEED_DISTRIBUTED = _kubeflow_mpi_runtime("deepspeed-distributed", "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0")
MLX_DISTRIBUTED = _kubeflow_mpi_runtime("mlx-distributed", "ghcr.io/kubeflow/trainer/mlx-runtime:v2.3.0")
BUILTIN_RUNTIMES = {runtime.name: runtime for runtime in (MPI_DISTRIBUTED, DEEPSPEED_DISTRIBUTED, MLX_DISTRIBUTED)}


class MpiTrainJobArgs(TrainJobArgs):
    """Arguments of MpiTrainJob. `command`/`args` run on the launcher; the rest applies to every pod."""

    num_proc_per_node: Optional[int] = Field(default=None, ge=1, le=100000)
    """Slots per host, or "auto" (the default): the runtime's (1), or the node's GPU count when it has several."""

    @field_validator("num_proc_per_node", mode="before")
    @classmethod
    def _auto(cls, value: Any) -> Any:
        """"auto", as torch jobs take it: the slots are then derived as when the argument is unset."""
        return None if value == "auto" else value
    mpi_implementation: Optional[Implementation] = None
    """OpenMPI, IntelMPI or MPICH. Default: the runtime's (OpenMPI). The Hydra launchers (Intel MPI, MPICH)
    connect back to the launcher by its short hostname, so they need `namespace`: pods then get the DNS
    search domain N.<namespace>.svc.<cluster_domain>."""
    run_launcher_as_node: Optional[bool] = None
    """Whether the launcher is also an MPI host. Default: the runtime's (true for DeepSpeed and MLX)."""
    ssh_auth_mount_path: Optional[str] = None
    """Where the key pair is mounted (the ssh user's ~/.ssh): an absolute path of letters, digits and
    . _ - + @. Default: the runtime's (/root/.ssh, /home/mpiuser/.ssh for Kubeflow's)."""
    ssh_key_algorithm: Optional[SshKeyAlgorithm] = SshKeyAlgorithm.ECDSA_P521.value
    """Algorithm of the generated key pair: ECDSA-P521 or ED25519."""
    ssh_private_key: Optional[pulumi.Input[str]] = None
    """The job's SSH private key instead of a generated one (which needs the pulumi-tls plugin): an
    unencrypted ECDSA or RSA key in OpenSSH or PEM format, or Ed25519 in OpenSSH format, typically
    `pulumi.Config().require_secret(...)`. Always stored as a Pulumi secret; the public key is derived
    from it."""
    launcher_wait_timeout_seconds: Optional[int] = Field(default=300, ge=1, le=2**31 - 1)
    """How long the launcher waits for every host to resolve and accept SSH before it fails."""
    cluster_domain: Optional[str] = CLUSTER_DOMAIN
    """The cluster's DNS domain, for the pods' DNS search path (Intel MPI and MPICH)."""
    runtime: Optional[MpiRuntime] = shared_runtime(MPI_DISTRIBUTED)
    """An MpiRuntime, or the name of a built-in one. Default: mpi-distributed."""

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime(cls, value: Any) -> Any:
        return builtin_runtime(value, "MPI", BUILTIN_RUNTIMES)


class DeepSpeedTrainJobArgs(MpiTrainJobArgs):
    """Arguments of DeepSpeedTrainJob: those of MpiTrainJob."""

    runtime: Optional[MpiRuntime] = shared_runtime(DEEPSPEED_DISTRIBUTED)
    """An MpiRuntime, or the name of a built-in one. Default: deepspeed-distributed."""

    @classmethod
    def unknown_hint(cls, key: str) -> str | None:
        """DeepSpeed's own settings (ZeRO stage, batch sizes, optimizer) are its config file's, not the job's."""
        return (f"DeepSpeed's own settings such as {key} go in its JSON config, which your program passes to "
                "deepspeed.initialize (e.g. args: [--deepspeed_config, ds_config.json], the file shipped with the "
                f"code or a volume); known arguments: {', '.join(cls.model_fields)}")


class MlxTrainJobArgs(MpiTrainJobArgs):
    """Arguments of MlxTrainJob: those of MpiTrainJob."""

    runtime: Optional[MpiRuntime] = shared_runtime(MLX_DISTRIBUTED)
    """An MpiRuntime, or the name of a built-in one. Default: mlx-distributed."""


class MpiOutputs(JobOutputs):
    """Outputs of the MPI family."""

    node_job_name: Optional[str] = None
    """The node Job `N-node-0`, or none when the launcher is the only host."""
    hosts: list[str]
    """MPI hosts in hostfile order."""
    slots: int
    """Slots (processes) per host."""
    num_nodes: int
    """Number of MPI hosts."""
    mpi_implementation: str
    """OpenMPI, IntelMPI or MPICH."""
    ssh_secret_name: str
    """The Secret holding the job's key pair (generated, or from ssh_private_key)."""


# mpirun passes its ssh options on as words split at white space, with quotes kept literally (OpenMPI's
# plm_rsh_args, Hydra's extra args), so the key's path can hold no character that needs quoting.
SSH_MOUNT_PATH = re.compile(r"/[A-Za-z0-9._+@/-]*")


def ssh_args(mount_path: str, port: int) -> str:
    """ssh options for mpirun: retry connects, no host-key prompts (the key dir is read-only), the job's key."""
    options = ["-o ConnectionAttempts=10", "-o StrictHostKeyChecking=no", "-o UserKnownHostsFile=/dev/null",
               "-o LogLevel=ERROR", f"-i {mount_path}/id_rsa"]
    if port != 22:
        options.append(f"-p {port}")
    return " ".join(options)


ENV_LIST = "OMPI_MCA_mca_base_env_list"
_SHARED_REFS = ("secretKeyRef", "configMapKeyRef")


def forwarded_env(env: list[EnvVar] | None) -> list[str]:
    """The entries of OMPI_MCA_mca_base_env_list: the job's env, then PATH, for every rank on every host.

    Ranks that mpirun starts over ssh get sshd's environment; OpenMPI (4's orterun and 5's prterun)
    forwards each listed name from mpirun's own environment. `NAME` forwards the value mpirun sees.
    OpenMPI cuts a forwarded value at its first `=` (the part before becomes the name), so a value
    that has or may have one goes as `NAME=$(NAME)`, expanded by the kubelet. Left out: values with
    both `;` (the list's separator) and `=`; per-pod values (fieldRef, resourceFieldRef), which would
    give every rank the launcher's; optional references, which may be unset (OpenMPI 5's mpirun
    then fails, 4's drops every later name). Env names are C-identifier-like (apivalidation refuses
    others), so a list and `$(NAME)` carry every one.
    """
    entries: list[str] = []
    names: set[str] = set()
    for var in {var.name: var for var in env or ()}.values():   # a name given twice: the last value counts
        if var.value_from is not None:
            refs = [k for k in _SHARED_REFS if k in var.value_from]
            if len(var.value_from) != 1 or not refs or var.value_from[refs[0]].get("optional"):
                continue
            entry = f"{var.name}=$({var.name})"
        elif not isinstance(var.value, (str, type(None))):   # known later: may hold "="
            entry = f"{var.name}=$({var.name})"
        elif "=" not in (var.value or ""):
            entry = var.name
        elif ";" not in var.value:
            entry = f"{var.name}=$({var.name})"
        else:
            continue
        names.add(var.name)
        entries.append(entry)
    if "PATH" not in names:
        entries.append("PATH")   # every container has one (the runtime's default when the image sets none)
    return entries


def forwarded_length(entries: list[str], env: list[EnvVar] | None) -> int:
    """Length of the `OMPI_MCA_mca_base_env_list=...` string the container gets (literal values expanded)."""
    literal = {var.name: var.value or "" for var in env or () if var.value_from is None and isinstance(var.value or "", str)}
    size = len(ENV_LIST) + len(entries)   # the "=" after the list's name and the ";" between entries
    for entry in entries:
        name, inline, _ = entry.partition("=")
        size += len(name) + (1 + len(literal.get(name, "")) if inline else 0)
    return size


_MPI_LAUNCHERS = {"mpirun", "mpiexec", "orterun", "prterun", "oshrun"}
_SHELL_BREAKS = {";", "&&", "||", "|", "&"}


def passes_x(argv: list[str]) -> bool:
    """Whether the launcher's command forwards env itself: `mpirun -x` (also in `sh -c "..."`), or
    DeepSpeed's OpenMPI launcher (`deepspeed --launcher openmpi`), which runs `mpirun -x`. OpenMPI 4
    refuses `-x` together with OMPI_MCA_mca_base_env_list ("Open MPI does not support mixing these
    two methods")."""
    words: list[str] = []
    for arg in argv:
        if not isinstance(arg, str):   # an Output: known only at deploy time
            continue
        try:
            words += shlex.split(arg) if len(arg.split()) > 1 else [arg]
        except ValueError:
            words += arg.split()
    after_mpirun = False
    for i, word in enumerate(words):
        program = word.rsplit("/", 1)[-1]
        if program.split(".")[0] in _MPI_LAUNCHERS:
            after_mpirun = True
        elif after_mpirun and word in ("-x", "--x"):
            return True
        elif program == "deepspeed":
            rest = [w.lower() for w in words[i + 1:]]
            if "--launcher=openmpi" in rest or ("--launcher", "openmpi") in zip(rest, rest[1:]):
                return True
        if word in _SHELL_BREAKS or word.endswith(";"):
            after_mpirun = False
    return False


@dataclass(frozen=True)
class MpiFlavor:
    """What one MPI implementation needs from the job."""

    hostfile_line: str
    """One hostfile line, with {host} and {slots}."""
    by_short_hostname: bool
    """Hydra (Intel MPI, MPICH) connects back to the launcher by its short hostname: the hostfile names the
    launcher that way, and the pods need the namespace's DNS search domain to resolve it."""
    forwards_env: bool
    """Whether the job's env is forwarded to every rank with OMPI_MCA_mca_base_env_list (OpenMPI)."""
    launcher_env: Callable[[int, str, bool], dict[str, str]]
    """(slots, ssh options, running as root) -> the launcher's env: hostfile, slots, ssh options."""


def _openmpi_env(slots: int, ssh: str, as_root: bool) -> dict[str, str]:
    """OpenMPI 4 (ORTE) and 5 (PRRTE) at once, so a plain mpirun uses the hostfile on both."""
    env = {
        "OMPI_MCA_orte_default_hostfile": HOSTFILE,
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": str(slots),
        "OMPI_MCA_plm_rsh_args": ssh,
        "PRTE_MCA_prte_default_hostfile": HOSTFILE,
        "PRTE_MCA_prte_keep_fqdn_hostnames": "false",
        "PRTE_MCA_prte_set_default_slots": str(slots),
        "PRTE_MCA_plm_ssh_args": ssh,
    }
    if as_root:
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return env


IMPLEMENTATIONS = {
    Implementation.OPENMPI.value: MpiFlavor("{host} slots={slots}", by_short_hostname=False, forwards_env=True,
                                            launcher_env=_openmpi_env),
    Implementation.INTEL_MPI.value: MpiFlavor(
        "{host}:{slots}", by_short_hostname=True, forwards_env=False,
        launcher_env=lambda slots, ssh, as_root: {"I_MPI_HYDRA_HOST_FILE": HOSTFILE,
                                                  "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": ssh,
                                                  "I_MPI_PERHOST": str(slots)}),
    Implementation.MPICH.value: MpiFlavor(
        "{host}:{slots}", by_short_hostname=True, forwards_env=False,
        launcher_env=lambda slots, ssh, as_root: {"HYDRA_HOST_FILE": HOSTFILE, "HYDRA_LAUNCHER_EXTRA_ARGS": ssh}),
}

# Every name any implementation's launcher env can hold (as root, with env forwarding).
RESERVED_ENV = {**{name: "the MPI policy (hostfile, slots, ssh options)"
                   for flavor in IMPLEMENTATIONS.values() for name in flavor.launcher_env(1, "", True)},
                ENV_LIST: "the job's env (the names forwarded to every rank)"}


def hostfile(hosts: list[str], slots: int, flavor: MpiFlavor) -> str:
    """One line per MPI host, in the implementation's format."""
    return "".join(flavor.hostfile_line.format(host=host, slots=slots) + "\n" for host in hosts)


def _is_root(template: PodTemplate, mount_path: str) -> bool:
    for context in (template.container_security_context, template.security_context):
        if context and "runAsUser" in context:
            return context["runAsUser"] == 0
    return mount_path == "/root/.ssh" or mount_path.startswith("/root/")


# What a pasted public key starts with (an authorized_keys line, PEM, RFC 4716).
_PUBLIC_KEY_STARTS = ("ssh-", "ecdsa-sha2-", "sk-", "-----BEGIN PUBLIC KEY-----", "-----BEGIN RSA PUBLIC KEY-----",
                      "---- BEGIN SSH2 PUBLIC KEY ----")
_OPENSSH_CURVES = {"secp256r1", "secp384r1", "secp521r1"}
_KEY_TYPES = "Ed25519, ECDSA (P-256, P-384, P-521) or RSA"
_ENCRYPTED_KEY = ("the private key is encrypted with a passphrase, which mpirun cannot enter; give an unencrypted "
                  "key (`ssh-keygen -p -N '' -f <copy>` removes the passphrase of a copy) and keep it secret in "
                  "Pulumi config or your secret store")


# A key file's armor: the base64 between the BEGIN and END lines, and PEM headers (an encrypted key's).
_ARMOR = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def supplied_private_key(private_key: str) -> str:
    """The key file as OpenSSH reads it: the armor lines on lines of their own, the base64 wrapped as
    ssh-keygen (70) and OpenSSL (64) write it, Unix line ends and a final newline. A key pasted as a
    YAML plain scalar (`--config mpiSshKey=...`) arrives with its lines folded into spaces, and a value
    set with `pulumi config set` may lack the final newline."""
    found = _ARMOR.search(private_key)
    if found is None or ":" in found.group(2):   # no key file, or PEM headers: refused by ssh_public_key
        return "\n".join(private_key.strip().splitlines()) + "\n"
    label, body = found.group(1), "".join(found.group(2).split())
    width = 70 if label == "OPENSSH PRIVATE KEY" else 64
    return "\n".join([f"-----BEGIN {label}-----", *(body[i:i + width] for i in range(0, len(body), width)),
                      f"-----END {label}-----"]) + "\n"


def ssh_public_key(private_key: str) -> str:
    """The authorized_keys line of an unencrypted private key (OpenSSH or PEM); ValueError saying what is wrong.

    No message repeats any part of the value: it is a secret.
    """
    text = private_key.strip()
    if text == ENCRYPTED:   # an offline render of a stack file's secure value: known only to `pulumi up`
        return UNKNOWN
    if text.startswith(_PUBLIC_KEY_STARTS):
        raise ValueError("this is a public key; give the private key (the file without .pub, e.g. id_ed25519): "
                         "the public key is derived from it")
    if "Proc-Type: 4,ENCRYPTED" in text:   # cryptography reads no PEM headers once the lines are folded
        raise ValueError(_ENCRYPTED_KEY)
    text = supplied_private_key(text)
    from cryptography.exceptions import UnsupportedAlgorithm   # here: only jobs with a supplied key need it
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    load = (serialization.load_ssh_private_key if text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
            else serialization.load_pem_private_key)
    try:
        key = load(text.encode(), password=None)
    except TypeError:   # cryptography: the key is encrypted and no password was given
        raise ValueError(_ENCRYPTED_KEY) from None
    except (ValueError, UnsupportedAlgorithm):
        raise ValueError("not a private key in OpenSSH or PEM format; give the whole key file, from its "
                         "-----BEGIN ... PRIVATE KEY----- line to its -----END ... PRIVATE KEY----- line "
                         "(e.g. `pulumi config set --secret <key> < id_ed25519`)") from None
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name not in _OPENSSH_CURVES:
        raise ValueError(f"an ECDSA key on curve {key.curve.name}, which OpenSSH does not accept; give an "
                         f"{_KEY_TYPES} key")
    if not isinstance(key, (ed25519.Ed25519PrivateKey, ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        kind = type(key).__name__.removeprefix("_").removesuffix("PrivateKey")
        raise ValueError(f"a {kind} key, which OpenSSH does not accept for logins; give an {_KEY_TYPES} key")
    if isinstance(key, ed25519.Ed25519PrivateKey) and load is serialization.load_pem_private_key:
        raise ValueError("an Ed25519 key in PEM (PKCS#8) format, which some OpenSSH versions cannot load (9.2, "
                         "Debian 12's, among them); give it in OpenSSH format (-----BEGIN OPENSSH PRIVATE KEY-----), "
                         "as `ssh-keygen -t ed25519` writes it")
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return line.decode() + "\n"


def ssh_volume(name: str, as_root: bool) -> dict[str, Any]:
    """The key pair as `id_rsa`, `id_rsa.pub`, `authorized_keys`.

    The private key is 0600 for root (OpenSSH rejects a key its owner's group can read) and 0640 for
    non-root users, who read the root-owned file through the pod's fsGroup.
    """
    private_mode = MODE_OWNER_ONLY if as_root else MODE_GROUP_READ
    return {"name": "mpi-ssh-auth", "secret": {
        "secretName": ssh_secret_name(name), "defaultMode": 0o400,
        "items": [{"key": "ssh-privatekey", "path": "id_rsa", "mode": private_mode},
                  {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": MODE_PUBLIC},
                  {"key": "ssh-publickey", "path": "authorized_keys", "mode": MODE_PUBLIC}]}}


@dataclass(frozen=True)
class _Layout:
    """An MPI job's hosts and settings, worked out once for every hook."""

    flavor: MpiFlavor
    implementation: str
    launcher_is_node: bool
    mount: str
    as_root: bool
    node_pods: int
    slots: int
    hosts: list[str]
    launcher_host: str
    ssh: str


class MpiFamily(Family):
    """mpirun over SSH from a launcher pod to sshd node pods, as Kubeflow Trainer's MPI plugin and the MPI
    Operator derive it, for OpenMPI 4 and 5, Intel MPI and MPICH."""

    outputs_type = MpiOutputs
    roles_used = (LAUNCHER, NODE, MPI_ROLE)
    reserved_env = RESERVED_ENV

    def __init__(self, component: str, args_type: type[MpiTrainJobArgs]) -> None:
        self.component, self.args_type = component, args_type

    def roles(self, job: Derivation) -> list[TrainingRole]:
        name, args, runtime = job.name, job.args, job.runtime
        launcher_is_node = runtime.run_launcher_as_node if args.run_launcher_as_node is None else args.run_launcher_as_node
        overrides = args.template_overrides()
        # resources_per_node and devices_per_node size MPI hosts: a launcher that is none keeps its runtime's.
        launcher_overrides = overrides if launcher_is_node else overrides.model_copy(
            update={"resources": None, "devices": None})
        launcher = overlay(runtime.launcher or PodTemplate(), launcher_overrides)
        node_base = runtime.node or PodTemplate(command=DEFAULT_SSHD)
        node = overlay(node_base, overrides.model_copy(update={"command": node_base.command or DEFAULT_SSHD,
                                                                "args": node_base.args}))
        layout = _layout(name, args, launcher, node, launcher_is_node)
        job.derived["layout"] = layout
        dns_config = ({"searches": [concat(f"{name}.", args.namespace, f".svc.{args.cluster_domain}")]}
                      if args.namespace is not None else None)
        key_volume = ssh_volume(name, layout.as_root)
        key_mount = {"name": "mpi-ssh-auth", "mountPath": layout.mount, "readOnly": True}
        hostfile_volume = {"name": "mpi-hostfile", "configMap": {
            "name": hostfile_name(name), "items": [{"key": "hostfile", "path": "hostfile", "mode": MODE_READ_ONLY},
                                                   {"key": DISCOVER_HOSTS, "path": DISCOVER_HOSTS, "mode": MODE_SCRIPT}]}}
        hostfile_mount = {"name": "mpi-hostfile", "mountPath": HOSTFILE_DIR, "readOnly": True}

        env = layout.flavor.launcher_env(layout.slots, layout.ssh, layout.as_root)
        ssh_env = " ".join(name for name, value in env.items() if value == layout.ssh)  # mpirun's ssh options
        if layout.flavor.forwards_env and not passes_x([*(launcher.command or []), *(launcher.args or [])]):
            forward = forwarded_env(launcher.env)
            env[ENV_LIST] = ";".join(forward)
            if (size := forwarded_length(forward, launcher.env)) >= MAX_ENV_STRING:
                job.issues.add("env", f"{ENV_LIST} (the job's env forwarded to every rank, values with `=` in full) "
                                      f"would be {size} bytes, over the {MAX_ENV_STRING - 1} Linux allows one variable")
        # Both scripts read the hosts from the mounted hostfile: the launcher Job's size does not grow with them.
        launcher_command = ["/bin/sh", "-c", script("mpi-launcher"), "mpi-launcher", CONTROL_DIR, layout.ssh,
                            HOSTFILE, layout.launcher_host, ssh_env,
                            *(launcher.command or []), *(launcher.args or [])]
        launcher_container = container(
            launcher.model_copy(update={"command": launcher_command, "args": None}),
            upsert_env(template_env(launcher), [{"name": k, "value": v} for k, v in env.items()]),
            ports=[], extra_mounts=[key_mount, hostfile_mount])
        wait = {
            "name": "wait-for-hosts", "image": launcher.image,
            "command": ["/bin/sh", "-c", script("wait-for-hosts"), "wait-for-hosts", CONTROL_DIR,
                        str(args.launcher_wait_timeout_seconds), layout.ssh, layout.launcher_host, HOSTFILE],
            "volumeMounts": [key_mount, hostfile_mount],
        }
        if launcher.container_security_context:
            wait["securityContext"] = launcher.container_security_context
        # As Kubeflow's MPI runtimes: the launcher starts once the nodes' sshd is ready, and its end is the job's.
        roles = [TrainingRole(LAUNCHER, 1, launcher, launcher_container, extra_volumes=(key_volume, hostfile_volume),
                              init_containers=(wait,), dns_config=dns_config,
                              starts_after=NODE if layout.node_pods else None)]
        if layout.node_pods:
            control_volume = {"name": "mpi-control", "emptyDir": {}}
            control_mount = {"name": "mpi-control", "mountPath": CONTROL_DIR}
            node_command = ["/bin/sh", "-c", script("mpi-node"), "mpi-node", CONTROL_DIR, *node.command,
                            *(node.args or [])]
            node_container = container(
                node.model_copy(update={"command": node_command, "args": None}), template_env(node),
                ports=[{"containerPort": runtime.ssh_port, "name": "ssh"}], extra_mounts=[key_mount, control_mount])
            node_container["readinessProbe"] = {"tcpSocket": {"port": runtime.ssh_port}, "periodSeconds": 2}
            roles.append(TrainingRole(NODE, layout.node_pods, node, node_container,
                                      extra_volumes=(key_volume, control_volume), dns_config=dns_config,
                                      completes_job=False))
        return roles

    def check(self, job: Derivation, roles: list[TrainingRole]) -> None:
        name, args, runtime, issues = job.name, job.args, job.runtime, job.issues
        layout: _Layout = job.derived["layout"]
        launcher = roles[0].template
        if args.num_nodes >= 2 and layout.launcher_is_node and (runtime.launcher is None or runtime.node is None):
            missing = " and ".join(r for r, t in ((LAUNCHER, runtime.launcher), (NODE, runtime.node)) if t is None)
            issues.add("num_nodes", "must have 1 when MPI runtime with enabled run_launcher_as_node does not have "
                                    f"either launcher and node: runtime \"{runtime.name}\" has no {missing} template, "
                                    "and with the launcher as a node, more than one host needs both")
        if not launcher.command:
            issues.add("command", "the launcher needs a command, e.g. [mpirun, python, train.py]")
        if any(r.template.host_network for r in roles) and runtime.ssh_port == 22:
            issues.add("host_network", "on the node's network the hosts' sshd would listen on port 22, where the "
                                       "node's own sshd does: give the runtime another ssh_port (e.g. "
                                       "runtime: {name: mpi-distributed, ssh_port: 2222}) with an image whose sshd "
                                       "listens there")
        fs_group = (launcher.security_context or {}).get("fsGroup")
        if not layout.as_root and not fs_group:
            issues.add("security_context", "a non-root MPI job needs security_context.fsGroup so its user can read "
                                           f"the SSH key mounted at {layout.mount}")
        if layout.as_root and fs_group is not None:
            issues.add("security_context", "an MPI job running as root must not set security_context.fsGroup: the "
                                           f"kubelet then makes the private key at {layout.mount}/id_rsa "
                                           "group-readable (0640) and OpenSSH refuses a key its owner's group can "
                                           "read; run as a non-root user (runAsUser) or drop fsGroup")
        if not SSH_MOUNT_PATH.fullmatch(layout.mount):
            field = "ssh_auth_mount_path" if args.ssh_auth_mount_path else "runtime.ssh_auth_mount_path"
            issues.add(field, f"{shown(layout.mount)} cannot be passed in mpirun's ssh options (`-i <path>/id_rsa`): "
                              "they are split at white space and quotes are not honoured; use an absolute path of "
                              "letters, digits and . _ - + @ only, e.g. /root/.ssh")
        if args.ssh_private_key is not None:
            if "ssh_key_algorithm" in args.model_fields_set:
                issues.add("ssh_key_algorithm", "chooses the algorithm of a generated key, and with ssh_private_key "
                                                "no key is generated; drop ssh_key_algorithm")
            if isinstance(args.ssh_private_key, str):
                try:
                    job.derived["key_pair"] = {"ssh-privatekey": supplied_private_key(args.ssh_private_key),
                                               "ssh-publickey": ssh_public_key(args.ssh_private_key)}
                except ValueError as exc:
                    issues.add("ssh_private_key", str(exc))
        if layout.flavor.by_short_hostname and args.namespace is None:
            issues.add("namespace", f"{layout.implementation} connects back to the launcher by its short hostname; "
                                    f"set namespace so pods get the DNS search domain "
                                    f"{name}.<namespace>.svc.{args.cluster_domain}")

    def objects(self, job: Derivation, roles: list[TrainingRole]) -> list[dict[str, Any]]:
        name, args, runtime = job.name, job.args, job.runtime
        layout: _Layout = job.derived["layout"]
        annotations = {**runtime.annotations, **args.annotations}
        labels = object_labels(name, MPI_ROLE, runtime, args)
        if args.ssh_private_key is None:
            key = f"{name}-ssh-key"
            data: Any = {f"ssh-{part}key": GeneratedSSHKey(key, part, args.ssh_key_algorithm)
                         for part in ("private", "public")}
        else:   # a plain key, checked; or an Output, checked once for both keys when known (a bad key is one error)
            data = job.derived.get("key_pair") or Derived(args.ssh_private_key, self._key_pair_when_known(name))
        secret = {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth", "immutable": True,
            "metadata": metadata(ssh_secret_name(name), args.namespace, labels, annotations),
            "stringData": data,
        }
        config_map = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(hostfile_name(name), args.namespace, labels, annotations),
            "data": {"hostfile": hostfile(layout.hosts, layout.slots, layout.flavor),
                     DISCOVER_HOSTS: f"#!/bin/sh\n{script('discover-hosts')}\n"},
        }
        return [secret, config_map]

    def _key_pair_when_known(self, name: str) -> Callable[[Any], dict[str, str]]:
        """The Secret's data from a private key that arrives as an Output, once known: a bad key fails the
        update naming the argument, as a bad plain key fails at construction."""
        def key_pair(private_key: Any) -> dict[str, str]:
            try:
                if not isinstance(private_key, str):
                    raise ValueError(f"expected a string, got {type(private_key).__name__}")
                return {"ssh-privatekey": supplied_private_key(private_key),
                        "ssh-publickey": ssh_public_key(private_key)}
            except ValueError as exc:
                raise TrainJobError(self.component, name, [Issue("ssh_private_key", f"{exc} (the value arrived "
                                                                                    "as an Output)")]) from None
        return key_pair

    def object_arguments(self, job: Derivation) -> dict[str, dict[tuple, str]]:
        return {hostfile_name(job.name): {("data",): "num_nodes"}}

    def restart_refusal(self, job: Derivation) -> str | None:
        return ("mpirun on the launcher starts every rank once, over ssh, when the job starts; a replaced node pod "
                "is not part of the running MPI job, and a replaced launcher starts a new one beside the old ranks")

    def outputs(self, job: Derivation, roles: list[TrainingRole]) -> MpiOutputs:
        name, args = job.name, job.args
        layout: _Layout = job.derived["layout"]
        return MpiOutputs.model_construct(
            service_name=name, job_name=job_name(name, LAUNCHER), namespace=args.namespace,
            node_job_name=job_name(name, NODE) if layout.node_pods else None, hosts=layout.hosts, slots=layout.slots,
            num_nodes=args.num_nodes, mpi_implementation=layout.implementation, ssh_secret_name=ssh_secret_name(name))


def hostfile_name(name: str) -> str:
    return f"{name}-mpi-hostfile"


def ssh_secret_name(name: str) -> str:
    return f"{name}-mpi-ssh-auth"


def _layout(name: str, args: MpiTrainJobArgs, launcher: PodTemplate, node: PodTemplate,
            launcher_is_node: bool) -> _Layout:
    runtime = args.runtime
    implementation = args.mpi_implementation or runtime.mpi_implementation
    flavor = IMPLEMENTATIONS[implementation]
    mount = args.ssh_auth_mount_path or runtime.ssh_auth_mount_path
    node_pods = args.num_nodes - 1 if launcher_is_node else args.num_nodes
    slots = args.num_proc_per_node or runtime.num_proc_per_node
    if args.num_proc_per_node is None and slots == 1:
        gpus = gpu_count(node if node_pods else launcher)
        slots = gpus if gpus > 1 else 1
    workers = [pod_dns_name(name, NODE, i) for i in range(node_pods)]
    launcher_host = pod_dns_name(name, LAUNCHER, 0)
    if flavor.by_short_hostname:
        # Intel MPI's Hydra starts its proxy on the launcher itself only when the hostfile names it as
        # gethostname() does; with `N-launcher-0-0.N` it ssh's to itself, where no sshd runs (MPICH
        # accepts either). The bare name resolves on the workers through the pods' DNS search domain.
        launcher_host = launcher_host.split(".")[0]
    hosts = [*workers, launcher_host] if launcher_is_node else list(workers)
    return _Layout(flavor, implementation, launcher_is_node, mount, _is_root(launcher, mount), node_pods, slots,
                   hosts, launcher_host, ssh_args(mount, runtime.ssh_port))


class MpiTrainJob(TrainJobComponent):
    """mpirun over SSH on any cluster: launcher Job, sshd node Job, hostfile, SSH key pair."""

    family = MpiFamily("MpiTrainJob", MpiTrainJobArgs)

    def __init__(self, name: str, args: MpiTrainJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: an MpiTrainJobArgs, or a dict of the same arguments (as stack config gives them)."""
        super().__init__(name, args, opts)


class DeepSpeedTrainJob(TrainJobComponent):
    """DeepSpeed over MPI; defaults to Kubeflow's `deepspeed-distributed` runtime (launcher as a node)."""

    family = MpiFamily("DeepSpeedTrainJob", DeepSpeedTrainJobArgs)

    def __init__(self, name: str, args: DeepSpeedTrainJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: a DeepSpeedTrainJobArgs, or a dict of the same arguments (as stack config gives them)."""
        super().__init__(name, args, opts)


class MlxTrainJob(TrainJobComponent):
    """MLX over MPI; defaults to Kubeflow's `mlx-distributed` runtime (launcher as a node)."""

    family = MpiFamily("MlxTrainJob", MlxTrainJobArgs)

    def __init__(self, name: str, args: MlxTrainJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        """`args`: an MlxTrainJobArgs, or a dict of the same arguments (as stack config gives them)."""
        super().__init__(name, args, opts)
