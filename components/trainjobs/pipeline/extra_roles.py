"""Extra roles: pods beside training (TensorBoard, an evaluator) that get none of the training env."""

from trainjobs.core.args import PodTemplate, TrainingRuntime, TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.kube.naming import rfc1123_label_problem
from trainjobs.core.objects import container, pod_set, template_env
from trainjobs.core.podsets import PodSetSpec
from trainjobs.kube.templates import overlay


def check_extra_roles(issues: IssueCollector, args: TrainJobArgs, reserved: tuple[str, ...]) -> None:
    """Role names are DNS labels that no role of the job itself uses (`reserved`)."""
    for role, spec in args.extra_roles.items():
        if role in reserved:
            issues.add(f"extra_roles.{role}", f'"{role}" is a role the job itself uses; choose another name')
        elif rfc1123_label_problem(role):
            issues.add(f"extra_roles.{role}", "role names must be DNS labels (lowercase letters, digits, '-')")
        if not spec.image:
            issues.add(f"extra_roles.{role}.image", "an extra role needs an image")


def extra_role_pod_sets(name: str, args: TrainJobArgs, runtime: TrainingRuntime) -> list[PodSetSpec]:
    """One pod set per extra role, in the job's DNS subdomain, with only the role's own env, registered
    beside the job's own objects."""
    pod_sets = []
    lifecycle = args.model_copy(update={"wait_for_completion": False})
    for role, spec in sorted(args.extra_roles.items()):
        template = overlay(PodTemplate(shm_size="0"), PodTemplate(**{k: getattr(spec, k) for k in PodTemplate.model_fields}))
        main = container(template, template_env(template), ports=[], extra_mounts=[], name=role)
        own = lifecycle if spec.active_deadline_seconds is None else lifecycle.model_copy(
            update={"active_deadline_seconds": spec.active_deadline_seconds})
        pod_sets.append(pod_set(name, role, spec.num_pods, template, main, runtime, own, separate=True))
    return pod_sets
