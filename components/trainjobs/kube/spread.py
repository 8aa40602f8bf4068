"""The API server's rules for a pod's `topologySpreadConstraints` (ValidateTopologySpreadConstraints).

The arguments pass the constraints through to every pod, so whatever the API server refuses would
refuse every pod the job creates: they are checked where the argument is read, with these rules.
"""

from typing import Any

from trainjobs.kube.naming import label_key_problem

__all__ = ["spread_problems"]

_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
_NODE_POLICIES = ("Honor", "Ignore")
_FIELDS = ("maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains", "nodeAffinityPolicy",
           "nodeTaintsPolicy", "matchLabelKeys")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def spread_problems(constraints: Any) -> list[tuple[str, str]]:
    """(path inside the list such as `[0].maxSkew`, what is wrong) for each refused value, in order."""
    if not isinstance(constraints, list):
        return [("", "must be a list of topologySpreadConstraints")]
    found: list[tuple[str, str]] = []
    seen: dict[tuple[Any, Any], int] = {}
    for i, entry in enumerate(constraints):
        at = f"[{i}]"
        if not isinstance(entry, dict):
            found.append((at, "must be a mapping with maxSkew, topologyKey and whenUnsatisfiable"))
            continue
        for key in entry:
            if key not in _FIELDS:
                found.append((f"{at}.{key}", f"is not a field of a topology spread constraint: use "
                                             f"{', '.join(_FIELDS)} (Kubernetes' camelCase)"))
        skew = entry.get("maxSkew")
        if skew is None:
            found.append((f"{at}.maxSkew", "is required: how many more pods one domain may have than another"))
        elif not _whole(skew) or skew < 1:
            found.append((f"{at}.maxSkew", f"must be a whole number of at least 1 (got {skew!r})"))
        key = entry.get("topologyKey")
        if key is None or key == "":
            found.append((f"{at}.topologyKey", "is required: the node label whose values are the domains, "
                                               "e.g. topology.kubernetes.io/zone"))
        elif not isinstance(key, str) or label_key_problem(key):
            found.append((f"{at}.topologyKey", f"must be a node label key: {label_key_problem(str(key))}"))
        when = entry.get("whenUnsatisfiable")
        if when is None:
            found.append((f"{at}.whenUnsatisfiable", "is required: DoNotSchedule or ScheduleAnyway"))
        elif when not in _WHEN_UNSATISFIABLE:
            found.append((f"{at}.whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway (got {when!r})"))
        if "minDomains" in entry:
            domains = entry["minDomains"]
            if not _whole(domains) or domains < 1:
                found.append((f"{at}.minDomains", f"must be a whole number of at least 1 (got {domains!r})"))
            elif when == "ScheduleAnyway":
                found.append((f"{at}.minDomains", "applies only with whenUnsatisfiable DoNotSchedule: remove it, or "
                                                  "use DoNotSchedule"))
        if "labelSelector" in entry and not isinstance(entry["labelSelector"], dict):
            found.append((f"{at}.labelSelector", "must be a label selector (a mapping with matchLabels or "
                                                 "matchExpressions)"))
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if policy in entry and entry[policy] not in _NODE_POLICIES:
                found.append((f"{at}.{policy}", f"must be Honor or Ignore (got {entry[policy]!r})"))
        keys = entry.get("matchLabelKeys")
        if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)):
            found.append((f"{at}.matchLabelKeys", "must be a list of pod label keys"))
        pair = (key, when)
        if isinstance(key, str) and isinstance(when, str):
            if pair in seen:
                found.append((at, f"repeats topologyKey {key} with whenUnsatisfiable {when} of entry "
                                  f"[{seen[pair]}]; the API server allows one constraint per pair"))
            seen.setdefault(pair, i)
    return found
