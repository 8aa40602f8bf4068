"""Stack config: the strict YAML loader, and the example program's `jobs` entries, from `--config` and stack files."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from trainjobs.testing import Secret, run_program
from trainjobs.tools.cli.main import _config as cli_config
from trainjobs.tools.cli.main import main
from trainjobs.tools.stackconfig import ConfigError, load_yaml

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "stacks" / "__main__.py"
PYTHON_JOB = "{kind: TorchTrainJob, name: a}"


# --- the loader -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    # As the Pulumi CLI reads stack files (yaml.v3): yes/no/on/off are words, 0o17 and 0600 are octal.
    ("[yes, no, on, off, y, n, Yes, NO, On, OFF]", ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF"]),
    ("[true, false, True, FALSE]", [True, False, True, False]),
    ("[null, Null, NULL, ~, ]", [None, None, None, None]),
    ("[0600, 010, 0o17, 0x1F, 0b11, -3, +5, 1_000, '7']", [384, 8, 15, 31, 3, -3, 5, 1000, "7"]),
    ("[1.5, 1.0e+3, -0.5, 1., .5, 1e3, 2.5e6]", [1.5, 1000, -0.5, 1, 0.5, 1000, 2.5e6]),
    ("[2:4, 1:30, 2024-01-01, =, <, <<]", ["2:4", "1:30", "2024-01-01 00:00:00 +0000 UTC", "=", "<", "<<"]),
    ("[!!str 1, !!int 0x10, !!float 2.5, !!bool true, !!null null]", ["1", 16, 2.5, True, None]),
    ("base: &b {image: x, num_nodes: 2}\njob: {<<: *b, num_nodes: 3}",
     {"base": {"image": "x", "num_nodes": 2}, "job": {"image": "x", "num_nodes": 3}}),
    ("a: &n 1\nb: *n\nc: &n 2\nd: *n", {"a": 1, "b": 1, "c": 2, "d": 2}),
    ("", None),
])
def test_scalars_as_pulumi_reads_them(text, value):
    loaded = load_yaml(text, "s")
    assert loaded == value
    assert json.dumps(loaded) == json.dumps(value)   # 1 is not 1.0


@pytest.mark.parametrize("text, message", [
    ("jobs:\n  - name: a\n    kind: X\n    name: b\n",
     's: line 4, column 5: duplicate key "name" (first at line 2, column 5); give each key once'),
    ("{a: 1, a: 2}", 's: line 1, column 8: duplicate key "a" (first at line 1, column 2); give each key once'),
    ("1: a", "s: line 1, column 1: key 1 is not a string; quote it"),
    ("{yes: 1, true: 2}", "s: line 1, column 10: key true is not a string; quote it"),
    ("? [a]\n: b", 's: line 1, column 3: key ["a"] is not a string; quote it'),
    ("a: {<<: {~: 1}}", "s: line 1, column 4: merged key null is not a string; quote it"),
    ("[a", "s: line 1, column 3: expected ',' or ']', but got '<stream end>' "
           "(while parsing a flow sequence at line 1)"),
    ("a: b: c", "s: line 1, column 5: mapping values are not allowed here"),
    ("a:\n\t- b", "s: line 2, column 1: found character '\\t' that cannot start any token"),
    ("a: !!int abc", "s: line 1, column 4: 'abc' is not a valid !!int"),
    ("a: !!bool maybe", "s: line 1, column 4: 'maybe' is not a valid !!bool"),
    ("a: !!binary aGk=", "s: line 1, column 4: tag !!binary is not supported; write plain strings, numbers, "
                         "booleans, lists and mappings"),
    ("a: !!set {x}", "s: line 1, column 4: tag !!set is not supported; write plain strings, "
                     "numbers, booleans, lists and mappings"),
    ("a: &x [1, *x]", "s: line 1, column 11: anchor 'x' is used inside its own value"),
    ("a: !Ref x", "s: line 1, column 4: tag !Ref is not supported; write plain strings, numbers, booleans, "
                  "lists and mappings"),
    ("a: 1\n---\nb: 2", "s: line 2, column 1: but found another document (expected a single document in the "
                        "stream at line 1)"),
    ("a: \x07", "s: line 1, column 4: character U+0007 is not allowed in YAML; write it as an escape in a "
                "double-quoted string"),
    ("[" * 3000 + "]" * 3000, "s: nested too deeply"),
])
def test_malformed_yaml_is_one_line_naming_where(text, message):
    with pytest.raises(ConfigError) as error:
        load_yaml(text, "s")
    assert str(error.value) == message


# --- the values a program gets, over the YAML 1.1 / 1.2 corpus -------------------------------------------------

CORPUS = yaml.safe_load((ROOT / "tests" / "stackconfig" / "yaml12.yaml").read_text())
VALUES = [case for case in CORPUS if "error" not in case]
REFUSED = [case for case in CORPUS if "error" in case]
# Reads each config key k<i> (the value alone) and o<i> (the value in a mapping) as a program does.
READER = """import itertools
import pulumi
config = pulumi.Config()
for i in itertools.takewhile(lambda i: config.get(f"k{i}") is not None, itertools.count()):
    pulumi.export(f"k{i}", config.get(f"k{i}"))
    pulumi.export(f"o{i}", config.get(f"o{i}"))
    pulumi.export(f"o{i}.object", repr(config.get_object(f"o{i}")))
"""


@pytest.fixture
def reader(tmp_path) -> Path:
    """A Pulumi project `proj` whose program exports what pulumi.Config gives it for each key."""
    (tmp_path / "Pulumi.yaml").write_text("name: proj\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(READER)
    return tmp_path


def _expected(cases: list[dict]) -> dict[str, str]:
    expected = {}
    for i, case in enumerate(cases):
        expected[f"k{i}"] = case["get"]
        expected[f"o{i}"] = '{"v":' + case["nested"] + "}"
        expected[f"o{i}.object"] = repr({"v": json.loads(case["nested"])})
    return expected


def test_a_stack_file_gives_the_program_what_pulumi_gives_it(reader):
    (reader / "Pulumi.dev.yaml").write_text("config:\n" + "".join(
        f"  k{i}: {case['yaml']}\n  o{i}:\n    v: {case['yaml']}\n" for i, case in enumerate(VALUES)))
    assert run_program(reader / "__main__.py").outputs == _expected(VALUES)


def test_config_values_give_the_program_what_the_stack_file_gives_it(reader):
    pairs = [pair for i, case in enumerate(VALUES) for pair in (f"k{i}={case['yaml']}", f"o{i}={{v: {case['yaml']}}}")]
    assert run_program(reader / "__main__.py", config=cli_config(pairs)).outputs == _expected(VALUES)


@pytest.mark.parametrize("case", REFUSED, ids=[case["yaml"] for case in REFUSED])
def test_values_pulumi_cannot_pass_are_refused_where_they_are(reader, case):
    (reader / "Pulumi.dev.yaml").write_text(f"config:\n  proj:o:\n    v: {case['yaml']}\n")
    with pytest.raises(ConfigError) as error:
        run_program(reader / "__main__.py")
    assert str(error.value).startswith(f"{reader}/Pulumi.dev.yaml: line 3, column 8: ")
    assert case["error"] in str(error.value)
    with pytest.raises(ConfigError) as error:
        cli_config([f"k={case['yaml']}"])
    assert str(error.value).startswith("--config k: line 1, column 1: ")
    assert case["error"] in str(error.value)


def test_typed_reads_and_secrets_follow_the_text(reader):
    (reader / "__main__.py").write_text(
        "import pulumi\nconfig = pulumi.Config()\n"
        "pulumi.export('nodes', config.get_int('nodes'))\npulumi.export('ratio', config.get_float('ratio'))\n"
        "pulumi.export('flag', config.get_bool('flag'))\npulumi.export('word', config.get('word'))\n"
        "pulumi.export('token', config.require_secret('token'))\n")
    (reader / "Pulumi.dev.yaml").write_text("config:\n  nodes: 0o17\n  ratio: .5\n  flag: True\n  word: on\n"
                                            "  token:\n    secure: v1:abc\n")
    stack = run_program(reader / "__main__.py", config={"token": 1_000})
    assert stack.outputs == {"nodes": 15, "ratio": 0.5, "flag": True, "word": "on", "token": Secret("1000")}


# --- the example program's jobs, from --config ------------------------------------------------------------------

def render(capsys, out: Path, *argv: str) -> tuple[int, str]:
    code = main(["render", *argv, "--out", str(out)])
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    return code, printed.err


def render_jobs(capsys, tmp_path, jobs: str) -> str:
    """Render the example program with `--config jobs=<jobs>`; it must fail with status 2, writing nothing."""
    out = tmp_path / "out"
    code, err = render(capsys, out, str(PROGRAM), "--config", f"jobs={jobs}")
    assert code == 2
    assert not out.exists()
    assert err.startswith("error: ")
    return err


KINDS = "DeepSpeedTrainJob, JaxTrainJob, MlxTrainJob, MpiTrainJob, TorchTrainJob, TorchTuneTrainJob, XGBoostTrainJob"
INVALID = "error: trainjobs-examples:jobs: invalid jobs\n"


@pytest.mark.parametrize("jobs, message", [
    ("[{kind: TorchTrainJob}]",
     INVALID + "  - jobs[0].name: missing; name the job (its Kubernetes objects are named after it)\n"),
    (f"[{PYTHON_JOB}, {{name: b, image: x}}]", INVALID + f"  - jobs[1].kind: missing; use one of {KINDS}\n"),
    ("{a: 1}", "error: trainjobs-examples:jobs: must be a list of jobs, each a mapping with kind, name and the "
               "component's arguments; got a mapping\n"),
    ("42", "error: trainjobs-examples:jobs: must be a list of jobs, each a mapping with kind, name and the "
           "component's arguments; got 42\n"),
    (f"[{PYTHON_JOB}, 42, [x], mnist]",
     INVALID + "  - jobs[1]: must be a mapping with kind, name and the component's arguments, got 42\n"
               "  - jobs[2]: must be a mapping with kind, name and the component's arguments, got a list\n"
               '  - jobs[3]: must be a mapping with kind, name and the component\'s arguments, got "mnist"\n'),
    ("[{kind: TorchJob, name: a}]",
     INVALID + '  - jobs[0].kind: "TorchJob" is not a component; did you mean "TorchTrainJob"?\n'),
    ("[{kind: Service, name: a}]", INVALID + f'  - jobs[0].kind: "Service" is not a component; use one of {KINDS}\n'),
    ("[{kind: [TorchTrainJob], name: 7}]",
     INVALID + f"  - jobs[0].kind: a list is not a component; use one of {KINDS}\n"
               "  - jobs[0].name: must be a string, got 7\n"),
    (f"[{PYTHON_JOB}, {PYTHON_JOB}]",
     INVALID + '  - jobs[1].name: "a" is also the name of jobs[0]; give each job its own name, or each run its own '
                'run\n'),
])
def test_bad_jobs_entries_are_named_and_nothing_is_written(capsys, tmp_path, jobs, message):
    assert render_jobs(capsys, tmp_path, jobs) == message


def test_every_bad_entry_is_reported_at_once(capsys, tmp_path):
    err = render_jobs(capsys, tmp_path, "[{kind: TorchTrainJob}, {name: b}, 7]")
    assert err.count("\n  - ") == 3
    assert all(f"jobs[{i}]" in err for i in range(3))


@pytest.mark.parametrize("code, problems", [
    ("{files: [missing.py], mount_path: /workspace}",
     [f"jobs[0].code.files[0]: no file {PROGRAM.parent}/missing.py; list files relative to {PROGRAM.parent}"]),
    ("{files: [../Pulumi.yaml, /etc/hostname], mount_path: /workspace}",
     [f"jobs[0].code.files[0]: ../Pulumi.yaml is outside {PROGRAM.parent}; ship only files of the program's "
      "directory", "jobs[0].code.files[1]: /etc/hostname is outside"]),
    ("{files: [train.py, ./train.py], mount_path: /workspace}",
     ["jobs[0].code.files[1]: another file is also named train.py; each file name is a ConfigMap key, so rename one"]),
    ("{files: train.py, mount_path: /workspace}",
     [f'jobs[0].code.files: "train.py" is not a list of files; list files of {PROGRAM.parent}, e.g. [train.py]']),
    ("{files: [train.py, 3, '']}",
     ["jobs[0].code.mount_path: missing; give the directory the files appear in, e.g. /workspace",
      "jobs[0].code.files[1]: must be a file name, got 3", 'jobs[0].code.files[2]: must be a file name, got ""']),
    ("{files: [train.py], mount_path: workspace, mode: 0o755}",
     ["jobs[0].code.mode: unknown key; code takes files and mount_path",
      'jobs[0].code.mount_path: "workspace" is not an absolute path']),
    ("[train.py]", ["jobs[0].code: must be a mapping like {files: [train.py], mount_path: /workspace}, got a list"]),
])
def test_code_entries_name_the_file_or_field(capsys, tmp_path, code, problems):
    err = render_jobs(capsys, tmp_path, f"[{{kind: TorchTrainJob, name: a, code: {code}}}]")
    assert err.startswith(INVALID)
    for problem in problems:
        assert f"  - {problem}" in err


def test_duplicate_key_in_a_config_value_names_key_and_line(capsys, tmp_path):
    err = render_jobs(capsys, tmp_path, "[{kind: TorchTrainJob, name: a, num_nodes: 2, num_nodes: 4}]")
    assert err == ('error: --config jobs: line 1, column 47: duplicate key "num_nodes" (first at line 1, '
                   'column 33); give each key once\n')


def test_malformed_config_value_is_one_line_with_line_and_column(capsys, tmp_path):
    err = render_jobs(capsys, tmp_path, "[{kind: TorchTrainJob, name: a}")
    assert err == ("error: --config jobs: line 1, column 32: expected ',' or ']', but got '<stream end>' "
                   "(while parsing a flow sequence at line 1)\n")


def test_num_nodes_yes_is_a_word_not_a_number(capsys, tmp_path):
    err = render_jobs(capsys, tmp_path, "[{kind: TorchTrainJob, name: a, num_nodes: yes}]")
    assert '  - num_nodes: "yes" is neither a number of nodes nor a node range MIN:MAX' in err


def test_a_node_range_in_config_is_a_range_not_a_base_60_number(capsys, tmp_path):
    out = tmp_path / "out"
    code, _ = render(capsys, out, str(PROGRAM), "--config",
                     "jobs=[{kind: TorchTrainJob, name: a, num_nodes: 2:4, rendezvous: c10d}]")
    assert code == 0
    job = yaml.safe_load((out / "batch_v1-job-default-a-node-0.yaml").read_text())
    assert job["spec"]["completions"] == 4
    assert {"name": "PET_NNODES", "value": "2:4"} in job["spec"]["template"]["spec"]["containers"][0]["env"]


def test_num_nodes_true_is_not_one(capsys, tmp_path):
    err = render_jobs(capsys, tmp_path, "[{kind: TorchTrainJob, name: a, num_nodes: true}]")
    assert "  - num_nodes: " in err


def test_env_with_value_and_value_from_is_rejected(capsys, tmp_path):
    err = render_jobs(capsys, tmp_path, "[{kind: TorchTrainJob, name: a, env: [{name: X, value: v, "
                                        "valueFrom: {fieldRef: {fieldPath: metadata.name}}}]}]")
    assert '  - env.X: env "X" has both value and valueFrom' in err


def test_good_jobs_still_render(capsys, tmp_path):
    out = tmp_path / "out"
    code, _ = render(capsys, out, str(PROGRAM), "--config",
                     "jobs=[{kind: TorchTrainJob, name: a, num_nodes: 2, code: {files: [train.py], "
                     "mount_path: /workspace}}]")
    assert code == 0
    config_map = (out / "v1-configmap-default-a-code.yaml").read_text()
    assert "  train.py: " in config_map
    job = (out / "batch_v1-job-default-a-node-0.yaml").read_text()
    assert "        - name: code\n          mountPath: /workspace\n          readOnly: true\n" in job


# --- the same mistakes in a stack file --------------------------------------------------------------------------

@pytest.fixture
def project(tmp_path) -> Path:
    """A Pulumi project `proj` in tmp_path running the example program; its stack files are written by tests."""
    (tmp_path / "stacks").mkdir()
    for name in ("__main__.py", "train.py"):
        shutil.copy(ROOT / "stacks" / name, tmp_path / "stacks" / name)
    (tmp_path / "Pulumi.yaml").write_text("name: proj\nruntime: python\nmain: stacks/\n")
    return tmp_path


def render_stack(capsys, project: Path, stack_file: str, *argv: str) -> tuple[int, str]:
    (project / "Pulumi.dev.yaml").write_text(stack_file)
    out = project / "out"
    code, err = render(capsys, out, str(project / "stacks"), *argv)
    assert (code == 0) == out.exists()
    return code, err


@pytest.mark.parametrize("jobs, message", [
    ("\n    - kind: TorchTrainJob\n", "  - jobs[0].name: missing; name the job"),
    ("\n    - name: a\n", "  - jobs[0].kind: missing; use one of"),
    ("\n    a: 1\n", "error: proj:jobs: must be a list of jobs, each a mapping with kind, name and the component's "
                     "arguments; got a mapping"),
    (" 42\n", "error: proj:jobs: must be a list of jobs, each a mapping with kind, name and the component's "
              "arguments; got 42"),
    ("\n    - kind: TorchTrainJob\n      name: a\n      code: {files: [nope.py], mount_path: /w}\n",
     "  - jobs[0].code.files[0]: no file "),
    ("\n    - kind: TorchTrainJob\n      name: a\n      num_nodes: yes\n", "  - num_nodes: "),
])
def test_stack_file_jobs_mistakes_are_named(capsys, project, jobs, message):
    code, err = render_stack(capsys, project, f"config:\n  proj:jobs:{jobs}")
    assert code == 2
    assert message in err


def test_stack_file_duplicate_key_names_key_and_line(capsys, project):
    code, err = render_stack(capsys, project, "config:\n  proj:jobs:\n    - kind: TorchTrainJob\n      name: a\n"
                                              "      num_nodes: 2\n      num_nodes: 3\n")
    assert code == 2
    assert err == (f'error: {project}/Pulumi.dev.yaml: line 6, column 7: duplicate key "num_nodes" (first at '
                   "line 5, column 7); give each key once\n")


def test_stack_file_with_good_jobs_renders(capsys, project):
    code, _ = render_stack(capsys, project, "config:\n  proj:jobs:\n    - kind: TorchTrainJob\n      name: a\n"
                                            "      code: {files: [train.py], mount_path: /workspace}\n")
    assert code == 0
    assert (project / "out" / "v1-configmap-default-a-code.yaml").is_file()
