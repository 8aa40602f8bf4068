"""The pipeline every job goes through, driven once for every family (see trainjobs.core.family).

Nothing here knows a framework: a family declares its roles, env, checks, objects and outputs; the
pipeline adds what every job has (headless Service, initializers, extra roles, override fields), runs
the checks every job needs, checks every derived object against the API server's rules, and raises
every problem at once, naming the argument behind each, before anything registers.
"""

from dataclasses import dataclass
from typing import Any

from trainjobs.backends import backend, controller_jobs
from trainjobs.pipeline import argpaths
from trainjobs.core.args import PodTemplate, TrainingRuntime, TrainJobArgs
from trainjobs.core.errors import Issue, IssueCollector
from trainjobs.pipeline.extra_roles import check_extra_roles, extra_role_pod_sets
from trainjobs.pipeline.failure import apply_failure_policy, check_failure_policy
from trainjobs.core.family import Derivation, Family, TrainingRole
from trainjobs.pipeline.initializers import (WORKSPACE_ROLE, WORKSPACE_VOLUME, InitializerSetup, initializers,
                                             workspace_claim)
from trainjobs.core.naming import check_plain, claim_template_name, job_name, run_job_name
from trainjobs.core.objects import gpus_asked_twice, headless_service, pod_set
from trainjobs.core.outputs import JobOutputs
from trainjobs.pipeline.overrides import apply_overrides, check_overrides
from trainjobs.core.podsets import COMPLETE, INITIALIZER_ROLES, READY, PodSetSpec, StartAfter, Workload
from trainjobs.pipeline.profile import apply_profile, from_profile
from trainjobs.kube import apivalidation
from trainjobs.kube.manifests import LABEL_JOB, LABEL_ROLE, LABEL_RUN, MIN_PODS, RESERVED_LABELS, SERVICE_ROLE
from trainjobs.kube.naming import rfc1035_label_problem
from trainjobs.backends import total_requests
from trainjobs.kube.templates import upsert
from trainjobs.scheduling import schedule

__all__ = ["CORE_ROLES", "TrainJobPlan", "derive"]

# Roles the pipeline itself names objects after, in every job.
CORE_ROLES = (SERVICE_ROLE, WORKSPACE_ROLE, *INITIALIZER_ROLES)


@dataclass(frozen=True)
class TrainJobPlan:
    """Everything a component registers, as plain manifests in apply order, plus its outputs."""

    name: str
    namespace: Any   # a string, None, or an Output
    manifests: tuple[dict[str, Any], ...]
    outputs: JobOutputs
    # (dependent, prerequisite) object names: under `pulumi up` the dependent is created only
    # after the prerequisite is ready (for a Job that waits for completion: complete).
    ordering: tuple[tuple[str, str], ...] = ()
    # Object name -> input paths Pulumi leaves alone (fields a scheduler such as Kueue owns).
    ignore_changes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # What is allowed but likely not meant: the component logs each as a Pulumi warning.
    warnings: tuple[Issue, ...] = ()


def derive(family: Family, name: str, args: TrainJobArgs) -> TrainJobPlan:
    """The job's objects, or TrainJobError listing every problem (the family's and the common ones)."""
    sourced = from_profile(args)
    job = Derivation(run_job_name(name, args.run), apply_profile(args), given=args)
    roles = family.roles(job)
    for role in roles:
        if role.pods:
            check_template(job.issues, role.template, role.name)
    check_reserved_env(job.issues, family, [r.template for r in roles if r.pods])
    family.check(job, roles)
    objects = family.objects(job, roles)
    outputs = family.outputs(job, roles)
    return _plan(family, job, roles, outputs, objects, sourced)


def check_job(issues: IssueCollector, name: str, args: TrainJobArgs, runtime: TrainingRuntime) -> None:
    """The job's own rules on its name, namespace and labels; what the API server refuses in the objects
    they make (hostnames, label syntax) is checked on the manifests."""
    problem = rfc1035_label_problem(name)
    if problem:
        issues.add("name", f"{problem}. The job name becomes the Service name and the pods' DNS subdomain.")
    check_plain(issues, "namespace", args.namespace)
    for field_name, labels in (("labels", {**runtime.labels, **args.labels}),
                               ("pod_labels", args.pod_labels or {})):
        for key in labels:
            if key in RESERVED_LABELS:
                issues.add(f"{field_name}.{key}", f"{key} is set by the job to select its pods; remove it")


def check_node_range(job: Derivation, family: Family) -> None:
    """A node range needs a family whose ranks re-form when pods join or leave; refused with the reason."""
    args = job.args
    if args.min_nodes is None:
        return
    refusal = family.elastic_refusal(job)
    if refusal:
        job.issues.add("num_nodes", f"a node range ({args.min_nodes}:{args.num_nodes}) makes the job elastic, and "
                                f"{family.component} cannot be: {refusal}")


def check_template(issues: IssueCollector, template: PodTemplate, role: str) -> None:
    """A role's effective template can make a pod: it has an image."""
    if not template.image:
        issues.add("image", f"no image for the {role} pods: set image, or give the runtime's {role} template one")


def check_reserved_env(issues: IssueCollector, family: Family, templates: list[PodTemplate]) -> None:
    """User env must not set what the family derives: one issue for the job, listing every such name
    any template sets, as Kubeflow reports it."""
    clashes = sorted({e.name for template in templates for e in template.env or () if e.name in family.reserved_env})
    if clashes:
        issues.add("env", family.reserved_env_message(clashes))


def _plan(family: Family, job: Derivation, roles: list[TrainingRole], outputs: JobOutputs,
          objects: list[dict[str, Any]], sourced: frozenset[str] = frozenset()) -> TrainJobPlan:
    """The family's roles and objects plus what every job has, checked, as a plan.

    Every role becomes a pod set (initializers, training roles, extra roles); the failure policy, the
    override fields and the gang scheduler decorate them, and only then does the backend build its
    objects. Training pods mount the initializers' workspace and wait for them; extra roles get nothing
    from training. Every manifest is built before anything is raised, so the API server's rules are
    checked on all of them and every problem comes back at once.
    """
    name, args, runtime, issues = job.name, job.args, job.runtime, job.issues
    check_extra_roles(issues, args, (*CORE_ROLES, *family.roles_used))
    setup = initializers(name, args, runtime, issues, training_pods=sum(r.pods for r in roles))
    check_job(issues, name, args, runtime)
    check_overrides(issues, args)
    check_failure_policy(issues, args, family.restart_refusal(job))
    check_node_range(job, family)

    workload = Workload(name, args, job.given or args, [*setup.pod_sets, *_training_pod_sets(job, roles, setup),
                                                         *extra_role_pod_sets(name, args, runtime)],
                        needs=(*objects, *setup.manifests))
    for pod_set in workload.pod_sets:
        apply_failure_policy(pod_set, args)
    chosen = backend(args.backend)
    chosen.check(issues, workload)
    schedule(workload, chosen, issues)
    assembly = chosen.materialize(workload)
    service = [headless_service(name, runtime, args)] if workload.service else []
    claim_templates = [p.claim_template for p in workload.pod_sets if p.claim_template]
    manifests = [*service, *objects, *setup.manifests, *claim_templates, *workload.objects_before,
                 *assembly.objects]
    # The API server's rules apply to the Jobs that run, whichever backend creates them.
    running = controller_jobs(manifests)
    reported = {issue.field for issue in issues.issues}
    sources = _sources(name, args, runtime, roles, setup, family.object_arguments(job))
    for held, source in sources.jobs.items():
        if gpus_asked_twice(source.template):
            issues.add(source.field("devices"), f"the pods of {held} would get GPUs twice: as the device resource in "
                       f"{source.field('resources')} and through this claim. Ask one way: remove these GPU "
                       "devices, or set the GPU resource to \"0\" (a runtime's stays otherwise)")
    for issue in argpaths.issues(apivalidation.problems(running), running, sources):
        if issue.field not in reported:   # an argument's own check says it better
            issues.add(issue.field, issue.message)
    if sourced:   # a value the job only inherits is named where it is set: in the profile
        issues.issues = [Issue(f"profile.{i.field}", i.message) if _top_field(i.field) in sourced else i
                         for i in issues.issues]
    issues.raise_if_any(family.component, name)
    outputs = outputs.model_copy(update={"requests": total_requests(running)})
    ignored = (tuple((o["metadata"]["name"], workload.ignore_changes) for o in assembly.objects)
               if workload.ignore_changes else ())
    return TrainJobPlan(name=name, namespace=args.namespace, manifests=tuple(manifests), outputs=outputs,
                        ordering=assembly.ordering, ignore_changes=tuple(sorted(ignored)),
                        warnings=tuple(job.warnings.issues))


def _training_pod_sets(job: Derivation, roles: list[TrainingRole], setup: InitializerSetup) -> list[PodSetSpec]:
    """The family's roles as pod sets: the gang, started after the initializers complete (and after the
    role a family names, once its pods are ready), with the override fields and an elastic job's fewest pods."""
    name, args, runtime = job.name, job.args, job.runtime
    initialized = tuple(StartAfter(p.role, COMPLETE) for p in setup.pod_sets)
    pod_sets = []
    for r in roles:
        if r.pods == 0:
            continue
        main, volumes, waits = dict(r.container), list(r.extra_volumes), list(r.init_containers)
        if setup.markers:
            main["volumeMounts"] = upsert(list(main.get("volumeMounts", [])), [setup.mount],
                                          key=lambda m: m.get("mountPath"))
            volumes.append(setup.volume)
            waits = setup.wait_container(r.template) + waits
        after = (StartAfter(r.starts_after, READY),) if r.starts_after else ()
        training = pod_set(name, r.name, r.pods, r.template, main, runtime, args, extra_volumes=volumes,
                           init_containers=waits, dns_config=r.dns_config, starts_after=initialized + after,
                           gang=True, completes_job=r.completes_job, placement=args.placement)
        apply_overrides(training, args)
        if args.min_nodes is not None:
            training.annotations[MIN_PODS] = str(args.min_nodes)
        pod_sets.append(training)
    return pod_sets


def _top_field(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def _sources(name: str, args: TrainJobArgs, runtime: TrainingRuntime, roles: list[TrainingRole],
             setup: InitializerSetup, object_arguments: dict[str, dict[tuple, str]]) -> argpaths.Sources:
    """Whose settings each object of the job carries, to name the argument behind a refused value."""
    # A runtime holds each role's template under the role's name (TorchRuntime.node, MpiRuntime.launcher).
    by_role = {r.name: argpaths.PodSource("", args, r.template, "num_nodes", f"runtime.{r.name}.",
                                          getattr(runtime, r.name, None),
                                          renamed={"resources": "resources_per_node", "devices": "devices_per_node"})
               for r in roles}
    for role, field_name, spec in setup.specs:
        by_role[role] = argpaths.PodSource(
            f"{field_name}.", getattr(args, field_name), spec, field_name, f"runtime.{field_name}.",
            getattr(runtime, field_name), env_arguments={"STORAGE_URI": "storage_uri"}, template_in_init=True)
    for role, spec in args.extra_roles.items():
        by_role[role] = argpaths.PodSource(f"extra_roles.{role}.", spec, spec, f"extra_roles.{role}.num_pods",
                                           role_argument=f"extra_roles.{role}", role=role)
    jobs = {job_name(name, role): source for role, source in by_role.items()}
    devices = {claim_template_name(name, role): argpaths.device_arguments(source)
               for role, source in by_role.items() if source.template.devices}
    claim = {("spec", "resources", "requests", "storage"): "workspace_size",
             ("spec", "storageClassName"): "workspace_storage_class", ("spec", "accessModes"): "workspace_access_mode"}
    return argpaths.Sources(
        args, runtime, jobs,
        labels={"app.kubernetes.io/name": "runtime.name", "app.kubernetes.io/instance": "name", LABEL_JOB: "name",
                LABEL_RUN: "run"},
        role_labels=("app.kubernetes.io/component", LABEL_ROLE),
        objects={workspace_claim(name): claim, **devices, **object_arguments},
        volumes={WORKSPACE_VOLUME: "workspace_volume"})
