"""The components as a Pulumi package, for programs in every Pulumi language.

Pulumi's component provider host serves the component classes; their schema is inferred from the
classes themselves: the Args models give the inputs, each family's outputs model gives the outputs,
and every description (with its default) comes from the field's docstring in the code, so the
schema cannot drift from the Python API. `provider/PulumiPlugin.yaml` runs `serve()`.
"""

import inspect
import json
import sys
from typing import Any, Optional

import pulumi
from pulumi.provider import main
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.schema import generate_schema
from pulumi.provider.provider import Provider
from pydantic import BaseModel

from trainjobs import __version__
from trainjobs.core.component import PACKAGE, TrainJobComponent
from trainjobs.core.descriptions import field_description
from trainjobs.families.jax import JaxTrainJob
from trainjobs.families.mpi import DeepSpeedTrainJob, MlxTrainJob, MpiTrainJob
from trainjobs.families.torch import TorchTrainJob
from trainjobs.families.torchtune import TorchTuneTrainJob
from trainjobs.families.xgboost import XGBoostTrainJob
from trainjobs.platform.namespace import TrainingNamespace

COMPONENTS = (TorchTrainJob, TorchTuneTrainJob, JaxTrainJob, MpiTrainJob, DeepSpeedTrainJob, MlxTrainJob,
              XGBoostTrainJob, TrainingNamespace)
# Components whose outputs are declared by an outputs model (`outputs_type`), not by annotations.
_MODELLED = (TrainJobComponent, TrainingNamespace)



class _OutputsView:
    """A component's outputs as Pulumi's analyzer reads outputs: `pulumi.Output[...]` annotations.

    The component classes carry no such annotations themselves: the Pulumi SDK reads a resource
    class's own annotations again, uncached, every time one of its instances registers. (Its
    `outputs_type`, the outputs model, is set but not annotated: every annotation here is an output.)
    """


def _outputs_view(component: type[pulumi.ComponentResource]) -> type[_OutputsView]:
    fields = component.outputs_type.model_fields
    return type(component.__name__, (_OutputsView,), {
        "__annotations__": {name: pulumi.Output[field.annotation] for name, field in fields.items()},
        "__doc__": component.__doc__, "__module__": component.__module__, "outputs_type": component.outputs_type})


class _DescribedAnalyzer(Analyzer):
    """Pulumi's analyzer, reading each component's outputs from its family's outputs model, each field's
    description from its docstring (inherited ones included, trainjobs.core.descriptions) and adding each
    argument's default."""

    def analyze_type(self, typ: type, *, is_component_output: bool) -> Any:
        if isinstance(typ, type) and issubclass(typ, _MODELLED):
            typ = _outputs_view(typ)
        return super().analyze_type(typ, is_component_output=is_component_output)

    def get_docstring(self, typ: type, name: str) -> Optional[str]:
        if isinstance(typ, type) and issubclass(typ, (*_MODELLED, _OutputsView)):
            typ = typ.outputs_type
        fields = getattr(typ, "model_fields", None) if isinstance(typ, type) and issubclass(typ, BaseModel) else None
        if not fields or name not in fields:
            return super().get_docstring(typ, name)
        field = fields[name]
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        return _with_default(field_description(typ, name), default)


def _with_default(description: str, default: Any) -> str:
    if "Default" in description or default is None or default in ({}, []) or isinstance(default, BaseModel):
        return description
    shown = json.dumps(default.value if hasattr(default, "value") else default)
    return f"{description} Default: {shown}."


def package_schema() -> dict[str, Any]:
    """The package schema other languages' SDKs are generated from, as JSON data."""
    analysis = _DescribedAnalyzer(PACKAGE).analyze(list(COMPONENTS))
    dependencies = sorted(analysis["dependencies"], key=lambda d: f"{d.name}{d.version}")
    spec = generate_schema(PACKAGE, __version__, None, analysis["component_definitions"],
                           analysis["type_definitions"], dependencies).to_json()
    # Descriptions taken from class docstrings: Python 3.13 strips their indentation, earlier versions
    # keep it; cleaned, the schema is the same bytes on every supported Python.
    for definition in [*spec.get("resources", {}).values(), *spec.get("types", {}).values()]:
        if definition.get("description"):
            definition["description"] = inspect.cleandoc(definition["description"])
    return spec


class TrainJobsProvider(ComponentProvider):
    """Pulumi's component provider for these components, with the described schema."""

    def __init__(self) -> None:
        self._name = PACKAGE
        self.analyzer = _DescribedAnalyzer(PACKAGE)
        analysis = self.analyzer.analyze(list(COMPONENTS))
        self._components = {component.__name__: component for component in COMPONENTS}
        self._component_defs = analysis["component_definitions"]
        self._type_defs = analysis["type_definitions"]
        self._external_enum_types = analysis["external_enum_types"]
        self._dependencies = sorted(analysis["dependencies"], key=lambda d: f"{d.name}{d.version}")
        Provider.__init__(self, __version__, json.dumps(package_schema()))


def serve() -> None:
    """Run the provider: the Pulumi engine starts this with the engine's address as arguments."""
    main(TrainJobsProvider(), sys.argv[1:])


def schema_text() -> str:
    """The schema as the repository keeps it (provider/schema.json), for review in pull requests."""
    return json.dumps(package_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":   # python -m trainjobs.tools.provider > provider/schema.json
    sys.stdout.write(schema_text())
