"""DNS names and labels: what Kubernetes accepts for object names, hostnames and label values.

Patterns are matched whole (`fullmatch`): `$` would also accept a value ending in a newline.
"""

import re

from .errors import shown

MAX_DNS_LABEL = 63
MAX_DNS_SUBDOMAIN = 253
_RFC1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_RFC1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
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


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label or annotation key (a qualified name), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return f"key {shown(key)} has an invalid prefix {shown(prefix)} (must be a DNS subdomain)"
    if len(name) > MAX_DNS_LABEL or not _LABEL_NAME.fullmatch(name):
        return (f"key {shown(key)} is invalid: the name part must be at most {MAX_DNS_LABEL} "
                'alphanumerics, "-", "_" or ".", starting and ending with an alphanumeric')
    return None


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


_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)"
_IMAGE_REFERENCE = re.compile(
    rf"^(?:(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")


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
