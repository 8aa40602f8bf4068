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
