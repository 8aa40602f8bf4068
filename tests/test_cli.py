"""`trainjobs` on bad input: `error: ...` and status 2, never a traceback, nothing written."""

import argparse
import re
from pathlib import Path

import pytest

from trainjobs.tools.cli.main import main, parser
from trainjobs.tools.stackconfig import ConfigError
from trainjobs.testing import run_program

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "stacks" / "__main__.py"
JOBS = "jobs=[{kind: TorchTrainJob, name: a}]"


def cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    return code, printed.err


def fails(capsys, tmp_path, *argv: str, command: str = "render") -> str:
    """Run `command` with `--out tmp_path/out` (render) and return its stderr; it must exit 2, writing nothing."""
    out = tmp_path / "out"
    code, err = cli(capsys, command, *argv, *(["--out", str(out)] if command == "render" else []))
    assert code == 2
    assert not out.exists()
    return err


@pytest.fixture
def project(tmp_path) -> Path:
    """A Pulumi project `proj` whose program registers the `jobs` config as TorchTrainJobs."""
    (tmp_path / "Pulumi.yaml").write_text("name: proj\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(
        "import pulumi\nfrom trainjobs import TorchTrainJob\n\n"
        "for job in pulumi.Config().require_object('jobs'):\n"
        "    TorchTrainJob(job.pop('name'), job)\n")
    return tmp_path


def with_stack(project: Path, text: str) -> str:
    (project / "Pulumi.dev.yaml").write_text(text)
    return str(project / "__main__.py")


# --- the program and the options ---------------------------------------------------------------------------------

def test_a_missing_program(capsys, tmp_path):
    err = fails(capsys, tmp_path, str(tmp_path / "nope.py"))
    assert err == f"error: no program at {tmp_path}/nope.py; give a Pulumi program file such as stacks/__main__.py\n"


def test_a_directory_without_main(capsys, tmp_path):
    (tmp_path / "prog").mkdir()
    err = fails(capsys, tmp_path, str(tmp_path / "prog"))
    assert err.startswith(f"error: no program at {tmp_path}/prog;")


def test_a_program_outside_any_project(capsys, tmp_path):
    (tmp_path / "main.py").write_text("")
    err = fails(capsys, tmp_path, str(tmp_path / "main.py"))
    assert err == (f"error: no Pulumi.yaml in {tmp_path} or above: the program is run as a Pulumi project; create one "
                   "there (`name: <project>` and `runtime: python`)\n")


@pytest.mark.parametrize("pair, message", [
    ("jobs", "error: --config takes KEY=VALUE, got 'jobs'\n"),
    ("=[]", "error: --config takes KEY=VALUE, got '=[]'\n"),
])
def test_config_without_key_and_value(capsys, tmp_path, pair, message):
    assert fails(capsys, tmp_path, str(PROGRAM), "--config", pair) == message


def test_config_key_given_twice(capsys, tmp_path):
    err = fails(capsys, tmp_path, str(PROGRAM), "--config", JOBS, "--config", "jobs=[]")
    assert err == "error: --config jobs is given twice; give it once\n"


def test_config_key_given_with_and_without_its_namespace(capsys, tmp_path):
    err = fails(capsys, tmp_path, str(PROGRAM), "--config", JOBS, "--config", "trainjobs-examples:jobs=[]")
    assert err == ("error: --config: trainjobs-examples:jobs is given twice, as jobs and as trainjobs-examples:jobs; "
                   "keep one\n")


@pytest.mark.parametrize("value, message", [
    ("[{kind: TorchTrainJob", "line 1, column 22: expected ',' or '}', but got '<stream end>'"),
    ("{a: 1, a: 2}", 'line 1, column 8: duplicate key "a" (first at line 1, column 2); give each key once'),
    ("!!binary aGk=", "line 1, column 1: tag !!binary is not supported"),
    ("\x1b[31m", "line 1, column 1: character U+001B is not allowed in YAML"),
])
def test_config_value_that_is_bad_yaml(capsys, tmp_path, value, message):
    err = fails(capsys, tmp_path, str(PROGRAM), "--config", f"jobs={value}")
    assert err.startswith(f"error: --config jobs: {message}")
    assert err.count("\n") == 1


def test_config_value_that_is_not_json_for_the_program(capsys, tmp_path):
    err = fails(capsys, tmp_path, str(PROGRAM), "--config", "jobs=mnist")
    assert err == "error: Configuration 'trainjobs-examples:jobs' value 'mnist' is not a valid 'JSON object'\n"


def test_a_stack_without_the_config_the_program_requires(capsys, tmp_path):
    err = fails(capsys, tmp_path, str(PROGRAM), "--stack", "nosuchstack")
    assert err.startswith("error: Missing required configuration variable 'trainjobs-examples:jobs'\n")


def test_out_is_a_file(capsys, tmp_path):
    out = tmp_path / "out"
    out.write_text("mine\n")
    code, err = cli(capsys, "render", str(PROGRAM), "--config", JOBS, "--out", str(out))
    assert (code, err) == (2, f"error: --out {out} is a file; choose a directory\n")
    assert out.read_text() == "mine\n"


def test_out_is_a_directory_render_did_not_write(capsys, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    code, err = cli(capsys, "render", str(PROGRAM), "--config", JOBS, "--out", str(out))
    assert (code, err) == (2, f"error: {out} is not empty and was not written by `trainjobs render`; "
                              "choose another --out directory\n")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_out_under_a_file(capsys, tmp_path):
    (tmp_path / "file").write_text("mine\n")
    out = tmp_path / "file" / "out"
    code, err = cli(capsys, "render", str(PROGRAM), "--config", JOBS, "--out", str(out))
    assert (code, err) == (2, f"error: --out {out}: cannot write there: Not a directory\n")
    assert (tmp_path / "file").read_text() == "mine\n"


def test_usage_errors_return_2(capsys):
    assert main(["render"]) == 2
    assert "error: the following arguments are required: program" in capsys.readouterr().err


# --- the project and stack files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("config:\n  proj:jobs: [a\n", "line 3, column 1: expected ',' or ']', but got '<stream end>'"),
    ("config:\n  proj:jobs: []\n  proj:jobs: []\n",
     'line 3, column 3: duplicate key "proj:jobs" (first at line 2, column 3); give each key once'),
    ("config:\n  proj:jobs: []\n  jobs: []\n", "proj:jobs is given twice, as proj:jobs and as jobs; keep one"),
    ("config:\n\tproj:jobs: []\n", "line 2, column 1: found character '\\t' that cannot start any token"),
    ("- config\n", "must be a mapping with a `config:` section, got a list"),
    ("config: 42\n", "`config` must map keys to values, got 42"),
    ("config:\n  1: x\n", "line 2, column 3: key 1 is not a string; quote it"),
    ("config:\n  proj:jobs: !!set {a}\n", "line 2, column 14: tag !!set is not supported"),
])
def test_a_stack_file_that_cannot_be_used(capsys, project, text, message):
    err = fails(capsys, project, with_stack(project, text))
    assert err.startswith(f"error: {project}/Pulumi.dev.yaml: {message}")
    assert err.count("\n") == 1


def test_a_stack_file_that_is_not_utf8(capsys, project):
    (project / "Pulumi.dev.yaml").write_bytes(b"config:\n  proj:jobs: \xff\n")
    err = fails(capsys, project, str(project / "__main__.py"))
    assert err == f"error: {project}/Pulumi.dev.yaml: not UTF-8 text (byte 21)\n"


@pytest.mark.parametrize("text, message", [
    ("name: [proj\n", "line 2, column 1: expected ',' or ']', but got '<stream end>'"),
    ("name: proj\nname: other\n", 'line 2, column 1: duplicate key "name" (first at line 1, column 1)'),
    ("runtime: python\n", "needs the project's name as a string, `name: <project>`"),
    ("name: 42\n", "needs the project's name as a string, `name: <project>`"),
    ("- name\n", "needs the project's name as a string, `name: <project>`"),
])
def test_a_project_file_that_cannot_be_used(capsys, project, text, message):
    (project / "Pulumi.yaml").write_text(text)
    err = fails(capsys, project, with_stack(project, "config:\n  proj:jobs: []\n"))
    assert err.startswith(f"error: {project}/Pulumi.yaml: {message}")


SECURE = "config:\n  proj:jobs: []\n  proj:token:\n    secure: v1:abc\n"


def test_an_encrypted_value_is_a_secret_placeholder_in_a_render_and_needs_an_override_to_run(capsys, project):
    (project / "__main__.py").write_text(
        "import pulumi\nfrom trainjobs import TorchTrainJob\n\n"
        "TorchTrainJob('a', {'env': {'TOKEN': pulumi.Config().require_secret('token')}})\n")
    out = project / "out"
    code, _ = cli(capsys, "render", with_stack(project, SECURE), "--out", str(out))
    assert code == 0
    assert "TOKEN=[secret]" in (out / "ranks.txt").read_text()
    assert "v1:abc" not in "".join(p.read_text() for p in out.iterdir())
    with pytest.raises(ConfigError) as info:   # an update (run-local) needs the real value
        run_program(project / "__main__.py", stack="dev")
    assert str(info.value) == (f"{project}/Pulumi.dev.yaml: proj:token is encrypted (secure:) and cannot be read "
                               "offline; pass a test value with --config proj:token=...")


def test_an_encrypted_value_inside_an_object_is_named_by_its_path(capsys, project):
    err = fails(capsys, project, with_stack(project, "config:\n  proj:jobs:\n    - name: a\n      env:\n"
                                                     "        TOKEN: {secure: v1:abc}\n"))
    assert err.startswith(f"error: {project}/Pulumi.dev.yaml: proj:jobs[0].env.TOKEN is encrypted (secure:)")


def test_an_overridden_encrypted_value_renders(capsys, project):
    program = with_stack(project, SECURE)
    out = project / "out"
    code, _ = cli(capsys, "render", program, "--config", "token=test", "--config", "jobs=[{name: a}]",
                  "--out", str(out))
    assert code == 0
    assert (out / "batch_v1-job-default-a-node-0.yaml").is_file()


def test_a_stack_file_is_read_as_pulumi_up_reads_it(capsys, project):
    # As the Pulumi CLI reads it (YAML 1.2, and 1.1's octal): what `pulumi up` deploys is what the render shows.
    program = with_stack(project, "config:\n  proj:jobs:\n    - name: a\n      env: {DEBUG: yes, LEVEL: 010}\n")
    out = project / "out"
    code, _ = cli(capsys, "render", program, "--out", str(out))
    assert code == 0
    job = (out / "batch_v1-job-default-a-node-0.yaml").read_text()
    assert "        - name: DEBUG\n          value: 'yes'\n" in job
    assert "        - name: LEVEL\n          value: '8'\n" in job


def test_explain_reports_bad_config_the_same_way(capsys, tmp_path):
    err = fails(capsys, tmp_path, str(PROGRAM), "--config", "jobs=42", command="explain")
    assert err.startswith("error: trainjobs-examples:jobs: must be a list of jobs")


def test_a_failed_render_leaves_the_previous_one_untouched(capsys, tmp_path):
    out = tmp_path / "out"
    assert cli(capsys, "render", str(PROGRAM), "--config", JOBS, "--out", str(out))[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, err = cli(capsys, "render", str(PROGRAM), "--config", "jobs=[{kind: TorchTrainJob}]", "--out", str(out))
    assert code == 2 and err.startswith("error: trainjobs-examples:jobs: invalid jobs\n  - jobs[0].name: missing")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("construct, field", [
    ("TorchTrainJob('a', TorchTrainJobArgs(image='x:1', num_node=2))", 'num_node: unknown argument "num_node"; '
                                                                      'did you mean "num_nodes"?'),
    ("MpiTrainJob('a', MpiTrainJobArgs(num_nodes=0))", "num_nodes: Input should be greater than or equal to 1"),
    ("TorchTrainJob('a', {'num_nodes': pulumi.Output.from_input(2)})", "num_nodes: must be a plain value"),
])
def test_a_program_with_a_typed_args_mistake_exits_2_without_a_traceback(capsys, project, construct, field):
    (project / "__main__.py").write_text(
        "import pulumi\nfrom trainjobs import MpiTrainJob, MpiTrainJobArgs, TorchTrainJob, TorchTrainJobArgs\n\n"
        f"{construct}\n")
    err = fails(capsys, project, with_stack(project, "config: {}\n"))
    assert err.startswith("error: ") and f"  - {field}" in err


# --- the command as a process ----------------------------------------------------------------------------------

def trainjobs(*argv: str, cwd: Path) -> "subprocess.CompletedProcess[str]":
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "trainjobs.tools.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_the_command_ends_with_its_output_complete_and_its_status(project):
    """The process ends right after its output is flushed: all of it arrives, files included, and the
    status is the command's."""
    program = with_stack(project, "config:\n  proj:jobs: [{name: a, num_nodes: 2}, {name: b}]\n")
    done = trainjobs("render", program, "--out", "out", cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("wrote 4 objects, ranks.txt, tree.txt and summary.md to out/")
    assert sorted(p.name for p in (project / "out").iterdir() if not p.name.startswith(".")) == [
        "batch_v1-job-default-a-node-0.yaml", "batch_v1-job-default-b-node-0.yaml", "ranks.txt", "summary.md",
        "tree.txt",
        "v1-service-default-a.yaml", "v1-service-default-b.yaml"]
    assert "completions: 2" in (project / "out" / "batch_v1-job-default-a-node-0.yaml").read_text()

    failed = trainjobs("render", program, "--out", "other", "--config", "jobs=[{name: c, num_nodes: 0}]", cwd=project)
    assert failed.returncode == 2
    assert failed.stderr.startswith("error: ") and "num_nodes" in failed.stderr and "Traceback" not in failed.stderr
    assert not (project / "other").exists()


def test_explain_into_a_closed_pipe_ends_quietly(project):
    import subprocess
    import sys
    jobs = ", ".join(f"{{name: j{i}, num_nodes: 2}}" for i in range(100))   # about 90 KB: more than a pipe holds
    program = with_stack(project, f"config:\n  proj:jobs: [{jobs}]\n")
    reader = subprocess.Popen(["head", "-n", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    writer = subprocess.run([sys.executable, "-m", "trainjobs.tools.cli", "explain", program], cwd=project,
                            stdout=reader.stdin, stderr=subprocess.PIPE, text=True, timeout=600)
    reader.stdin.close()
    first = reader.stdout.read()
    reader.wait(timeout=60)
    assert writer.returncode == 0 and "Traceback" not in writer.stderr and first.strip()


CATCHING = """import pulumi
from trainjobs import TorchTrainJob, TrainJobError

for job in pulumi.Config().require_object("jobs"):
    name, fallback = job.pop("name"), job.pop("fallback", False)
    try:
        TorchTrainJob(name, job)
    except TrainJobError:
        if not fallback:
            raise
        pulumi.log.warn(f"{name}: refused, rendered with its defaults instead")
        TorchTrainJob(name, {"image": job["image"]})
"""


def test_a_refusal_the_program_catches_runs_on_as_under_the_engine(capsys, project):
    (project / "__main__.py").write_text(CATCHING)
    out = project / "out"
    code, err = cli(capsys, "render", str(project / "__main__.py"), "--out", str(out), "--config",
                    "jobs=[{name: a, image: img, num_nodes: 0, fallback: true}, {name: b, image: img, num_nodes: 2}]")
    assert code == 0
    assert err.splitlines() == [
        "warning: a: refused, rendered with its defaults instead",
        'warning: caught by the program, which went on: TorchTrainJob "a": invalid arguments',
        "  - num_nodes: Input should be greater than or equal to 1 (got 0)"]
    assert sorted(p.name for p in out.glob("batch_v1-job-*")) == ["batch_v1-job-default-a-node-0.yaml",
                                                                  "batch_v1-job-default-b-node-0.yaml"]


def test_refusals_the_program_does_not_catch_are_all_listed_and_the_caught_ones_are_not(capsys, project):
    (project / "__main__.py").write_text(CATCHING)
    err = fails(capsys, project, str(project / "__main__.py"), "--config",
                "jobs=[{name: a, image: img, num_nodes: -1}, {name: b, image: img, backoff_limit: -1, fallback: true},"
                " {name: c, image: img, num_nodes: 0}]")
    assert err.splitlines() == [
        'error: TorchTrainJob "a": invalid arguments', "  - num_nodes: Input should be greater than or equal to 1 (got -1)",
        'error: TorchTrainJob "c": invalid arguments', "  - num_nodes: Input should be greater than or equal to 1 (got 0)"]


def test_every_bad_job_of_a_program_is_reported_in_one_run_and_nothing_is_written(capsys, tmp_path):
    """A program with three bad jobs and a good one: one render names all three jobs' problems."""
    jobs = ('jobs=[{kind: TorchTrainJob, name: a, num_nodes: 0}, {kind: JaxTrainJob, name: b, shm_size: "-1Gi"}, '
            '{kind: TorchTrainJob, name: ok}, '
            '{kind: MpiTrainJob, name: c, image: "mpi:1", command: [mpirun, x], backoff_limit: -1}]')
    err = fails(capsys, tmp_path, str(ROOT / "stacks" / "__main__.py"), "--stack", "corpus", "--config", jobs)
    assert err.splitlines() == [
        'error: TorchTrainJob "a": invalid arguments',
        "  - num_nodes: Input should be greater than or equal to 1 (got 0)",
        'error: JaxTrainJob "b": invalid arguments',
        """  - shm_size: '-1Gi' is negative: give a size such as "16Gi", or "0" for no /dev/shm""",
        'error: MpiTrainJob "c": invalid arguments',
        "  - backoff_limit: Input should be greater than or equal to 0 (got -1)",
    ]


@pytest.mark.parametrize("command", ["render", "explain"])
def test_the_readme_synopsis_gives_every_option(command):
    [usage] = [line for line in (ROOT / "README.md").read_text().splitlines()
               if line.startswith(f".venv/bin/trainjobs {command} ")]
    [commands] = [action for action in parser()._actions if isinstance(action, argparse._SubParsersAction)]
    options = {option for action in commands.choices[command]._actions for option in action.option_strings
               if option.startswith("--") and option != "--help"}
    assert "--stack-output" in options
    assert set(re.findall(r"--[a-z-]+", usage)) == options


@pytest.mark.parametrize("flag, value, message", [
    ("--node-labels", "team", "error: --node-labels team: expected KEY=VALUE"),
    ("--node-labels", "kubernetes.io/hostname=h",
     "error: --node-labels kubernetes.io/hostname=h: the agent sets this label itself; choose another key"),
    ("--register-with-taints", "dedicated=ml:NoRun", "error: --register-with-taints dedicated=ml:NoRun: 'NoRun' is not "
                                                     "a taint effect: use NoSchedule, PreferNoSchedule, NoExecute"),
])
def test_the_node_agents_bad_labels_and_taints_exit_2_naming_the_flag(capsys, tmp_path, monkeypatch, flag, value,
                                                                      message):
    from trainjobs import localrun
    monkeypatch.setattr(localrun, "host_problems", lambda: [])   # what is judged is the flag, on any machine
    run_dir = tmp_path / "run"
    code, err = cli(capsys, "node-agent", "--kubeconfig", str(tmp_path / "no-such-kubeconfig"), "--run-dir",
                    str(run_dir), flag, value)
    assert (code, err.strip()) == (2, message)
    assert not run_dir.exists()
