"""Kueue: the job's Workload waits in a LocalQueue and is admitted whole, or not at all.

Kueue admits one Workload per batch/v1 Job (or per JobSet, with one pod set per replicated job), all
its pods at once. A job whose training pods are one Job (torch, TorchTune, JAX, XGBoost, MPI with the
launcher as the only host) is therefore admitted as one unit. A job whose training pods span Jobs (an
MPI launcher Job and its node Job) would be two Workloads, admitted independently; it needs the JobSet
backend, whose one JobSet is one Workload. Kueue's pod groups cannot join them either: Kueue leaves
pods owned by a Job to the Job integration. docs/scheduling.md explains the choice. Which objects hold
the gang's pods is the backend's answer (`Backend.holders`), so a new backend needs no change here.

A job with a node range (min_nodes) opts into what Kueue offers for a batch Job that can run with fewer
pods (`elastic_admission`): partial admission (`job-min-parallelism`, with completions rewritten to the
admitted count, as an Indexed torchrun Job needs), or an elastic Job resized through workload slices
(`elastic-job`). Kueue accepts neither on a JobSet, nor both on one Job.

Kueue suspends the Jobs it manages and resumes them on admission; the job never sets `suspend`, and
Pulumi is told to ignore it, so a `pulumi up` after admission or re-queueing changes nothing.
"""

from trainjobs.core.args import ElasticAdmission, TrainJobArgs
from trainjobs.core.errors import IssueCollector, shown
from trainjobs.kube.naming import labelled_name_problem
from trainjobs.scheduling import Gang, GangScheduler, Reads, register

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
# Input paths of a Kueue-managed Job or JobSet that Kueue owns after creation (docs/scheduling.md).
KUEUE_OWNED_PATHS = ("spec.suspend",)
# What changes on the live Job of an elastic job that Kueue admits in part or that is resized.
RESIZED_PATHS = ("spec.parallelism", "spec.completions")


class Kueue(GangScheduler):
    summary = "admitted whole from a Kueue LocalQueue"
    reads = {"queue": Reads("a Kueue LocalQueue", "Kueue admits the job from a LocalQueue"),
             "priority_class": Reads("a Kueue WorkloadPriorityClass",
                                     "Kueue orders its queue by WorkloadPriorityClass"),
             "elastic_admission": Reads("how Kueue admits an elastic job", "only Kueue admits a job with fewer pods "
                                                                            "or resizes it")}

    def check(self, args: TrainJobArgs, issues: IssueCollector) -> None:
        if not args.queue:
            issues.add("queue", 'Kueue admits a job from a LocalQueue: set queue to its name (e.g. "default" where '
                                "the namespace has a default LocalQueue)")
        # Kueue's webhook refuses a queue label that is not a DNS subdomain; both labels name objects
        # (a LocalQueue, a WorkloadPriorityClass), so they must also be valid names and label values.
        for field_name, label, names in (("queue", QUEUE_LABEL, "the namespace's LocalQueue"),
                                         ("priority_class", PRIORITY_LABEL, "a WorkloadPriorityClass")):
            value = getattr(args, field_name)
            problem = labelled_name_problem(value) if value else None
            if problem:
                issues.add(field_name, f"{problem}; Kueue reads it from the label {label}, which must name "
                                       f"{names}: use that object's name")
        if args.suspend is not None:
            issues.add("suspend", "Kueue suspends and resumes the Jobs it admits: remove suspend (the job waits "
                                  "in its queue until admitted)")
        for key in (MIN_PARALLELISM, COMPLETIONS_EQUAL_PARALLELISM, ELASTIC_JOB):
            if key in (args.annotations or {}):
                issues.add(f"annotations.{key}", "is how the job opts into Kueue's partial admission or elastic "
                                                 "Jobs, which follows from num_nodes and elastic_admission: give "
                                                 'num_nodes a range (e.g. "2:4") and set elastic_admission, and '
                                                 "remove this annotation")
        if args.elastic_admission is not None and args.min_nodes is None:
            issues.add("elastic_admission", "applies to an elastic job: give num_nodes a range (e.g. \"2:4\") or "
                                            "min_nodes, or remove elastic_admission")

    def decorate(self, gang: Gang) -> None:
        args = gang.args
        holders = gang.holders()
        if len(holders) > 1:
            names = ", ".join(holders)
            gang.issues.add("gang_scheduler", f"Kueue admits each object of backend {shown(args.backend)} on its own, "
                                              f"so {names}, whose pods must run together, would be admitted "
                                              'separately: set backend "jobset" (one JobSet, admitted as one Workload)')
        refused = {issue.field for issue in gang.issues.issues}
        if not args.queue or "queue" in refused:
            return   # reported by check
        labels = {QUEUE_LABEL: args.queue}
        if args.priority_class and "priority_class" not in refused:
            labels[PRIORITY_LABEL] = args.priority_class
        gang.workload.labels.update(labels)   # on every object that runs pods, not on the pods
        gang.workload.ignore_changes = KUEUE_OWNED_PATHS
        if args.min_nodes is not None and "elastic_admission" not in refused:
            self._elastic(gang)

    @staticmethod
    def _elastic(gang: Gang) -> None:
        """The opt-in annotations of an elastic job on the batch Job that holds its training pods."""
        args = gang.args
        batch_job = tuple(gang.backend.kinds) == ("Job",)
        mode = args.elastic_admission or (ElasticAdmission.PARTIAL.value if batch_job else None)
        if mode is None:
            return   # admitted whole, at num_nodes (docs/scheduling.md)
        if not batch_job:
            gang.issues.add("elastic_admission", f"Kueue {'admits part of' if mode == 'partial' else 'resizes'} a "
                                                 f"batch Job only, not a {'/'.join(gang.backend.kinds)} (backend "
                                                 f'{shown(args.backend)}): set backend "jobs", or remove '
                                                 "elastic_admission (Kueue then admits the job whole)")
            return
        # Kueue (partial admission) or whoever resizes the elastic Job changes both on the live Job; a diff on
        # them would replace it, restarting training.
        gang.workload.ignore_changes = (*gang.workload.ignore_changes, *RESIZED_PATHS)
        opt_in = ({MIN_PARALLELISM: str(args.min_nodes), COMPLETIONS_EQUAL_PARALLELISM: "true"}
                  if mode == ElasticAdmission.PARTIAL.value else {ELASTIC_JOB: "true"})
        for member in gang.members():   # one Job: decorate refuses a gang spread over several
            member.annotations.update(opt_in)


register("kueue", Kueue())
