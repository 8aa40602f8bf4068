"""scheduler-plugins coscheduling: one PodGroup holds the job's training pods, so the Coscheduling
plugin admits all of them or none (its Permit stage holds pods until minMember are placed).

Pods join by the `scheduling.x-k8s.io/pod-group` label. They need a scheduler whose profile enables
the plugin: scheduler_name names it (scheduler-plugins installed as a second scheduler), or, unset,
the cluster's default scheduler is taken to run it. The PodGroup has no queue and no priority.
"""

from trainjobs.core.args import TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.scheduling import Gang, GangScheduler, Reads, register, set_labels
from trainjobs.scheduling._podgroup import pod_group

API_VERSION = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class Coscheduling(GangScheduler):
    summary = "a scheduler-plugins PodGroup"
    reads = {"schedule_timeout_seconds": Reads("the coscheduling PodGroup's timeout",
                                               "only the coscheduling PodGroup has a schedule timeout")}

    def check(self, args: TrainJobArgs, issues: IssueCollector) -> None:
        if args.queue is not None:
            issues.add("queue", "coscheduling has no queues: remove queue, or use gang_scheduler kueue or volcano")
        if args.placement is not None:
            issues.add("placement", "a coscheduling PodGroup has no topology field (scheduler-plugins places by "
                                    "topology through other plugins and CRDs): remove placement, or use "
                                    "gang_scheduler kueue or volcano")
        if args.priority_class is not None:
            issues.add("priority_class", "a coscheduling PodGroup has no priority: set the pods' priority with "
                                         "priority_class_name instead (one priority for the whole group)")

    def decorate(self, gang: Gang) -> None:
        spec: dict = {"minMember": gang.min_member()}
        requests = gang.min_resources()
        if requests:
            spec["minResources"] = requests
        if gang.args.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = gang.args.schedule_timeout_seconds
        for pod_set in gang.members():
            set_labels(pod_set.template["metadata"], {POD_GROUP_LABEL: gang.name})
        gang.workload.objects_before.append(pod_group(gang, API_VERSION, spec))


register("coscheduling", Coscheduling())
