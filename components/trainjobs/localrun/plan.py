"""What a local run starts: the selected Jobs, their pods, and each pod's containers and volumes.

Pure: it reads the rendered objects only, starts nothing and needs no privileges, so every
problem a run would hit late (a missing ConfigMap key, a container without a command, a volume
kind that cannot be emulated) is reported before anything is created. Pod env, commands and
volume files come from `trainjobs.tools.podview`, which resolves them as the kubelet does.

Nothing here knows a training framework: a Job is a Job, whatever its pods run.
"""

import functools
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from trainjobs.backends import PodSet
from trainjobs.backends.jobset import API_VERSION as JOBSET_API, KIND as JOBSET, controller_service
from trainjobs.core.args import INT32_MAX
from trainjobs.core.naming import CLUSTER_DOMAIN
from trainjobs.tools.podview import (MissingVolumeSource, ObjectIndex, PodFacts, PodView, pod_view,
                                     volume_files)
from trainjobs.kube.quantity import parse_quantity
from trainjobs.kube.requests import ClaimTemplates, format_quantity
from . import images

DEFAULT_GRACE_SECONDS = 30  # the Kubernetes default terminationGracePeriodSeconds


class PlanError(ValueError):
    """The rendering asks for something a local run cannot do; nothing was started."""


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    kind: Literal["init", "sidecar", "main"]
    argv: tuple[str, ...]
    env: dict[str, str]
    workdir: str
    user: "Identity | None" = None  # None: root, as the emulator itself


@dataclass(frozen=True)
class Identity:
    """Who a container's processes run as: `runAsUser`, `runAsGroup` and the supplementary groups."""

    uid: int
    gid: int
    groups: tuple[int, ...]


def identity(pod_context: dict[str, Any] | None, container_context: dict[str, Any] | None,
             image_users: dict[int, "images.User"] | None = None) -> Identity | None:
    """The container's user as the kubelet and container runtime set it, or None for root.

    The container's securityContext overrides the pod's. Without `runAsGroup` the group is the
    user's primary group in the image's /etc/passwd (`image_users`, for an image this run knows),
    else in this machine's (standing in for the image's), else 0. The supplementary groups are the
    pod's `fsGroup` and `supplementalGroups` plus the user's groups in this machine's /etc/group.
    """
    pod_context, container_context = pod_context or {}, container_context or {}
    uid = container_context.get("runAsUser", pod_context.get("runAsUser"))
    if uid is None or int(uid) == 0:
        return None
    uid = int(uid)
    image_user = (image_users or {}).get(uid)
    account = None
    if image_user is None:
        try:
            account = pwd.getpwuid(uid)
        except KeyError:
            pass
    gid = container_context.get("runAsGroup", pod_context.get("runAsGroup"))
    primary = image_user.gid if image_user else account.pw_gid if account else 0
    gid = int(gid) if gid is not None else primary
    groups = [int(g) for g in ([pod_context["fsGroup"]] if pod_context.get("fsGroup") is not None else [])
              + list(pod_context.get("supplementalGroups") or [])]
    if image_user:
        groups.append(image_user.gid)
    elif account:
        groups += os.getgrouplist(account.pw_name, gid)
    return Identity(uid, gid, tuple(dict.fromkeys(g for g in groups if g != gid)))


def home_of(user: Identity | None, image_users: dict[int, "images.User"] | None = None) -> str | None:
    """HOME as the container runtime sets it: the user's home in the image's /etc/passwd, else `/`."""
    if user is None:
        return None
    if user.uid in (image_users or {}):
        return image_users[user.uid].home
    try:
        return pwd.getpwuid(user.uid).pw_dir
    except KeyError:
        return "/"


@dataclass(frozen=True)
class VolumeSpec:
    """A volume as the pod sandbox materializes it: files, an emptyDir, a host path, or a claim.

    A PersistentVolumeClaim becomes one directory of the run shared by every pod that mounts it,
    as a single node's local-path provisioner would give (`path` is `<namespace>/<claim>`).
    """

    name: str
    kind: Literal["files", "emptyDir", "hostPath", "claim"]
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    medium: str = ""
    size_limit: int | None = None
    path: str = ""
    host_type: str = ""


@dataclass(frozen=True)
class MountSpec:
    volume: str
    path: str
    sub_path: str = ""
    read_only: bool = False


@dataclass
class PodSlot:
    """One pod position of a Job: its index, hostname and network identity, stable across retries."""

    job: str
    index: int
    hostname: str
    namespace: str
    subdomain: str | None
    labels: dict[str, str]
    indexed: bool
    published: bool = False  # a headless Service named like the subdomain selects it: it has DNS names
    searches: tuple[str, ...] = ()  # the pod's dnsConfig.searches, appended to its DNS search list
    ip: str = ""
    prefixlen: int = 0  # of the run's subnet, which the pod's address is on
    netns: str = ""

    def dns_names(self, cluster_domain: str = CLUSTER_DOMAIN) -> list[str]:
        """The names other pods resolve this one by, shortest first (empty if it has no record)."""
        if not self.published:
            return []
        base = f"{self.hostname}.{self.subdomain}"
        return [base, f"{base}.{self.namespace}", f"{base}.{self.namespace}.svc",
                f"{base}.{self.namespace}.svc.{cluster_domain}"]


@dataclass
class PodSpec:
    """One pod attempt, fully resolved: what the sandbox and the containers get."""

    slot: PodSlot
    name: str
    containers: list[ContainerSpec]
    volumes: dict[str, VolumeSpec]
    mounts: list[MountSpec]
    grace_seconds: float
    fs_group: int | None = None  # the pod's securityContext.fsGroup: group owner of its volumes
    image: images.Layer = field(default_factory=images.Layer)  # what its containers' images provide


@dataclass
class JobSpec:
    name: str
    namespace: str
    manifest: dict[str, Any]
    completions: int
    parallelism: int
    backoff_limit: int
    active_deadline_seconds: int | None
    indexed: bool
    group: str  # the training job: pods' subdomain (the headless Service), else the Job itself
    slots: list[PodSlot]
    ignored: list[str] = field(default_factory=list)  # Job features a local run does not emulate
    pod_failure_rules: list[dict[str, Any]] = field(default_factory=list)  # spec.podFailurePolicy.rules
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    owner: str | None = None  # the object whose controller creates the Job (a JobSet); None: the Job itself
    pod_set: PodSet | None = None  # the Job's pods as every tool reads them


@dataclass
class Selection:
    jobs: list[JobSpec]
    skipped: list[tuple[str, str]]  # (job, why it does not run here)
    warnings: list[str]
    images: list[str] = field(default_factory=list)  # what the pods get of the images they name


def _pod_spec_of(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"].get("spec", {})


def extended_resources(job: dict[str, Any], claims: ClaimTemplates) -> list[str]:
    """Device-plugin resources (GPUs, NICs...) the Job's pods request, and devices they claim through Dynamic
    Resource Allocation: this machine offers none."""
    spec = _pod_spec_of(job)
    found: dict[str, str] = {}
    for container in spec.get("initContainers", []) + spec.get("containers", []):
        resources = container.get("resources", {})
        for side in ("requests", "limits"):
            for name, value in (resources.get(side) or {}).items():
                if "/" in name and not name.startswith(("kubernetes.io/", "hugepages-")):
                    if parse_quantity(value) > 0:
                        found.setdefault(name, str(value))
    namespace = job["metadata"].get("namespace")
    for name, count in claims.devices(spec, namespace).items():
        found.setdefault(name, f"{format_quantity(name, count)} (claimed through Dynamic Resource Allocation)")
    for claim in spec.get("resourceClaims") or []:   # a shared claim, or a template the rendering lacks
        if not claims.devices({"resourceClaims": [claim]}, namespace):
            found.setdefault(f"resource claim {claim.get('name')}", "a DRA driver's devices")
    return [f"{k}: {v}" for k, v in sorted(found.items())]


def _group(job: dict[str, Any]) -> str:
    return _pod_spec_of(job).get("subdomain") or job["metadata"]["name"]


def select(objects: list[dict[str, Any]], names: list[str] | None = None) -> Selection:
    """The Jobs to run: those named (a Job, or every Job of a training job), else all of them.

    A training job is the set of Jobs whose pods share a subdomain (its headless Service); its
    Jobs run together or not at all. Jobs needing device resources cannot be scheduled here:
    named ones are an error, the others are skipped with the reason.
    """
    index = ObjectIndex(objects)   # every object that runs pods, read back as the Jobs that run them
    sets = {s.name: s for s in index.pod_sets if s.job is not None}   # run-local emulates the Job controller
    jobs = [s.job for s in sets.values()]
    if not jobs:
        raise PlanError("the rendering has no Job to run")
    by_name = {j["metadata"]["name"]: j for j in jobs}
    chosen: list[dict[str, Any]] = []
    if names:
        for name in names:
            picked = [by_name[name]] if name in by_name else [j for j in jobs if _group(j) == name]
            if not picked:
                groups = sorted({_group(j) for j in jobs})
                raise PlanError(f'no Job or training job "{name}"; Jobs: {", ".join(sorted(by_name))}; '
                                f'training jobs: {", ".join(groups)}')
            chosen += [j for j in picked if j not in chosen]
        # A Job's siblings (same training job) come along: they only work together.
        chosen = [j for j in jobs if any(_group(j) == _group(c) for c in chosen)]
    else:
        chosen = list(jobs)

    skipped: list[tuple[str, str]] = []
    blocked_groups: dict[str, tuple[str, str]] = {}
    claims = ClaimTemplates(objects)
    for job in chosen:
        needs = extended_resources(job, claims)
        if needs:
            blocked_groups.setdefault(_group(job), (job["metadata"]["name"], ", ".join(needs)))
    runnable = []
    for job in chosen:
        why = None
        if _group(job) in blocked_groups:
            blocker, needs = blocked_groups[_group(job)]
            why = f"needs {needs}, which this machine does not offer"
            if blocker != job["metadata"]["name"]:
                why = f"runs together with Job {blocker}, which {why}"
        if why is None:
            runnable.append(job)
        elif names:
            raise PlanError(f"cannot run {job['metadata']['name']} here: {why}")
        else:
            skipped.append((job["metadata"]["name"], why))
    if not runnable:
        raise PlanError("nothing to run here: " + "; ".join(f"{j}: {why}" for j, why in skipped))

    specs = [_job_spec(sets[job["metadata"]["name"]], index) for job in runnable]
    warnings = _publish(specs, index) + _mpi_mismatches(specs, index)
    return Selection(specs, skipped, warnings, _image_notes(specs))


# The env an MPI implementation's launcher is set up with names it: its host file variable.
_MPI_BY_ENV = {"OMPI_MCA_orte_default_hostfile": "Open MPI", "I_MPI_HYDRA_HOST_FILE": "Intel MPI",
               "HYDRA_HOST_FILE": "MPICH"}
# What each implementation's `mpirun --version` starts its answer with.
_MPI_BY_VERSION = (("Open MPI", "Open MPI"), ("Intel(R) MPI", "Intel MPI"), ("HYDRA", "MPICH"))


def _mpi_mismatches(jobs: list[JobSpec], index: ObjectIndex) -> list[str]:
    """A launcher set up for one MPI implementation whose `mpirun` here is another's: it would run, but not as
    on the cluster (another MPI reads none of those env settings), so the user is told which to put first."""
    found = []
    for job in jobs:
        for container in pod_view(job.pod_set, 0, index).containers:
            wanted = next((mpi for name, mpi in _MPI_BY_ENV.items() if name in container.env), None)
            # The user's command runs inside the launcher's own script: its mpirun is one of the words.
            program = [w for w in (*container.command, *container.args) if os.path.basename(w) in ("mpirun", "mpiexec")]
            if wanted is None or not program:
                continue
            search = container.env.get("PATH") or base_env("")["PATH"]
            path = shutil.which(program[0], path=search)
            here = _mpi_of(path, search) if path else None
            if here and here != wanted:
                found.append(f"Job {job.name} is set up for {wanted} (its launcher's env), but {program[0]} here is "
                             f"{here}'s ({path}), which reads none of that env: put {wanted}'s bin directory first on "
                             "PATH to run it as the cluster would")
    return found


@functools.lru_cache(maxsize=None)
def _mpi_of(program: str, search: str) -> str | None:
    """The MPI implementation an `mpirun` or `mpiexec` belongs to, from its `--version` run with the pod's PATH
    `search` (Intel's mpirun runs its mpiexec.hydra from there); None if it says nothing known."""
    try:
        answer = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=60,
                                env={**os.environ, "PATH": search}).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((mpi for mark, mpi in _MPI_BY_VERSION if mark in answer), None)


def _containers(job: dict[str, Any]) -> list[dict[str, Any]]:
    spec = _pod_spec_of(job)
    return list(spec.get("initContainers", [])) + list(spec.get("containers", []))


def _image_notes(jobs: list[JobSpec]) -> list[str]:
    """One line per image the runnable Jobs name that gives their pods something, with those Jobs."""
    notes: dict[str, tuple[images.Image, list[str]]] = {}
    for job in jobs:
        containers = _containers(job.manifest)
        commands = [tuple(map(str, (c.get("command") or []) + (c.get("args") or []))) for c in containers]
        for image, facts in images.images_of([c.get("image") for c in containers], commands):
            notes.setdefault(str(image), (facts, []))[1].append(job.name)
    lines = []
    for image, (facts, names) in notes.items():
        lines.append(f"image {image} (Job{'s' if len(names) > 1 else ''} {', '.join(names)}): {facts.description}")
        lines += [f"  {s.path}: {s.what}" for s in facts.stand_ins]
    return lines


def _job_spec(pod_set: PodSet, index: ObjectIndex) -> JobSpec:
    job = pod_set.job
    name = job["metadata"]["name"]
    namespace = job["metadata"].get("namespace", "default")
    spec = job["spec"]
    indexed = spec.get("completionMode") == "Indexed"
    completions = int(spec.get("completions", 1) or 1)
    parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    if parallelism < 1:
        raise PlanError(f"Job {name} has parallelism {parallelism}: it would start no pod")
    ignored = [key for key in ("successPolicy", "suspend") if spec.get(key)]
    slots = []
    for i in range(completions):
        view = pod_view(pod_set, i, index, reveal=False)
        hostname = view.hostname if indexed else f"{name}-{i}"
        slots.append(PodSlot(job=name, index=i, hostname=hostname, namespace=namespace,
                             subdomain=_pod_spec_of(job).get("subdomain"), labels=view.labels, indexed=indexed,
                             searches=tuple((_pod_spec_of(job).get("dnsConfig") or {}).get("searches") or ())))
    job_spec = JobSpec(name=name, namespace=namespace, manifest=job, completions=completions,
                       parallelism=min(parallelism, completions), backoff_limit=int(spec.get(
                           "backoffLimit", INT32_MAX if spec.get("backoffLimitPerIndex") is not None else 6)),
                       active_deadline_seconds=spec.get("activeDeadlineSeconds"), indexed=indexed,
                       group=_group(job), slots=slots, ignored=ignored,
                       pod_failure_rules=list((spec.get("podFailurePolicy") or {}).get("rules") or []),
                       backoff_limit_per_index=spec.get("backoffLimitPerIndex"),
                       max_failed_indexes=spec.get("maxFailedIndexes"),
                       owner=None if pod_set.owner is job else pod_set.owner["metadata"]["name"], pod_set=pod_set)
    for slot in slots:  # surface every configuration problem before anything starts
        pod_spec(job_spec, slot, index, suffix="xxxxx")
    return job_spec


def _publish(jobs: list[JobSpec], index: ObjectIndex) -> list[str]:
    """Mark the pods a headless Service gives DNS names, as the cluster DNS would; warn about others."""
    warnings = []
    services = [o for o in index.objects if o["kind"] == "Service"]
    named = {(s["metadata"]["name"], s["metadata"].get("namespace", "default")) for s in services}
    for obj in index.objects:   # a JobSet's controller makes the Service its subdomain names when none exists
        made = controller_service(obj) if (obj.get("apiVersion"), obj.get("kind")) == (JOBSET_API, JOBSET) else None
        if made and (made["metadata"]["name"], made["metadata"].get("namespace", "default")) not in named:
            services.append(made)
    for job in jobs:
        for slot in job.slots:
            if not slot.subdomain:
                continue
            why = unpublished(slot, services)
            if why:
                if slot.index == 0:
                    warnings.append(f"pods of Job {job.name} get no DNS name {slot.hostname}.{slot.subdomain}: {why}")
            else:
                slot.published = True
    return warnings


def unpublished(slot: PodSlot, services: list[dict[str, Any]]) -> str | None:
    """Why the cluster DNS gives the pod of `slot` (which has a subdomain) no name, or None when it does: a headless
    Service named like its subdomain, in its namespace, selects it, and it has a hostname."""
    service = next((s for s in services if s["metadata"]["name"] == slot.subdomain
                    and s["metadata"].get("namespace", "default") == slot.namespace), None)
    if not slot.indexed:
        return "only pods with a hostname (Indexed Jobs) get per-pod DNS names"
    if service is None:
        return f'there is no Service "{slot.subdomain}" in namespace {slot.namespace}'
    if service.get("spec", {}).get("clusterIP") != "None":
        return f'Service "{slot.subdomain}" is not headless (clusterIP: None)'
    selector = service["spec"].get("selector") or {}
    if not selector or any(slot.labels.get(k) != v for k, v in selector.items()):
        return f'Service "{slot.subdomain}" does not select the pod (selector {selector})'
    return None


def base_env(hostname: str) -> dict[str, str]:
    """What the container runtime and the image would add: the host's PATH stands in for the image's."""
    path = os.environ.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    tools = os.path.dirname(sys.executable)  # the Python environment running trainjobs (torchrun, ...)
    if tools not in path.split(":"):
        path = f"{tools}:{path}"
    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        home = "/root"
    return {"PATH": path, "HOME": home, "HOSTNAME": hostname}


def pod_spec(job: JobSpec, slot: PodSlot, index: ObjectIndex, suffix: str, node_name: str = "localhost",
             max_grace: float | None = None) -> PodSpec:
    """Pod `slot` of `job` as one attempt named `<hostname>-<suffix>`: env, commands, volumes resolved."""
    facts = PodFacts(pod_name_suffix=suffix, pod_ip=slot.ip or "<pod IP>", node_name=node_name)
    return build_pod(job.pod_set, slot, index, facts, f"{slot.hostname}-{suffix}", f"Job {job.name}", max_grace)


def build_pod(pod_set: PodSet, slot: PodSlot, index: ObjectIndex, facts: PodFacts, pod_name: str, what: str,
              max_grace: float | None = None, given: dict[str, "VolumeSpec"] | None = None) -> PodSpec:
    """Pod `slot.index` of `pod_set`, named `pod_name`, resolved for the sandbox; `what` names it in errors.
    `given` holds volumes resolved by the caller (those of a real pod that the rendering has no objects for)."""
    view: PodView = pod_view(pod_set, slot.index, index, reveal=True, facts=facts)
    spec = pod_set.pod_spec
    where = f"{what} container"
    resolved_all = list(zip(spec.get("initContainers", []), view.init_containers)) + list(
        zip(spec.get("containers", []), view.containers))
    commands = [tuple(r.command) + tuple(r.args) for _, r in resolved_all]
    image = images.layer([raw.get("image") for raw, _ in resolved_all], commands)
    for stand_in in image.stand_ins:
        if stand_in.missing() and any(stand_in.path in arg for argv in commands for arg in argv):
            raise PlanError(f"{what} runs {stand_in.path}: {stand_in.what}, which needs {stand_in.needs} "
                            f"(Debian package {stand_in.package}): apt-get install {stand_in.package}")

    def container(raw: dict[str, Any], resolved, kind) -> ContainerSpec:
        argv = list(resolved.command) + list(resolved.args)
        if not resolved.command:
            raise PlanError(f'{where} "{raw["name"]}" has no command: without its image, the image\'s entrypoint '
                            "cannot run here; give the container a command")
        user = identity(spec.get("securityContext"), raw.get("securityContext"), image.users)
        home = {"HOME": home_of(user, image.users)} if user else {}
        env = {**base_env(slot.hostname), **home, **image.env, **resolved.env}  # an image's ENV wins over its passwd
        if not pod_set.indexed and pod_set.job is not None:
            env.pop("JOB_COMPLETION_INDEX", None)
        return ContainerSpec(name=raw["name"], kind=kind, argv=tuple(argv), env=env,
                             workdir=raw.get("workingDir") or "/", user=user)

    containers = []
    for raw, resolved in zip(spec.get("initContainers", []), view.init_containers):
        containers.append(container(raw, resolved, "sidecar" if raw.get("restartPolicy") == "Always" else "init"))
    for raw, resolved in zip(spec.get("containers", []), view.containers):
        containers.append(container(raw, resolved, "main"))
    if not any(c.kind == "main" for c in containers):
        raise PlanError(f"{what} has no container")

    volumes_by_name = {v["name"]: v for v in spec.get("volumes", [])}
    mounts: dict[str, tuple[MountSpec, str]] = {}
    volumes: dict[str, VolumeSpec] = {}
    for raw in spec.get("initContainers", []) + spec.get("containers", []):
        for m in raw.get("volumeMounts", []):
            if m.get("subPathExpr"):
                raise PlanError(f'{where} "{raw["name"]}": subPathExpr is not emulated; use subPath')
            mount = MountSpec(volume=m["name"], path=m["mountPath"], sub_path=m.get("subPath", ""),
                              read_only=bool(m.get("readOnly")))
            if mount.path in mounts and mounts[mount.path][0] != mount:
                raise PlanError(f"{what}: containers {mounts[mount.path][1]} and {raw['name']} mount "
                                f"different things at {mount.path}; a local pod gives all its containers "
                                "one filesystem view")
            mounts.setdefault(mount.path, (mount, raw["name"]))
            if m["name"] in (given or {}):
                volumes[m["name"]] = given[m["name"]]
            elif m["name"] not in volumes:
                volumes[m["name"]] = _volume(what, slot.namespace, volumes_by_name.get(m["name"]), m["name"], index)
    for mount, _ in mounts.values():
        if volumes[mount.volume].kind == "files" and not mount.read_only:
            # ConfigMap and Secret volumes are always read-only in Kubernetes.
            mounts[mount.path] = (MountSpec(mount.volume, mount.path, mount.sub_path, True), "")

    fs_group = (spec.get("securityContext") or {}).get("fsGroup")
    grace = float(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
    if max_grace is not None:
        grace = min(grace, max_grace)
    return PodSpec(slot=slot, name=pod_name, containers=containers, volumes=volumes,
                   mounts=[m for m, _ in mounts.values()], grace_seconds=grace,
                   fs_group=int(fs_group) if fs_group is not None else None, image=image)


def _volume(what: str, namespace: str, volume: dict[str, Any] | None, name: str, index: ObjectIndex) -> VolumeSpec:
    if volume is None:
        raise PlanError(f'{what}: a container mounts volume "{name}", which the pod does not define')
    try:
        files = volume_files(volume, index)
    except MissingVolumeSource as exc:
        raise PlanError(f"{what}: {exc}") from None
    if files is not None:
        return VolumeSpec(name=name, kind="files", files=files)
    if "emptyDir" in volume:
        empty = volume["emptyDir"] or {}
        size = empty.get("sizeLimit")
        return VolumeSpec(name=name, kind="emptyDir", medium=empty.get("medium", ""),
                          size_limit=int(parse_quantity(size)) if size else None)
    if "hostPath" in volume:
        return VolumeSpec(name=name, kind="hostPath", path=volume["hostPath"]["path"],
                          host_type=volume["hostPath"].get("type", ""))
    if "persistentVolumeClaim" in volume:
        claim = volume["persistentVolumeClaim"]["claimName"]
        if index.get("PersistentVolumeClaim", claim) is None:
            raise PlanError(f'{what}: volume "{name}" uses PersistentVolumeClaim "{claim}", which is not in '
                            "the rendering (its pods would stay Pending)")
        return VolumeSpec(name=name, kind="claim", path=f"{namespace}/{claim}")
    kind = next((k for k in volume if k != "name"), "unknown")
    raise PlanError(f'{what}: volume "{name}" is a {kind} volume; a local run emulates configMap, secret, '
                    "emptyDir, hostPath and persistentVolumeClaim volumes")

