"""DNS names and labels: what Kubernetes accepts for object names, hostnames and label values.

Patterns are matched whole (`fullmatch`): `$` would also accept a value ending in a newline.
"""

import re
from functools import lru_cache

from trainjobs.core.errors import IssueCollector, shown

MAX_DNS_LABEL = 63
CLUSTER_DOMAIN = "cluster.local"   # Kubernetes' default cluster DNS domain
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"   # set on every Indexed Job pod
MAX_DNS_SUBDOMAIN = 253
_RFC1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_RFC1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
# An env var name the kubelet accepts and `$(NAME)` can refer to.
ENV_NAME = r"[-._a-zA-Z][-._a-zA-Z0-9]*"
# A downward-API field path to one label or annotation: metadata.labels['key'].
FIELD_KEY_PATH = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def rfc1035_label_problem(value: str) -> str | None:
    """Why `value` is not an RFC 1035 label (a Service or job name), or None."""
    if len(value) > MAX_DNS_LABEL:
        return f"{shown(value)} is {len(value)} characters; the limit is {MAX_DNS_LABEL}"
    if not _RFC1035_LABEL.fullmatch(value):
        return (f'{shown(value)} is not an RFC 1035 label: use lowercase letters, digits and "-", '
                "starting with a letter and ending with a letter or digit")
    return None


def rfc1123_label_problem(value: str) -> str | None:
    """Why `value` is not an RFC 1123 label (a namespace name), or None."""
    if len(value) > MAX_DNS_LABEL or not _RFC1123_LABEL.fullmatch(value):
        return (f"{shown(value)} is not a valid namespace name: at most {MAX_DNS_LABEL} lowercase "
                'letters, digits and "-", starting and ending with a letter or digit')
    return None


def is_dns_label(value: str) -> bool:
    return len(value) <= MAX_DNS_LABEL and bool(_RFC1123_LABEL.fullmatch(value))


def is_dns_subdomain(value: str) -> bool:
    return len(value) <= MAX_DNS_SUBDOMAIN and bool(_DNS_SUBDOMAIN.fullmatch(value))


def is_rfc1035_label(value: str) -> bool:
    return len(value) <= MAX_DNS_LABEL and bool(_RFC1035_LABEL.fullmatch(value))


# Cached (here, for image references and env names): every object of every job carries the same few
# derived label keys and values, images and env names, and validating many jobs checks them again and again.
@lru_cache(maxsize=4096)
def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label or annotation key (a qualified name), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return f"key {shown(key)} has an invalid prefix {shown(prefix)} (must be a DNS subdomain)"
    if len(name) > MAX_DNS_LABEL or not _LABEL_NAME.fullmatch(name):
        return (f"key {shown(key)} is invalid: the name part must be at most {MAX_DNS_LABEL} "
                'alphanumerics, "-", "_" or ".", starting and ending with an alphanumeric')
    return None


@lru_cache(maxsize=4096)
def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value, or None."""
    if len(value) > MAX_DNS_LABEL or not _LABEL_VALUE.fullmatch(value):
        return (f'value {shown(value)} is invalid: at most {MAX_DNS_LABEL} alphanumerics, "-", "_" or ".", '
                "starting and ending with an alphanumeric (or empty)")
    return None


def dns_subdomain_problem(value: str) -> str | None:
    """Why `value` is not a DNS subdomain (the name of a Secret, ServiceAccount, PriorityClass...), or None."""
    if not is_dns_subdomain(value):
        return (f'"{value}" is not a valid name: at most 253 lowercase letters, digits, "-" and ".", '
                "starting and ending with a letter or digit")
    return None


def labelled_name_problem(value: str) -> str | None:
    """Why `value` cannot name an object through a label (a Kueue LocalQueue in `kueue.x-k8s.io/queue-name`,
    a WorkloadPriorityClass in `kueue.x-k8s.io/priority-class`), or None: the object's name is a DNS
    subdomain, and the label's value at most 63 characters, so it must be both."""
    if len(value) > MAX_DNS_LABEL or not is_dns_subdomain(value):
        return (f'{shown(value)} is not a valid name: at most {MAX_DNS_LABEL} lowercase letters, digits, "-" and ".", '
                "starting and ending with a letter or digit")
    return None


_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)"
_IMAGE_REFERENCE = re.compile(
    rf"^(?:(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")


@lru_cache(maxsize=1024)
def image_problem(value: str) -> str | None:
    """Why `value` is not an image reference the kubelet can pull (`[registry/]path[:tag][@digest]`), or None."""
    if value != value.strip():
        return f"{shown(value)} has leading or trailing whitespace; the API server refuses every pod it would create"
    if not _IMAGE_REFERENCE.fullmatch(value):
        return (f"{shown(value)} is not an image reference: use [registry[:port]/]name[:tag][@sha256:digest] with a "
                "lowercase name")
    return None


# Kubeflow's TrainJob CRD rule for initializer storage URIs, matched whole with `.` not matching a
# newline, as CEL (RE2) does.
_STORAGE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://.+")


def storage_uri_problem(value: str) -> str | None:
    """Why `value` is not a storage URI as Kubeflow's CRD requires (the scheme is checked against the
    initializer that fetches it elsewhere), or None."""
    if not _STORAGE_URI.fullmatch(value):
        return (f"{shown(value)} is not a URI: Kubeflow requires scheme://... with something after the scheme, "
                "e.g. hf://org/name or s3://bucket/path")
    return None


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


def pod_hostname(train_job: str, role: str, index: int) -> str:
    """Kubernetes names an Indexed Job's pod hostnames `<job>-<index>`."""
    return f"{job_name(train_job, role)}-{index}"


def pod_dns_name(train_job: str, role: str, index: int) -> str:
    """The pod's name through the headless Service `N`: `<N>-<role>-0-<index>.<N>`."""
    return f"{pod_hostname(train_job, role, index)}.{train_job}"
