"""Failure policies as Kubernetes' controllers apply them: a Job's podFailurePolicy, and a JobSet's
failurePolicy rules. Pure: verdicts from a failed pod's exit codes and conditions, or from a failed
Job's reason; nothing here runs a pod. run-local's Job controller acts on them, and `trainjobs status` says
which pod failed its Job by them.
"""

import re
from dataclasses import dataclass
from typing import Any

# The pod condition of a pod stopped from outside (preempted, evicted, its node drained).
DISRUPTION_TARGET = "DisruptionTarget"
# A Job's failure reasons (its Failed condition), as a JobSet failure policy rule matches them.
POD_FAILURE_POLICY = "PodFailurePolicy"   # a podFailurePolicy FailJob rule failed it
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
DEADLINE_EXCEEDED = "DeadlineExceeded"
FAILED_INDEXES = "FailedIndexes"
MAX_FAILED_INDEXES_EXCEEDED = "MaxFailedIndexesExceeded"


@dataclass(frozen=True)
class PodVerdict:
    """What a podFailurePolicy rule makes of a failed pod: FailJob, FailIndex, Ignore or Count."""

    action: str
    message: str


def pod_verdict(rules: list[dict[str, Any]], pod: str, exit_codes: dict[str, int],
                conditions: set[str]) -> PodVerdict | None:
    """The first rule that matches the failed pod (`namespace/name`, as the Job controller's messages name it),
    as the Job controller evaluates them, or None (the failure counts). `exit_codes`: each terminated
    container's code; `conditions`: the pod's conditions with status True."""
    for number, rule in enumerate(rules):
        action = rule["action"]
        on_codes = rule.get("onExitCodes")
        if on_codes:
            wanted = set(on_codes.get("values") or [])
            within = on_codes.get("operator") == "In"
            for container, code in exit_codes.items():
                if on_codes.get("containerName") not in (None, container) or code == 0:
                    continue
                if (code in wanted) == within:
                    return PodVerdict(action, f"Container {container} for pod {pod} failed with exit code {code} "
                                              f"matching {action} rule at index {number}")
        for condition in rule.get("onPodConditions") or []:
            if condition.get("status", "True") == "True" and condition["type"] in conditions:
                return PodVerdict(action, f"Pod {pod} has condition {condition['type']} matching {action} rule "
                                          f"at index {number}")
    return None


def jobset_rule(rules: list[dict[str, Any]], replicated_job: str, reason: str, message: str) -> dict[str, Any] | None:
    """The first JobSet failurePolicy rule that applies to a Job of `replicated_job` failed for `reason`."""
    for rule in rules:
        if rule.get("onJobFailureReasons") and reason not in rule["onJobFailureReasons"]:
            continue
        patterns = rule.get("onJobFailureMessagePatterns")
        if patterns and not any(re.search(p, message) for p in patterns):
            continue
        if rule.get("targetReplicatedJobs") and replicated_job not in rule["targetReplicatedJobs"]:
            continue
        return rule
    return None
