"""`run-local --admit` and `--resize`: a Job run with fewer pods and resized while it runs, as Kueue and
the Job controller do it, and the options refused where Kubernetes or Kueue would not do it."""

import pytest

from trainjobs.localrun.jobs import JobRun
from trainjobs.localrun.plan import JobSpec, PlanError
from trainjobs.localrun.resize import Admission, Resize, resolve
from trainjobs.scheduling.kueue import ELASTIC_JOB, MIN_PARALLELISM

from test_jobs import Pod, start_all


def spec(count=4, annotations=None, owner=None, indexed=True, parallelism=None):
    return JobSpec(name="j-node-0", namespace="default", manifest={"metadata": {"annotations": annotations or {}}},
                   completions=count, parallelism=count if parallelism is None else parallelism, backoff_limit=0,
                   active_deadline_seconds=None, indexed=indexed, group="j", slots=[object()] * count, owner=owner)


def test_an_admission_runs_the_first_indexes_only():
    job = spec(annotations={MIN_PARALLELISM: "2"})
    resolve([Admission.parse("j-node-0=2")], [], [job])
    assert (job.completions, job.parallelism) == (2, 2)
    assert sorted(start_all(JobRun(job))) == [0, 1]


def test_growing_starts_the_new_indexes_and_shrinking_removes_the_highest_without_counting_them():
    job = spec(count=3, annotations={ELASTIC_JOB: "true"})
    resolve([], [Resize.parse("j-node-0=2@1"), Resize.parse("j-node-0=3@2")], [job])
    run = JobRun(job)
    pods = start_all(run)
    assert run.resize(2, 1.0) == [pods[2]]
    assert pods[2].stopped_because == "removed: Job scaled down to 2 pod(s)"
    assert [p.resized for p in pods.values()] == ["kept", "kept", "removed"]
    assert sorted(run.active) == [0, 1] and run.failures == 0 and not run.state
    assert run.resize(3, 2.0) == []
    grown = start_all(run, 2.0)
    assert sorted(grown) == [2] and grown[2] is not pods[2]
    pods.update(grown)
    for index in (0, 1, 2):
        pods[index].phase = "Succeeded"
        run.pod_finished(pods[index], 3.0)
    assert (run.state, run.succeeded, job.completions) == ("Complete", {0, 1, 2}, 3)


def test_a_shrink_below_the_succeeded_indexes_completes_the_job():
    run = JobRun(spec(count=3))
    pods = start_all(run)
    for index in (0, 1):
        pods[index].phase = "Succeeded"
        run.pod_finished(pods[index], 1.0)
    run.resize(2, 2.0)
    assert run.state == "Complete" and pods[2].phase == "Stopped"


def test_resizes_are_parsed_with_their_trigger():
    assert Resize.parse("j-node-0=3@output:phase 1 done") == Resize("j-node-0", 3, after_output="phase 1 done")
    assert Resize.parse("j-node-0=2@30s") == Resize("j-node-0", 2, after_seconds=30.0)
    assert Resize.parse("j-node-0=2@30").describe() == "resize: Job j-node-0 to 2 pod(s) 30s after it starts"


def test_an_output_trigger_sees_only_what_is_printed_after_it_is_armed(tmp_path):
    log = tmp_path / "node.log"
    log.write_text("E2E-PHASE-DONE 1\n")
    resize = Resize.parse("j=2@output:E2E-PHASE-DONE")
    resize.arm([log])
    assert not resize.due(0.0, 1.0, [log])
    with log.open("a") as f:
        f.write("E2E-PHASE-DONE 2\n")
    assert resize.due(0.0, 1.0, [log])


@pytest.mark.parametrize("text, message", [
    ("j-node-0", "--admit j-node-0: expected JOB=N (e.g. myjob-node-0=2)"),
    ("j-node-0=0", "--admit j-node-0=0: '0' is not a number of pods (1 or more)"),
    ("j-node-0=5", "--admit j-node-0=5: the Job is made for 4 pod(s) at most"),
    ("other=2", "--admit other: no such Job runs; Jobs: j-node-0"),
])
def test_bad_admissions_are_refused_before_anything_runs(text, message):
    with pytest.raises(PlanError) as caught:
        resolve([Admission.parse(text)], [], [spec()])
    assert str(caught.value) == message


@pytest.mark.parametrize("text, message", [
    ("j-node-0=3", "--resize j-node-0=3: expected JOB=N@SECONDS or JOB=N@output:TEXT"),
    ("j-node-0=3@soon", "--resize j-node-0=3@soon: 'soon' is neither seconds (e.g. 30) nor output:TEXT"),
])
def test_bad_resizes_are_refused(text, message):
    with pytest.raises(PlanError) as caught:
        Resize.parse(text)
    assert str(caught.value) == message


@pytest.mark.parametrize("annotations", [{ELASTIC_JOB: "true"}, {}])
def test_kueue_admits_a_job_in_part_only_with_partial_admission(annotations):
    """Kueue's Workload has a minCount only from job-min-parallelism: an elastic Job is admitted whole or waits."""
    with pytest.raises(PlanError) as caught:
        resolve([Admission.parse("j-node-0=2")], [], [spec(annotations=annotations)])
    assert str(caught.value) == (f"--admit j-node-0=2: Kueue admits a Job in part only with partial admission "
                                 f"({MIN_PARALLELISM}, elastic_admission: partial); it admits this Job whole or not "
                                 "at all")


def test_kueue_admits_no_fewer_than_the_min_parallelism():
    with pytest.raises(PlanError) as caught:
        resolve([Admission.parse("j-node-0=1")], [], [spec(annotations={MIN_PARALLELISM: "2"})])
    assert str(caught.value) == (f"--admit j-node-0=1: Kueue admits at least 2 of its pods ({MIN_PARALLELISM}), "
                                 "never fewer")


def test_a_partially_admitted_job_keeps_its_size():
    with pytest.raises(PlanError) as caught:
        resolve([], [Resize.parse("j-node-0=3@output:x")], [spec(annotations={MIN_PARALLELISM: "2"})])
    assert str(caught.value) == (f"--resize j-node-0: Kueue admitted this Job in part ({MIN_PARALLELISM}) and keeps "
                                 f"its size until it ends; a Job that Kueue resizes is marked {ELASTIC_JOB} "
                                 "(elastic_admission: slices)")


@pytest.mark.parametrize("job, message", [
    (spec(owner="j"), "--resize j-node-0: its JobSet j creates it, and Kueue admits a JobSet whole and never "
                      "resizes it"),
    (spec(parallelism=2), "--resize j-node-0: only an Indexed Job whose completions equal its parallelism can run "
                          "with fewer pods or be resized"),
    (spec(indexed=False), "--resize j-node-0: only an Indexed Job whose completions equal its parallelism can run "
                          "with fewer pods or be resized"),
])
def test_only_a_jobs_own_indexed_job_is_resized(job, message):
    with pytest.raises(PlanError) as caught:
        resolve([], [Resize.parse("j-node-0=3@1")], [job])
    assert str(caught.value) == message
