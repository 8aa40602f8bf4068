"""DNS names and labels: what Kubernetes accepts for object names, hostnames and label values."""

import re

MAX_DNS_LABEL = 63
_RFC1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def rfc1035_label_problem(value: str) -> str | None:
    """Why `value` is not an RFC 1035 label (a Service or job name), or None."""
    if len(value) > MAX_DNS_LABEL:
        return f'"{value}" is {len(value)} characters; the limit is {MAX_DNS_LABEL}'
    if not _RFC1035_LABEL.match(value):
        return (f'"{value}" is not an RFC 1035 label: use lowercase letters, digits and "-", '
                "starting with a letter and ending with a letter or digit")
    return None


def rfc1123_label_problem(value: str) -> str | None:
    """Why `value` is not an RFC 1123 label (a namespace name), or None."""
    if len(value) > MAX_DNS_LABEL or not _RFC1123_LABEL.match(value):
        return (f'"{value}" is not a valid namespace name: at most {MAX_DNS_LABEL} lowercase '
                'letters, digits and "-", starting and ending with a letter or digit')
    return None


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label or annotation key, or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f'key "{key}" has an invalid prefix "{prefix}" (must be a DNS subdomain)'
    if len(name) > MAX_DNS_LABEL or not _LABEL_NAME.match(name):
        return (f'key "{key}" is invalid: the name part must be at most {MAX_DNS_LABEL} '
                'alphanumerics, "-", "_" or ".", starting and ending with an alphanumeric')
    return None


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value, or None."""
    if len(value) > MAX_DNS_LABEL or not _LABEL_VALUE.match(value):
        return (f'value "{value}" is invalid: at most {MAX_DNS_LABEL} alphanumerics, "-", "_" or ".", '
                "starting and ending with an alphanumeric (or empty)")
    return None
