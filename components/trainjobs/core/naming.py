"""The job's names and the rules on its arguments' values: the objects, hostnames and DNS names every job
derives (`N`, `<N>-<role>-0`), and which Kubernetes rule (trainjobs.kube.naming) each argument must meet."""

from trainjobs.core.errors import IssueCollector
from trainjobs.kube.naming import (dns_subdomain_problem, image_problem, label_value_problem, rfc1123_label_problem,
                                   storage_uri_problem)
# Kubernetes' rules that tools/, policy/ and localrun/ still import from here (they live in trainjobs.kube.naming).
from trainjobs.kube.naming import (CLUSTER_DOMAIN, COMPLETION_INDEX_ANNOTATION, ENV_NAME, FIELD_KEY_PATH,  # noqa: F401
                                   MAX_DNS_LABEL, is_dns_label, is_dns_subdomain, is_rfc1035_label, label_key_problem,
                                   rfc1035_label_problem)

# The rule for each argument (by its field name) whose value may arrive as an Output: checked at
# construction when plain, and when Pulumi resolves it otherwise.
_ARGUMENT_RULES = {
    "image": image_problem,
    "namespace": rfc1123_label_problem,
    "service_account_name": dns_subdomain_problem,
    "priority_class_name": dns_subdomain_problem,
    "secret_name": dns_subdomain_problem,
    "workspace_storage_class": dns_subdomain_problem,
    "image_pull_secrets": dns_subdomain_problem,
    "labels": label_value_problem,
    "pod_labels": label_value_problem,
    "node_selector": label_value_problem,
    "storage_uri": storage_uri_problem,
}


def argument_value_problem(field: str, value: object) -> str | None:
    """Why `value` cannot be the value of argument `field` (a field name such as "image"), or None."""
    rule = _ARGUMENT_RULES.get(field)
    if rule is None or value is None:
        return None
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    return rule(value)


def check_plain(issues: IssueCollector, field: str, value: object, path: str | None = None) -> None:
    """The argument's rule on a value known now; a value that arrives as an Output is checked with the
    same rule when it resolves (see the component)."""
    if isinstance(value, str):
        problem = argument_value_problem(field, value)
        if problem:
            issues.add(path or field, problem)


def run_job_name(name: str, run: str | None) -> str:
    """The name every object of a job is named after (`N`): the job's name, with its run when it has one."""
    return name if run is None else f"{name}-{run}"


def job_name(train_job: str, role: str) -> str:
    """The Indexed Job of a role: `<N>-<role>-0`, as Kubeflow's JobSet names it."""
    return f"{train_job}-{role}-0"


def claim_template_name(train_job: str, role: str) -> str:
    """The ResourceClaimTemplate a role's pods claim their devices from: `<N>-<role>-devices`."""
    return f"{train_job}-{role}-devices"


def pod_hostname(train_job: str, role: str, index: int) -> str:
    """Kubernetes names an Indexed Job's pod hostnames `<job>-<index>`."""
    return f"{job_name(train_job, role)}-{index}"


def pod_dns_name(train_job: str, role: str, index: int) -> str:
    """The pod's name through the headless Service `N`: `<N>-<role>-0-<index>.<N>`."""
    return f"{pod_hostname(train_job, role, index)}.{train_job}"
