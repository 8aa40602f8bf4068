"""Per-pod views (`ranks.txt`, `explain`): escaping, files and scripts shown once, huge Jobs summarised."""

import pytest

from trainjobs import MpiTrainJob, TorchTrainJob
from trainjobs.tools.podview import ObjectIndex, pod_view
from trainjobs.tools.cli.render import FULL_PODS_PER_JOB, PODS_AT_EACH_END, kubernetes_objects, ranks_text, shown
from trainjobs.testing import run

HOSTILE = {
    "FAKE_LINE": "x\nPET_NNODES=999",
    "CLEAR_SCREEN": "\x1b[2J\x1b]0;title\x07",
    "C1_CSI": "\x9b31m",
    "BIDI": "invoice\u202etxt.exe",
    "ISOLATE": "\u2066hidden\u2069",
    "LINE_SEPARATOR": "a\u2028b",
    "LOOKS_ESCAPED": "$'x'",
    "PLAIN": "a b\\c 'd' \"e\"",
}


def job(name: str, completions: int = 2, namespace: str | None = None, init=(), volumes=(), **container) -> dict:
    """An Indexed Job with one container `main`, its pods under the headless Service `name`."""
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    spec = {"subdomain": name, "containers": [{"name": "main", "image": "img:1", **container}],
            "initContainers": list(init), "volumes": list(volumes)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"completions": completions, "completionMode": "Indexed", "template": {"spec": spec}}}


def config_map(name: str, data: dict, namespace: str | None = None) -> dict:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def assert_inert(text: str) -> None:
    """Nothing in the text that a terminal would act on or a reader could not see."""
    assert all(ch == "\n" or ch.isprintable() for ch in text)


@pytest.mark.parametrize("value, expected", [
    ("plain value", "plain value"),
    ("x\nPET_NNODES=999", "$'x\\nPET_NNODES=999'"),
    ("\x1b[2J\x1b]0;title\x07", "$'\\e[2J\\e]0;title\\x07'"),
    ("\x9b31m\x7f\x00", "$'\\x9b31m\\x7f\\x00'"),
    ("invoice\u202etxt.exe", "$'invoice\\u202etxt.exe'"),
    ("tab\there\r", "$'tab\\there\\r'"),
    ("tag\U000e0041", "$'tag\\U000e0041'"),
    ("$'x'", "$'$\\'x\\''"),
    ("back\\slash 'q' \u00e9", "back\\slash 'q' \u00e9"),
])
def test_shown_escapes_what_a_terminal_acts_on_or_hides(value, expected):
    assert shown(value) == expected


def test_hostile_env_command_and_file_content_cannot_fake_lines_or_reach_the_terminal():
    script = "echo start\n\x1b[31mPET_NNODES=999\necho \u202eend"
    objects = [
        config_map("cfg", {"run.sh": "ok\n\x1b[2Jcleared\nPET_NNODES=999\n", "\x1b[31mkey": "v"}),
        job("evil", env=[{"name": k, "value": v} for k, v in HOSTILE.items()],
            command=["sh", "-c", script, "arg\x1b[0m", "one\u2028line"],
            volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}], volumes=[{"name": "cfg", "configMap": {"name": "cfg"}}]),
    ]
    text = ranks_text(objects)
    assert_inert(text)
    lines = text.split("\n")
    assert not any(line.lstrip().startswith("PET_NNODES=999") for line in lines)
    for name, value in HOSTILE.items():
        assert f"    {name}={shown(value)}" in lines
    assert "    FAKE_LINE=$'x\\nPET_NNODES=999'" in lines
    assert "    PLAIN=a b\\c 'd' \"e\"" in lines
    assert "    run: sh -c <script 1> $'arg\\e[0m' $'one\\u2028line'" in lines
    assert "script 1, run by container main in Job evil:\n  | echo start\n  | $'\\e[31mPET_NNODES=999'\n" \
           "  | $'echo \\u202eend'\n" in text
    assert "file ConfigMap cfg key run.sh, mounted at /cfg/run.sh in Job evil:\n  | ok\n  | $'\\e[2Jcleared'\n" \
           "  | PET_NNODES=999\n" in text
    assert "  file $'/cfg/\\e[31mkey' (mode 0644) = ConfigMap cfg key $'\\e[31mkey', shown above" in lines


def test_a_newline_in_an_env_value_from_the_stack_config_stays_on_its_line(capsys):
    from trainjobs.tools.cli.main import main
    jobs = 'jobs=[{kind: TorchTrainJob, name: demo, env: {NOTE: "a\\nPET_NNODES=999"}}]'
    assert main(["explain", "stacks/__main__.py", "--config", jobs]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert "    NOTE=$'a\\nPET_NNODES=999'" in lines
    assert "PET_NNODES=999" not in lines
    assert [line for line in lines if line.startswith("    PET_NNODES=")] == ["    PET_NNODES=1"]


def node_lines(text: str, pod: str) -> str:
    """The lines of one pod's view."""
    start = text.index(f"pod {pod}  ")
    return (text + "\n")[start:(text + "\n").index("\n\n", start)]


def test_a_job_up_to_the_threshold_shows_every_pod_in_full():
    text = ranks_text(kubernetes_objects(run(lambda: TorchTrainJob("t", {"image": "x:1",
                                                                        "num_nodes": FULL_PODS_PER_JOB}))))
    for i in range(FULL_PODS_PER_JOB):
        assert f"    PET_NODE_RANK={i}   <- fieldRef" in node_lines(text, f"t-node-0-{i}")
    assert "<index>" not in text


def test_a_huge_job_shows_its_first_and_last_pods_and_one_template_for_the_rest():
    n = 100000
    text = ranks_text(kubernetes_objects(run(lambda: TorchTrainJob("big", {"image": "x:1", "num_nodes": n}))))
    shown_in_full = [*range(PODS_AT_EACH_END), *range(n - PODS_AT_EACH_END, n)]
    assert text.count("\npod big-node-0-") + text.startswith("pod ") == len(shown_in_full) + 1
    for i in shown_in_full:
        pod = node_lines(text, f"big-node-0-{i}")
        assert f"    PET_NODE_RANK={i}   <- fieldRef" in pod and f"    JOB_COMPLETION_INDEX={i}   <- set" in pod
    first, last = PODS_AT_EACH_END, n - PODS_AT_EACH_END - 1
    template = text[text.index(f"pods {first} to {last} of Job"):]
    template = template[:template.index("\n\n")]
    assert template.split("\n") == [
        f"pods {first} to {last} of Job big-node-0 ({last - first + 1} pods): each is this pod with <index> its "
        "completion index",
        "pod big-node-0-<index>  (Job big-node-0, index <index>)",
        "  dns: big-node-0-<index>.big  big-node-0-<index>.big.default.svc.cluster.local",
        "  container node: x:1",
        f"    PET_NNODES={n}",
        "    PET_NPROC_PER_NODE=1",
        "    PET_NODE_RANK=<index>   <- fieldRef metadata.annotations['batch.kubernetes.io/job-completion-index']",
        "    PET_MASTER_ADDR=big-node-0-0.big",
        "    PET_MASTER_PORT=29500",
        "    JOB_COMPLETION_INDEX=<index>   <- set by Kubernetes for Indexed Jobs",
    ]


def test_a_huge_mpi_job_lists_its_hostfile_once_and_each_workers_entry_in_the_template():
    text = ranks_text(kubernetes_objects(run(lambda: MpiTrainJob("m", {"image": "x:1", "command": ["mpirun", "x"],
                                                                       "num_nodes": 40}))))
    assert text.count("m-node-0-17.m slots=1") == 1   # in the hostfile, shown once
    assert "  host: m-node-0-<index>.m slots=1   <- /etc/mpi/hostfile in Job m-launcher-0\n" in text
    assert "  host: m-node-0-39.m slots=1   <- /etc/mpi/hostfile in Job m-launcher-0\n" in node_lines(text, "m-node-0-39")
    assert "; 0 listed" not in text and "shown in full after it" not in text


@pytest.mark.parametrize("listed, odd", [(range(12), range(12, 18)), ([i for i in range(20) if i != 2], [2])])
def test_pods_listed_unlike_most_are_shown_in_full(listed, odd):
    objects = [config_map("hosts", {"hostfile": "".join(f"w-{i}.w slots=1\n" for i in listed)}),
               job("l", 1, volumeMounts=[{"name": "h", "mountPath": "/etc/h"}],
                   volumes=[{"name": "h", "configMap": {"name": "hosts"}}]),
               job("w", 20)]
    text = ranks_text(objects)
    assert f"pods 2 to 17 of Job w (16 pods): each is this pod with <index> its completion index; {len(odd)} " \
           "listed differently in files are shown in full after it\n" in text
    assert "  host: w-<index>.w slots=1   <- /etc/h/hostfile in Job l\n" in text
    for i in range(2, 18):
        if i in odd:
            assert "host:" not in node_lines(text, f"w-{i}")
        else:
            assert f"pod w-{i}  " not in text


def test_a_script_that_holds_the_index_is_shown_once_with_the_index_marked():
    objects = [job("j", 3, command=["sh", "-c", "echo rank $(JOB_COMPLETION_INDEX)\necho done"])]
    text = ranks_text(objects)
    assert text.startswith("script 1, run by container main in Job j, with <index> the pod's completion index:\n"
                           "  | echo rank <index>\n  | echo done\n\n")
    assert text.count("    run: sh -c <script 1>\n") == 3


def test_files_come_from_the_pods_namespace_and_missing_sources_are_flagged():
    mount = {"volumeMounts": [{"name": "c", "mountPath": "/c"}, {"name": "gone", "mountPath": "/gone"},
                              {"name": "item", "mountPath": "/one/x.py", "subPath": "x.py"},
                              {"name": "item", "mountPath": "/two/x.py", "subPathExpr": "$(FILE)"}],
             "env": [{"name": "FILE", "value": "x.py"}]}
    volumes = [{"name": "c", "configMap": {"name": "code"}}, {"name": "gone", "configMap": {"name": "nope"}},
               {"name": "item", "configMap": {"name": "code", "items": [{"key": "x", "path": "x.py", "mode": 0o500},
                                                                      {"key": "y", "path": "y.py"}]}}]
    objects = [config_map("code", {"x": "print('a')\n"}, "a"), config_map("code", {"x": "print('b')\n"}, "b"),
               job("ja", 1, "a", volumes=volumes, **mount), job("jb", 1, "b", volumes=volumes, **mount)]
    text = ranks_text(objects)
    for ns in "ab":
        assert (f"file ConfigMap code key x in namespace {ns}, mounted at /c/x in Job j{ns}; /one/x.py in Job j{ns}; "
                f"/two/x.py in Job j{ns}:\n  | print('{ns}')\n") in text
    pod = node_lines(text, "jb-0")
    assert "  file /c/x (mode 0644) = ConfigMap code key x in namespace b, shown above" in pod
    assert ("  file /gone (mode 0644) = ConfigMap nope in namespace b: not in the rendering, so the pod would "
            "not start") in pod
    assert "  file /one/x.py (mode 0500) = ConfigMap code key x in namespace b, shown above" in pod
    assert "  file /two/x.py (mode 0500) = ConfigMap code key x in namespace b, shown above" in pod
    assert "y.py" not in pod   # the subPath mounts one item only


def test_each_configmap_and_secret_is_decoded_once_for_all_pods(monkeypatch):
    objects = [config_map("env", {"A": "1"}),
               job("j", 50, envFrom=[{"configMapRef": {"name": "env"}}],
                   env=[{"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "A"}}}])]
    index = ObjectIndex(objects)
    calls = []
    original = index.get
    monkeypatch.setattr(index, "get", lambda *a: calls.append(a) or original(*a))
    views = [pod_view(index.pod_set("j"), i, index) for i in range(50)]
    assert [v.containers[0].env["B"] for v in views] == ["1"] * 50
    assert calls == [("ConfigMap", "env", "default")]
