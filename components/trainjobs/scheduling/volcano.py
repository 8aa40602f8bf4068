"""Volcano: one PodGroup holds the job's training pods, so Volcano binds all of them or none.

Pods join by the `scheduling.k8s.io/group-name` annotation and `schedulerName: volcano`; Volcano's
PodGroup controller then leaves them to the explicit group. Pods outside the gang (initializers,
extra roles) keep Volcano as their scheduler and name the queue, so Volcano gives each of their Jobs
a group of its own in that queue.
"""

from trainjobs.core.args import TrainJobArgs
from trainjobs.core.errors import IssueCollector
from trainjobs.core.naming import dns_subdomain_problem
from trainjobs.scheduling import Gang, GangScheduler, Scheduled, set_labels
from trainjobs.scheduling._podgroup import pod_group

API_VERSION = "scheduling.volcano.sh/v1beta1"
SCHEDULER_NAME = "volcano"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


class Volcano(GangScheduler):
    def check(self, args: TrainJobArgs, issues: IssueCollector) -> None:
        # The PodGroup CRD's pattern on spec.queue, and the name of a PriorityClass: DNS subdomains.
        for field_name, names in (("queue", "a Volcano Queue (the PodGroup's spec.queue)"),
                                  ("priority_class", "a PriorityClass (the PodGroup's spec.priorityClassName)")):
            value = getattr(args, field_name)
            problem = dns_subdomain_problem(value) if value else None
            if problem:
                issues.add(field_name, f"{problem}; it names {names}: use that object's name")

    def decorate(self, gang: Gang, scheduled: Scheduled) -> None:
        args = gang.args
        spec: dict = {"minMember": gang.min_member()}
        requests = gang.min_resources()
        if requests:
            spec["minResources"] = requests
        if args.queue:
            spec["queue"] = args.queue
        if args.priority_class:
            spec["priorityClassName"] = args.priority_class
        for template in (p.template for p in gang.all_sets):
            template["spec"].setdefault("schedulerName", SCHEDULER_NAME)
        for template in gang.member_templates():
            set_labels(template["metadata"], {GROUP_ANNOTATION: gang.name}, key="annotations")
        if args.queue:
            for template in gang.other_templates():
                set_labels(template["metadata"], {QUEUE_ANNOTATION: args.queue}, key="annotations")
        scheduled.add_before_jobs(pod_group(gang, API_VERSION, spec))


SCHEDULER = Volcano()
