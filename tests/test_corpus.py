"""The corpus of bad and hostile inputs (tests/corpus/*.yaml), each fed three ways.

A bad input is refused with a TrainJobError naming its field, with no traceback and nothing
registered or written: as a dict to the component, as typed Args (`XArgs(**spec)`, then the
component), and as `--config` to the example program through `trainjobs render`. A hostile input is
refused the same way, or renders objects that the Kubernetes schemas and the API server's rules
accept, the same in all three forms.
"""

import copy
import traceback
from collections import Counter
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

import trainjobs
from trainjobs.kube import apivalidation
from trainjobs.tools.cli.main import main
from trainjobs.core.errors import TrainJobError
from trainjobs.tools.cli.render import LOADER, kubernetes_objects
from trainjobs.testing import attempt

CORPUS = Path(__file__).resolve().parent / "corpus"
EXAMPLE = Path(__file__).resolve().parent.parent / "stacks" / "__main__.py"
FAMILIES = ("TorchTrainJob", "TorchTuneTrainJob", "JaxTrainJob", "MpiTrainJob", "DeepSpeedTrainJob", "MlxTrainJob")
SCHEMA_VERSION = kubernetes_validate.latest_version()


class _Loader(LOADER):
    """The corpus's YAML: `!repeat [text, n]` is `text` repeated n times. The render's loader, libyaml's where
    PyYAML has it: every xdist worker reads the corpus as it collects, 0.5 s of CPU with the pure-Python loader."""


_Loader.add_constructor("!repeat", lambda loader, node: (lambda text, n: text * n)(*loader.construct_sequence(node)))


def _entries() -> list[dict]:
    entries = []
    for path in sorted(CORPUS.glob("*.yaml")):
        for i, entry in enumerate(yaml.load(path.read_text(), Loader=_Loader)):
            entries.append({**entry, "id": f"{path.stem}-{i}-{entry['family']}"})
    return entries


ENTRIES = _entries()
BAD = [pytest.param(e, id=e["id"]) for e in ENTRIES if "field" in e]
HOSTILE = [pytest.param(e, id=e["id"]) for e in ENTRIES if "field" not in e]


def as_dict(entry):
    component = getattr(trainjobs, entry["family"])
    return attempt(lambda: component(entry.get("name", "demo"), copy.deepcopy(entry["spec"])))


def as_typed_args(entry):
    component, args_type = getattr(trainjobs, entry["family"]), getattr(trainjobs, f"{entry['family']}Args")
    return attempt(lambda: component(entry.get("name", "demo"), args_type(**copy.deepcopy(entry["spec"]))))


def as_config(entry, out: Path, capsys) -> tuple[int, str]:
    job = {"kind": entry["family"], "name": entry.get("name", "demo"), **entry["spec"]}
    # A stack without a stack file: the program's config is only the job given here.
    code = main(["render", str(EXAMPLE), "--stack", "corpus", "--config", "jobs=" + yaml.safe_dump([job], allow_unicode=True),
                 "--out", str(out)])
    return code, capsys.readouterr().err


def assert_refused(error, result, field: str | None) -> None:
    if not isinstance(error, TrainJobError):
        raise AssertionError("accepted" if error is None else "".join(traceback.format_exception(error)))
    if field is not None:
        assert field in [issue.field for issue in error.issues], str(error)
    assert result.resources == []


def test_the_corpus_has_300_bad_inputs_across_every_family():
    bad = [e for e in ENTRIES if "field" in e]
    assert len(bad) >= 300
    per_family = Counter(e["family"] for e in bad)
    assert set(per_family) == set(FAMILIES) and min(per_family.values()) >= 30, per_family
    assert {e["family"] for e in ENTRIES if "field" not in e} == set(FAMILIES)


@pytest.mark.parametrize("entry", BAD)
def test_a_bad_input_as_a_dict_is_refused_naming_its_field(entry):
    assert_refused(*as_dict(entry), entry["field"])


@pytest.mark.parametrize("entry", BAD)
def test_a_bad_input_as_typed_args_is_refused_naming_its_field(entry):
    assert_refused(*as_typed_args(entry), entry["field"])


@pytest.mark.parametrize("entry", BAD)
def test_a_bad_input_as_stack_config_exits_2_naming_its_field_and_writes_nothing(entry, tmp_path, capsys):
    code, err = as_config(entry, tmp_path / "out", capsys)
    assert (code, "Traceback" in err) == (2, False), err
    # The example program names its own checks of a job entry by the entry's place in `jobs`.
    assert f"  - {entry['field']}: " in err or f"  - jobs[0].{entry['field']}: " in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("entry", HOSTILE)
def test_a_hostile_input_is_refused_or_renders_what_the_api_server_accepts(entry, tmp_path, capsys):
    error, result = as_dict(entry)
    typed_error, typed_result = as_typed_args(entry)
    code, err = as_config(entry, tmp_path / "out", capsys)
    if error is not None:
        assert_refused(error, result, None)
        assert_refused(typed_error, typed_result, None)
        assert (code, "Traceback" in err, (tmp_path / "out").exists()) == (2, False, False), err
        return
    objects = kubernetes_objects(result)
    assert apivalidation.problems(objects) == []
    for obj in objects:
        kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
    assert typed_error is None and kubernetes_objects(typed_result) == objects
    assert code == 0, err
