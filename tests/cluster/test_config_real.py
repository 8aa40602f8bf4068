"""The same stack file gives a program the same config under the real Pulumi CLI as under `trainjobs render --stack`,
over the cases where YAML 1.1 and 1.2 disagree (tests/stackconfig/yaml12.yaml): one program writes what
pulumi.Config gives it for each key, run by `pulumi preview` and by the render. The values the render refuses are
those the CLI refuses too, or passes differently on another machine."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from pulumi_cli import REPO, Project, run

CORPUS = yaml.safe_load((REPO / "tests" / "stackconfig" / "yaml12.yaml").read_text())
VALUES = [case for case in CORPUS if "error" not in case]
REFUSED = [case for case in CORPUS if "error" in case]
# A time with a zone offset: the CLI passes it in the zone of the machine that runs it.
ZONED = "a timestamp with a zone offset"
RENDER = [sys.executable, "-m", "trainjobs.tools.cli", "render"]
# Writes what pulumi.Config gives for each key k<i> (the value alone) and o<i> (the value in a mapping).
READER = """import itertools
import json
import os

import pulumi

config = pulumi.Config()
values = {}
for i in itertools.takewhile(lambda i: config.get(f"k{i}") is not None, itertools.count()):
    values[f"k{i}"] = config.get(f"k{i}")
    values[f"o{i}"] = config.get(f"o{i}")
    values[f"o{i}.object"] = repr(config.get_object(f"o{i}"))
with open(os.environ["CONFIG_DUMP"], "w") as dump:
    json.dump(values, dump, indent=1)
"""


def stack_file(cases: list[dict]) -> str:
    return "config:\n" + "".join(f"  reader:k{i}: {case['yaml']}\n  reader:o{i}:\n    v: {case['yaml']}\n"
                                 for i, case in enumerate(cases))


@pytest.fixture
def reader(tmp_path, cluster_env) -> Project:
    return Project.create(tmp_path, cluster_env, "config", "reader", {"__main__.py": READER})


def read_by(project: Project, command: list[str], dump: Path, **env: str) -> dict[str, str]:
    run(command, project.dir, {**project.env, "CONFIG_DUMP": str(dump), **env})
    return json.loads(dump.read_text())


def test_the_cli_gives_the_program_what_the_render_gives_it(reader, tmp_path):
    reader.write_stack_file(stack_file(VALUES))
    written = (reader.dir / "Pulumi.config.yaml").read_text()
    rendered = read_by(reader, [*RENDER, "__main__.py", "--stack", "config", "--out", str(tmp_path / "out")],
                       tmp_path / "render.json")
    engine = read_by(reader, ["pulumi", "preview", "--non-interactive"], tmp_path / "engine.json")
    assert (reader.dir / "Pulumi.config.yaml").read_text() == written   # both read the same file
    disagree = {VALUES[int(key.split(".")[0][1:])]["yaml"]: (key, engine.get(key), rendered.get(key))
                for key in engine.keys() | rendered.keys() if engine.get(key) != rendered.get(key)}
    assert disagree == {}
    assert len(engine) == 3 * len(VALUES)


@pytest.mark.parametrize("case", [case for case in REFUSED if case["error"] != ZONED], ids=lambda case: case["yaml"])
def test_a_value_the_render_refuses_the_cli_refuses(reader, tmp_path, case):
    reader.write_stack_file(f"config:\n  reader:o:\n    v: {case['yaml']}\n")
    done = reader.pulumi("preview", check=False)
    assert done.returncode != 0
    assert "error: getting stack configuration: invalid YAML file: " in done.stderr, done.stdout + done.stderr


def test_a_zoned_time_reaches_the_program_in_the_machines_zone(reader, tmp_path):
    """Why the render refuses it: the same stack file gives the program another value in another zone."""
    (case,) = [case for case in REFUSED if case["error"] == ZONED]
    preview = ["pulumi", "preview", "--non-interactive"]
    read = {}
    for zone in ("UTC", "Asia/Karachi"):   # Karachi's offset is the time's: Go names the zone
        reader.write_stack_file(stack_file([case]))
        read[zone] = read_by(reader, preview, tmp_path / "read.json", TZ=zone)["k0"]
    assert read["UTC"] != read["Asia/Karachi"], read

