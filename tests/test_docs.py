"""The documentation names every argument of every component and every runtime field."""

import re
from pathlib import Path

import pytest

import trainjobs
from trainjobs.pipeline.component import TrainJobComponent

DOCS = (Path(__file__).resolve().parent.parent / "docs" / "arguments.md").read_text()
DOCUMENTED = set(re.findall(r"`([a-z_]+)`", DOCS))
MODELS = [getattr(trainjobs, name).args_type for name in trainjobs.__all__
          if isinstance(getattr(trainjobs, name), type) and issubclass(getattr(trainjobs, name), TrainJobComponent)]
MODELS += [trainjobs.PodTemplate, trainjobs.Initializer, trainjobs.ExtraRole, trainjobs.MpiRuntime,
           trainjobs.TorchTuneRuntime, trainjobs.JaxRuntime, trainjobs.TorchRuntime, trainjobs.PlatformProfile,
           trainjobs.FailurePolicy, trainjobs.TrainingNamespaceArgs]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_argument_is_documented(model):
    missing = sorted(set(model.model_fields) - DOCUMENTED)
    assert not missing, f"{model.__name__} arguments missing from docs/arguments.md: {missing}"


def test_the_argument_reference_is_generated_from_the_code():
    from trainjobs.tools.provider.reference import document
    generated = (Path(__file__).resolve().parent.parent / "docs" / "arguments.md").read_text()
    assert generated == document(), "docs/arguments.md is stale: python -m trainjobs.tools.provider.reference > docs/arguments.md"


def test_every_documented_type_imports_from_the_package():
    types = DOCS.split("## Types used by the arguments", 1)[1]
    names = re.findall(r"^### (\w+)$", types, re.M)
    assert "Placement" in names
    missing = [name for name in names if name not in trainjobs.__all__ or not hasattr(trainjobs, name)]
    assert not missing, f"types documented in docs/arguments.md that `from trainjobs import` cannot give: {missing}"


def test_every_component_has_a_section():
    headings = " ".join(re.findall(r"^## (.+)$", DOCS, re.M))
    missing = [name for name in trainjobs.__all__ if name.endswith("TrainJob") and name not in headings]
    assert not missing, f"components without a section in docs/arguments.md: {missing}"
