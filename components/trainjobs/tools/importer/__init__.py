"""`trainjobs import`: a Kubeflow TrainJob, a training-operator v1 job, an MPI Operator MPIJob or a Volcano
Job as the equivalent component call.

One module per source system reads its manifests (`kubeflow`, `trainingoperator`, `mpioperator`,
`volcano`); `emit`
writes the result as Python or as a Pulumi YAML program. The import is strict:

- a field the source API does not have is an error (a typo would otherwise vanish);
- a field of the source API the job cannot express is an error that names it, unless the user
  accepts dropping it (`allow_dropped`), and then it is still listed in the output;
- where the source system behaved differently from the imported job (a documented deviation), a
  note says so, in the output and on stderr;
- the imported arguments are parsed and derived like any job's, so what is printed is a job that
  constructs.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from trainjobs.core.errors import TrainJobError, shown
from trainjobs.tools.cli.render import LOADER
from trainjobs.tools.importer.common import Findings, SourceError

__all__ = ["ImportFailed", "Imported", "import_documents", "import_files", "read_files"]

SOURCES = {
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "a Kubeflow TrainJob",
    ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"): "a Kubeflow ClusterTrainingRuntime",
    ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"): "a Kubeflow TrainingRuntime",
    ("kubeflow.org/v2beta1", "MPIJob"): "an MPI Operator MPIJob",
    ("kubeflow.org/v1", "PyTorchJob"): "a training-operator v1 PyTorchJob",
    ("kubeflow.org/v1", "MPIJob"): "a training-operator v1 MPIJob",
    ("kubeflow.org/v1", "XGBoostJob"): "a training-operator v1 XGBoostJob",
    ("kubeflow.org/v1", "JAXJob"): "a training-operator v1 JAXJob",
    ("batch.volcano.sh/v1alpha1", "Job"): "a Volcano Job",
}


@dataclass(frozen=True)
class Document:
    """One manifest of an input file."""

    file: str
    index: int
    body: dict[str, Any]

    @property
    def label(self) -> str:
        name = (self.body.get("metadata") or {}).get("name")
        return f"{self.file}: {self.body.get('kind')} {name}"


@dataclass
class Imported:
    """One imported job: the component, its name and arguments, and what the import found."""

    component: str
    name: str
    args: dict[str, Any]
    findings: Findings


class ImportFailed(Exception):
    """What stops the import, one line per problem, every document's at once."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# A source without a namespace is applied with `kubectl apply -n`; the import takes it as a flag.
NO_NAMESPACE = " (the source names no namespace: pass it as --namespace NAME, or set the source's metadata.namespace)"
# A manifest file, however many documents it holds, is far smaller; a larger file is not one.
MAX_FILE_BYTES = 10 * 2**20


_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


class _ManifestLoader(LOADER):
    """The safe loader, with strings, lists and string-keyed mappings built directly: PyYAML builds each
    through a generator, most of the time a manifest of 50,000 env entries takes to read. Every other node
    (numbers, merge keys, other keys) goes through PyYAML's own constructor; a node that contains itself is
    refused (no manifest holds one)."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if node.tag == _STR and type(node) is ScalarNode:
            return node.value
        if node in self.constructed_objects or node in self.recursive_objects:
            return super().construct_object(node, deep)
        if node.tag == _SEQ and type(node) is SequenceNode:
            self.recursive_objects[node] = None
            value: Any = [self.construct_object(child) for child in node.value]
        elif node.tag == _MAP and type(node) is MappingNode and all(
                key.tag == _STR and type(key) is ScalarNode for key, _ in node.value):
            self.recursive_objects[node] = None
            value = {key.value: self.construct_object(item) for key, item in node.value}
        else:
            return super().construct_object(node, deep)
        del self.recursive_objects[node]
        self.constructed_objects[node] = value
        return value


def read_files(paths: list[str]) -> list[Document]:
    documents: list[Document] = []
    for path in paths:
        try:
            with open(path, "rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise ImportFailed([f"{path}: cannot read it: {exc.strerror or exc}"]) from None
        if len(data) > MAX_FILE_BYTES:
            raise ImportFailed([f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB; "
                                "give the YAML file of the job"])
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise ImportFailed([f"{path}: not a text file (not UTF-8); give the YAML file of the job"]) from None
        try:
            bodies = [b for b in yaml.load_all(text, Loader=_ManifestLoader) if b is not None]
        except yaml.YAMLError as exc:
            raise ImportFailed([f"{path}: not YAML: {exc}"]) from None
        for i, body in enumerate(bodies):
            if not isinstance(body, dict):
                raise ImportFailed([f"{path}: document {i + 1} is not a Kubernetes manifest (a mapping)"])
            documents.append(Document(path, i, body))
    if not documents:
        raise ImportFailed([f"{', '.join(paths)}: no manifest to import"])
    return documents


def import_files(paths: list[str], allow_dropped: bool = False, namespace: str | None = None) -> list[Imported]:
    return import_documents(read_files(paths), allow_dropped, namespace)


def _kind(document: Document) -> tuple[str, str]:
    key = (document.body.get("apiVersion"), document.body.get("kind"))
    if key not in SOURCES:
        known = "; ".join(f"{kind} ({api})" for api, kind in SOURCES)
        raise SourceError(f"apiVersion {shown(key[0])} kind {shown(key[1])} is not one the import reads: {known}")
    name = (document.body.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise SourceError("metadata.name: every manifest needs a name (generateName is not imported)")
    return key


def import_documents(documents: list[Document], allow_dropped: bool = False,
                     namespace: str | None = None) -> list[Imported]:
    """Every job in the documents, or ImportFailed naming every problem. `namespace` is that of manifests
    naming none (as `kubectl apply -n`)."""
    from trainjobs.tools.importer import kubeflow, mpioperator, trainingoperator, volcano

    problems: list[str] = []
    runtimes: dict[tuple[str, str], dict[str, Any]] = {}
    runtime_findings: dict[tuple[str, str], Findings] = {}
    runtime_labels: dict[tuple[str, str], str] = {}
    jobs: list[tuple[Document, tuple[str, str]]] = []
    for document in documents:
        metadata = document.body.get("metadata")
        if namespace is not None and isinstance(metadata, dict) and not metadata.get("namespace"):
            metadata["namespace"] = namespace
        try:
            api, kind = _kind(document)
            if kind in kubeflow.RUNTIME_KINDS:
                key = (kind, document.body["metadata"]["name"])
                runtimes[key] = document.body
                runtime_findings[key] = Findings(document.label)
                runtime_labels[key] = document.label
                kubeflow.check_document(document.body, runtime_findings[key])
            else:
                jobs.append((document, (api, kind)))
        except SourceError as exc:
            problems.append(f"{document.label}: {exc}")
    imported: list[Imported] = []
    used: set[tuple[str, str]] = set()
    for document, (api, kind) in jobs:
        findings = Findings(document.label)
        try:
            if kind == "TrainJob":
                kubeflow.check_document(document.body, findings)
                if findings.unknown:
                    imported.append(Imported("", "", {}, findings))
                    continue
                ref = document.body["spec"]["runtimeRef"]
                key = (ref.get("kind") or "ClusterTrainingRuntime", ref["name"])
                used.add(key)
                if key in runtime_findings and runtime_findings[key].unknown:
                    continue
                component, name, args = kubeflow.import_trainjob(document.body, runtimes, findings, runtime_findings)
                if key in runtime_findings:   # the runtime's findings are the job's too
                    findings.unexpressed += runtime_findings[key].unexpressed
                    findings.notes += runtime_findings[key].notes
            elif api == trainingoperator.API_VERSION:
                component, name, args = trainingoperator.import_v1(document.body, findings)
            elif kind == "MPIJob":
                component, name, args = mpioperator.import_mpijob(document.body, findings)
            else:
                component, name, args = volcano.import_job(document.body, findings)
        except SourceError as exc:
            problems.append(f"{document.label}: {exc}")
            continue
        imported.append(Imported(component, name, args, findings))
    for key, label in runtime_labels.items():
        if key not in used:
            problems.append(f"{label}: no TrainJob given uses this runtime; give the TrainJob too")
    for findings in [*(f for f in runtime_findings.values() if f.unknown), *(i.findings for i in imported)]:
        problems += [f"{findings.source}: {f.path}: unknown field: {f.message}" for f in findings.unknown]
        if not allow_dropped:
            problems += [f"{findings.source}: {f.path}: cannot be expressed: {f.message}" for f in findings.unexpressed]
    if not problems:
        problems += _construct(imported)
    if problems:
        raise ImportFailed(problems)
    return imported


def _construct(imported: list[Imported]) -> list[str]:
    """The imported arguments parse and derive a job, as the component would; each refusal as one line."""
    from trainjobs.core.args import parse_args
    from trainjobs.pipeline.pipeline import derive
    from trainjobs.tools.provider.server import JOB_COMPONENTS

    families = {component.__name__: component.family for component in JOB_COMPONENTS}
    problems: list[str] = []
    for job in imported:
        family = families[job.component]
        try:
            derive(family, job.name, parse_args(job.component, job.name, family.args_type, job.args))
        except TrainJobError as exc:
            problems += [f"{job.findings.source}: the imported {job.component} is refused: {issue}"
                         + (NO_NAMESPACE if issue.field == "namespace" and not job.args.get("namespace") else "")
                         for issue in exc.issues]
    return problems
