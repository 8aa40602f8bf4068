"""Kubernetes' rules on names: DNS labels and subdomains, label keys and values, image references, and
how a value is quoted in a message about it. Pure: no argument model is known here.

Patterns are matched whole (`fullmatch`): `$` would also accept a value ending in a newline.
"""

import re
from functools import lru_cache
from typing import Any

SHOWN_CHARACTERS = 64


def shown(value: Any, limit: int = SHOWN_CHARACTERS) -> str:
    """A value quoted for a message: control characters escaped, values over `limit` characters cut, so
    an error never carries terminal escapes, fake lines or megabytes of input."""
    text = value if isinstance(value, str) else repr(value)
    cut = text[:limit]
    quoted = '"' + "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut) + '"'
    return quoted if len(text) <= limit else f"{quoted[:-1]}...\" ({len(text)} characters)"


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
