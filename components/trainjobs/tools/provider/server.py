"""The components as a Pulumi package, for programs in every Pulumi language.

Pulumi's Python provider server serves the component classes; their schema is inferred from the
classes themselves: the Args models give the inputs, each family's outputs model gives the outputs,
and every description (with its default) comes from the field's docstring in the code, so the
schema cannot drift from the Python API. `provider/PulumiPlugin.yaml` runs `serve()`.

Two steps of Pulumi's server are replaced: the request's inputs are decoded with each secret, unknown
and dependency kept on its value (trainjobs.tools.provider.wire), and a TrainJobError goes back to the engine
as the component's bad inputs, with its message and without a Python stack trace.
"""

import argparse
import asyncio
import inspect
import json
import sys
from typing import Any, Optional

import grpc
import pulumi
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.schema import generate_schema
from pulumi.provider.provider import ConstructResult, Provider
from pulumi.provider.server import ComponentInitError, ProviderServicer
from pulumi.resource import DependencyResource
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS   # the message sizes Pulumi's own server allows
from pulumi.runtime.proto import provider_pb2_grpc
from pydantic import BaseModel

from trainjobs import __version__
from trainjobs.pipeline.component import PACKAGE, TrainJobComponent
from trainjobs.core.descriptions import field_description
from trainjobs.core.errors import TrainJobError
from trainjobs.families import components
from trainjobs.platform.namespace import TrainingNamespace
from trainjobs.tools.provider import wire
from trainjobs.tools.engine import _quiet_about, _train_job_error

JOB_COMPONENTS = tuple(components())
COMPONENTS = (*JOB_COMPONENTS, TrainingNamespace)
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

    def construct(self, name: str, resource_type: str, inputs: pulumi.Inputs,
                  options: Optional[pulumi.ResourceOptions] = None) -> ConstructResult:
        """A component from schema-named inputs: plain values (the in-process tests), or inputs decoded by
        `wire.decode_inputs` with their secrets, unknowns and dependencies on the values they belong to."""
        self.validate_resource_type(self._name, resource_type)
        component_name = resource_type.rsplit(":", maxsplit=1)[-1]
        if component_name not in self._components:
            raise ValueError(f'unknown component "{resource_type}"; this package has '
                             f'{", ".join(f"{PACKAGE}:index:{c}" for c in self._components)}')
        definition = self._component_defs[component_name]
        args, depends = wire.arguments(dict(inputs), definition, self._type_defs)
        options = options or pulumi.ResourceOptions()
        if depends:   # a value the job needs plain came with dependencies: every object waits for them
            options = pulumi.ResourceOptions.merge(options, pulumi.ResourceOptions(
                depends_on=[DependencyResource(urn) for urn in sorted(depends)]))
        try:
            instance = self._components[component_name](name, args, options)
        except Exception as error:  # the servicer reports a TrainJobError; others keep their stack
            raise ComponentInitError(error) from error
        return ConstructResult(instance.urn, self.get_state(instance, definition))


class _Servicer(ProviderServicer):
    """Pulumi's provider server, with the inputs decoded as the program meant them (trainjobs.tools.provider.wire)
    and a TrainJobError reported as the engine reports a resource's bad inputs: its message, no stack."""

    @staticmethod
    async def _construct_inputs(inputs: Any, input_dependencies: Any) -> dict[str, Any]:
        return wire.decode_inputs(inputs, {key: set(deps.urns) for key, deps in input_dependencies.items()})

    async def _construct(self, request: Any, context: Any) -> Any:
        try:
            return await super()._construct(request, context)
        except Exception as error:
            # Raised by the constructor (inside ComponentInitError), or by an Output argument's check when
            # it resolved (inside Pulumi's "While processing resource" errors).
            cause = _train_job_error(error)
            if isinstance(cause, TrainJobError):
                # Returned to the engine: the other registrations that failed with it are not reported again
                # when asyncio collects them (as "Future exception was never retrieved").
                _quiet_about(cause)
                raise cause from None
            raise

    async def Construct(self, request: Any, context: Any) -> Any:
        """As Pulumi's server, but a TrainJobError becomes INVALID_ARGUMENT with its message: the engine shows
        it as the component's problem. (Pulumi's server would send it as "Unexpected <class ...>: ...".)"""
        try:
            return await super().Construct(request, context)
        except TrainJobError as error:   # a RunError: Pulumi's server passes it on unchanged
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))


def serve() -> None:
    """Run the provider as the Pulumi engine starts a plugin: the engine's address is the argument, and the
    first line printed is the port the provider listens on, on loopback."""
    parser = argparse.ArgumentParser(description="trainjobs component provider (a Pulumi plugin)")
    parser.add_argument("engine", help="the Pulumi engine's address")
    engine = parser.parse_known_args()[0].engine

    async def listen() -> None:
        server = grpc.aio.server(options=_GRPC_CHANNEL_OPTIONS)
        provider_pb2_grpc.add_ResourceProviderServicer_to_server(
            _Servicer(TrainJobsProvider(), sys.argv[1:], engine_address=engine), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()
        await server.wait_for_termination()

    try:
        asyncio.run(listen())
    except KeyboardInterrupt:
        pass


def schema_text() -> str:
    """The schema as the repository keeps it (provider/schema.json), for review in pull requests."""
    return json.dumps(package_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":   # python -m trainjobs.tools.provider.server > provider/schema.json
    sys.stdout.write(schema_text())
