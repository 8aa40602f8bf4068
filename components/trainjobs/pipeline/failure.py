"""A job's failure policy as Job fields: podFailurePolicy rules, backoffLimitPerIndex, maxFailedIndexes.

The pipeline applies it to every pod set of a job, whatever the family, before a backend builds them. Rules match in order, the first wins:

1. a pod with the DisruptionTarget condition (preempted, evicted by a drain, its spot node reclaimed) is
   ignored (action Ignore): the Job replaces it without counting a failure, unless count_disruptions;
2. a fatal exit code of the main container fails the Job at once (FailJob);
3. a retriable exit code of the main container counts against the backoff limit (Count), and when
   retriable codes are given, any other non-zero exit code of the main container fails the Job (FailJob).

Exit-code rules name the main container, so a sidecar's or an init container's exit code never
matches them; they apply to the training Jobs only (an initializer or an extra role runs another
program, whose exit codes mean something else). podFailurePolicy needs restartPolicy Never, which
every Job of a job has.
"""

from typing import Any

from trainjobs.core.args import FailurePolicy, TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.core.podsets import PodSetSpec
from trainjobs.kube.policies import DISRUPTION_TARGET

__all__ = ["apply_failure_policy", "check_failure_policy", "policy_of"]

DEFAULT_POLICY = FailurePolicy()
DISRUPTION = {"type": DISRUPTION_TARGET, "status": "True"}


def policy_of(args: TrainJobArgs) -> FailurePolicy:
    """The job's failure policy; without one, the default (disruptions do not count)."""
    return args.failure_policy or DEFAULT_POLICY


def check_failure_policy(issues: IssueCollector, args: TrainJobArgs, restart_refusal: str | None) -> None:
    """Per-index retries only where the family takes a replaced pod back (`restart_refusal` is None);
    retriable exit codes need retries to spend."""
    policy = policy_of(args)
    profile = (args.profile.failure_policy if args.profile else None) or DEFAULT_POLICY
    for code in policy.fatal_and_retriable():   # each policy alone was valid: the profile's and the job's merged
        mine, theirs = (("retriable", "fatal") if code in (profile.fatal_exit_codes or ()) else ("fatal", "retriable"))
        issues.add(f"failure_policy.{mine}_exit_codes",
                   f"{code} is {theirs} in the profile (profile.failure_policy.{theirs}_exit_codes) and {mine} here: "
                   f"an exit code is either fatal or retriable; remove it from one")
    if policy.backoff_limit_per_index is not None and restart_refusal:
        issues.add("failure_policy.backoff_limit_per_index",
                   f"{restart_refusal}. Without backoff_limit_per_index a failed pod fails the job; restart the "
                   "whole group instead (failure_policy.max_restarts with the jobset backend, or "
                   "`pulumi up --replace`)")
    if (policy.retriable_exit_codes and policy.backoff_limit_per_index is None
            and not args.backoff_limit):
        issues.add("failure_policy.retriable_exit_codes",
                   "retriable exit codes are retried within the backoff limit, and backoff_limit is 0: set "
                   "backoff_limit (or failure_policy.backoff_limit_per_index) to how many retries to allow")


def apply_failure_policy(pod_set: PodSetSpec, args: TrainJobArgs) -> None:
    """The job's failure policy in the pod set's Job-level rules; exit-code rules for training pods only."""
    policy = policy_of(args)
    spec = pod_set.rules
    rules: list[dict[str, Any]] = []
    if not policy.count_disruptions:
        rules.append({"action": "Ignore", "onPodConditions": [dict(DISRUPTION)]})
    if pod_set.gang:
        main = pod_set.template["spec"]["containers"][0]["name"]
        if policy.fatal_exit_codes:
            rules.append(_on_exit_codes("FailJob", main, "In", policy.fatal_exit_codes))
        if policy.retriable_exit_codes:
            rules.append(_on_exit_codes("Count", main, "In", policy.retriable_exit_codes))
            rules.append(_on_exit_codes("FailJob", main, "NotIn", policy.retriable_exit_codes))
        if policy.backoff_limit_per_index is not None:
            # Kubernetes then defaults backoffLimit to the int32 maximum; an explicit backoff_limit stays as
            # a cap on all failures together.
            if "backoff_limit" not in args.model_fields_set:
                spec.pop("backoffLimit", None)
            spec["backoffLimitPerIndex"] = policy.backoff_limit_per_index
            if policy.max_failed_indexes is not None:
                spec["maxFailedIndexes"] = policy.max_failed_indexes
    if rules:
        spec["podFailurePolicy"] = {"rules": rules}


def _on_exit_codes(action: str, container: str, operator: str, codes: list[int]) -> dict[str, Any]:
    return {"action": action, "onExitCodes": {"containerName": container, "operator": operator,
                                              "values": list(codes)}}
