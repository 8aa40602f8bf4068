"""The engine stand-in: runs a Pulumi program under mocks, with no CLI and no cluster, and records
what it registers, as the engine would receive it.

`trainjobs render`, `explain` and `run-local` run programs with it, and the test kit
(`trainjobs.testing`) gives it to users' tests. A preview keeps values Pulumi cannot know offline
unknown (other stacks' outputs, encrypted config); an update gives every resource its inputs as
outputs. Key pairs get real keys only when asked (`real_keys`, what run-local needs): elsewhere
nothing logs in with them, and pulumi-tls makes the real ones at deploy time.
"""

import asyncio
import gc
import json
import logging
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pulumi
from pulumi.runtime import resource as pulumi_resource
from pulumi.runtime import rpc, settings
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2, source_pb2
from pulumi.runtime.sync_await import _ensure_event_loop

from trainjobs.core.deferred import ENCRYPTED, REDACTED, SECRET_VALUES, UNKNOWN
from trainjobs.core.errors import TrainJobError, TrainJobErrors, collecting_errors
from trainjobs.tools.stackconfig import ConfigError, config_text, load_yaml_file

_SECRET_SIG_KEY = rpc._special_sig_key
_SECRET_SIG = rpc._special_secret_sig
_STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class Secret:
    """A value the program marked secret. `str()` never shows it."""

    value: Any

    def __repr__(self) -> str:
        return "Secret([secret])"


@dataclass
class RegisteredResource:
    """One resource as the engine would receive it."""

    urn: str
    type: str
    name: str
    custom: bool
    parent_urn: str | None
    provider: str | None
    dependencies: tuple[str, ...]
    protect: bool
    inputs: dict[str, Any]
    ignore_changes: tuple[str, ...] = ()
    """Input paths the engine would leave undiffed (the resource's ignore_changes option)."""
    retain_on_delete: bool = False
    """Whether Pulumi leaves the object on the cluster when it deletes the resource."""
    replace_on_changes: tuple[str, ...] = ()
    """Input paths whose change makes Pulumi replace the resource rather than update it."""
    delete_before_replace: bool = False
    """Whether Pulumi deletes the object before creating its replacement (its name is taken until then)."""

    @property
    def is_kubernetes(self) -> bool:
        return self.custom and self.type.startswith("kubernetes:")

    @property
    def kind(self) -> str:
        return self.inputs.get("kind", self.type.rsplit(":", 1)[-1])

    @property
    def manifest(self) -> dict[str, Any]:
        """The Kubernetes object with secrets revealed (for assertions; never print it)."""
        return _plain(self.inputs, redact=False)

    @property
    def redacted_manifest(self) -> dict[str, Any]:
        """The Kubernetes object with every secret value, and every Secret's data, shown as "[secret]"."""
        obj = _plain(self.inputs, redact=True)
        if obj.get("kind") == "Secret":
            for key in ("data", "stringData"):
                if isinstance(obj.get(key), dict):
                    obj[key] = {k: REDACTED for k in obj[key]}
        return obj


@dataclass
class StackResult:
    """Everything a program registered, in registration order, and its stack outputs."""

    project: str
    stack: str
    resources: list[RegisteredResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """What the program logged as warnings (a component's `pulumi.log.warn`), in order."""

    def kubernetes(self) -> list[RegisteredResource]:
        return [r for r in self.resources if r.is_kubernetes]

    def find(self, kind: str | None = None, name: str | None = None, type: str | None = None) -> list[RegisteredResource]:
        """Resources matching every given criterion: Kubernetes kind, logical name, type token."""
        return [r for r in self.resources
                if (kind is None or (r.is_kubernetes and r.kind == kind))
                and (name is None or r.name == name)
                and (type is None or r.type == type)]

    def get(self, kind: str | None = None, name: str | None = None, type: str | None = None) -> RegisteredResource:
        """The single resource matching; AssertionError naming what exists otherwise."""
        found = self.find(kind, name, type)
        if len(found) != 1:
            have = ", ".join(f"{r.kind}/{r.name}" for r in self.resources)
            raise AssertionError(f"expected one resource kind={kind} name={name} type={type}, "
                                 f"found {len(found)}; registered: {have}")
        return found[0]

    def by_urn(self, urn: str) -> RegisteredResource:
        return next(r for r in self.resources if r.urn == urn)

    def parent_chain(self, resource: RegisteredResource) -> list[RegisteredResource]:
        """The resource's ancestors, nearest first (the stack itself is not included)."""
        chain = []
        urn = resource.parent_urn
        while urn:
            parent = next((r for r in self.resources if r.urn == urn), None)
            if parent is None:
                break
            chain.append(parent)
            urn = parent.parent_urn
        return chain

    def children(self, resource: RegisteredResource) -> list[RegisteredResource]:
        return [r for r in self.resources if r.parent_urn == resource.urn]


class DuplicateResourceError(Exception):
    """Two resources with one URN: the Pulumi engine would refuse the program."""


class _RecordingMonitor(MockMonitor):
    """The stock mock monitor, recording every registration (with its parent) and refusing duplicate
    URNs; resources get their inputs back as outputs, and only key pairs and stack references, whose
    outputs are more than their inputs, go through the mocks."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registered: list[RegisteredResource] = []
        self._lock = threading.Lock()

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        if parent and parent.split("::")[2] == _STACK_TYPE:
            parent = ""  # as the engine: the stack is not part of its children's type chain
        return super().make_urn(parent, type_, name)

    def RegisterResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == _STACK_TYPE:
            return super().RegisterResource(request)
        with self._lock:
            if urn in self.resources:
                raise DuplicateResourceError(f"duplicate resource URN {urn}: two resources of type "
                                             f"{request.type} named {request.name!r} under one parent")
        if request.type in _COMPUTED_OUTPUTS:
            response = super().RegisterResource(request)
        else:
            # The mocks would return the inputs as the outputs: send the request's own properties back,
            # rather than decoding them for the mocks and encoding their answer again.
            response = resource_pb2.RegisterResourceResponse(urn=urn, id=f"{request.name}-id", object=request.object)
        _ensure_event_loop()   # decoding resource references needs one on this thread
        inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
        parent = request.parent if request.parent and request.parent.split("::")[2] != _STACK_TYPE else None
        with self._lock:
            if request.type not in _COMPUTED_OUTPUTS:
                self.resources[urn] = MockMonitor.ResourceRegistration(urn, response.id, inputs)
            self.registered.append(RegisteredResource(
                urn=urn, type=request.type, name=request.name, custom=bool(request.custom),
                parent_urn=parent, provider=request.provider or None,
                dependencies=tuple(request.dependencies), protect=bool(request.protect), inputs=inputs,
                ignore_changes=tuple(request.ignoreChanges),
                retain_on_delete=bool(request.retainOnDelete), replace_on_changes=tuple(request.replaceOnChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
            ))
        return response


_STACK_REFERENCE = "pulumi:pulumi:StackReference"
_KEY_PAIR = "tls:index/privateKey:PrivateKey"
_COMPUTED_OUTPUTS = (_KEY_PAIR, _STACK_REFERENCE)   # the resources whose outputs _EchoMocks makes up
PLACEHOLDER_KEY = "<generated by pulumi-tls at deploy time>\n"


class _EchoMocks(pulumi.runtime.Mocks):
    """Resources' outputs are their inputs, as for a successful create. Key pairs are real keys when
    asked for (run-local logs in with them), placeholders otherwise; stack references give the
    outputs the caller supplied (others stay unknown during a preview)."""

    def __init__(self, stack_outputs: dict[str, dict[str, Any]], real_keys: bool) -> None:
        self.stack_outputs = stack_outputs
        self.real_keys = real_keys

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        if args.typ == _KEY_PAIR:
            state.update(_ssh_key_pair(args.inputs.get("algorithm", "ECDSA"), args.inputs.get("ecdsaCurve"))
                         if self.real_keys else {"privateKeyOpenssh": PLACEHOLDER_KEY,
                                                 "publicKeyOpenssh": PLACEHOLDER_KEY})
        elif args.typ == _STACK_REFERENCE:
            name = args.inputs.get("name", args.name)
            if name in self.stack_outputs:
                state.update(outputs=dict(self.stack_outputs[name]), secretOutputNames=[])
        return [f"{args.name}-id", state]

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


def _ssh_key_pair(algorithm: str, curve: str | None) -> dict[str, str]:
    """A real key pair from ssh-keygen, so emulated pods can log in to each other."""
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        return {"privateKeyOpenssh": "<generated at deploy time>\n", "publicKeyOpenssh": "<generated at deploy time>\n"}
    kind = ["-t", "ed25519"] if algorithm == "ED25519" else ["-t", "ecdsa", "-b", "521" if curve == "P521" else "384"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "key"
        subprocess.run([keygen, "-q", *kind, "-N", "", "-C", "trainjobs", "-f", str(path)], check=True)
        return {"privateKeyOpenssh": path.read_text(), "publicKeyOpenssh": path.with_suffix(".pub").read_text()}


class _Collector(logging.Logger):
    """The engine's log as the CLI would show it: warnings kept for the caller (as `pulumi up` shows
    them), nothing else."""

    def __init__(self, warnings: list[str]) -> None:
        super().__init__("trainjobs.engine")
        self.kept = warnings

    def warning(self, msg: object, *args: Any, **kwargs: Any) -> None:
        self.kept.append(str(msg))

    def debug(self, msg: object, *args: Any, **kwargs: Any) -> None:
        pass

    info = debug


def run(program: Callable[[], Any], *, project: str = "test", stack: str = "test",
        config: dict[str, Any] | None = None, preview: bool = False, secret_keys: list[str] | None = None,
        stack_outputs: dict[str, dict[str, Any]] | None = None, real_keys: bool = False,
        every_error: bool = False) -> StackResult:
    """Run `program` (a callable that declares resources) under mocks; return what it registered.

    `config` keys without a namespace belong to `project`; each value reaches the program as the text
    Pulumi would pass it: a string as it is, None as "", anything else as JSON written as Pulumi writes
    it (so `Config().require_object()` reads structured values, with keys sorted, and 1.0 reads as 1). A key pair
    (pulumi_tls.PrivateKey) holds a placeholder unless `real_keys` (an update only): then ssh-keygen
    makes a real key, about 20 ms each. Exceptions from the program (such as TrainJobError)
    propagate unchanged; with `every_error`, a refusal that stops the program is raised together with
    every other refusal the program did not catch (TrainJobErrors; see `attempt`).
    """
    error, result = attempt(program, project=project, stack=stack, config=config, preview=preview,
                            secret_keys=secret_keys, stack_outputs=stack_outputs, real_keys=real_keys,
                            every_error=every_error)
    if error is not None:
        raise error
    return result


def attempt(program: Callable[[], Any], *, project: str = "test", stack: str = "test",
            config: dict[str, Any] | None = None, preview: bool = False, secret_keys: list[str] | None = None,
            stack_outputs: dict[str, dict[str, Any]] | None = None,
            real_keys: bool = False, every_error: bool = False) -> tuple[Exception | None, StackResult]:
    """Like `run`, but an exception the program raises is returned with what was registered before it.

        error, stack = attempt(lambda: TorchTrainJob("bad", {"num_nodes": 0}))
        assert isinstance(error, TrainJobError) and stack.resources == []

    With `every_error`, the program runs as under the engine: a refused job raises its TrainJobError,
    and a program that catches it goes on, as it does under `pulumi preview` (each refusal it caught
    is noted among the warnings). A refusal that stops the program is recorded, and the program runs
    again with that job skipped (it registers nothing, and the program goes on past it), until it
    completes or stops otherwise: the error returned is every refusal that stopped it, in the order
    the program made the jobs (TrainJobErrors, or the one TrainJobError), with what the last run
    registered.
    """
    def once(skip: frozenset[str] | None) -> tuple[Exception | None, StackResult, list[TrainJobError]]:
        return _attempt(program, project=project, stack=stack, config=config, preview=preview,
                        secret_keys=secret_keys, stack_outputs=stack_outputs, real_keys=real_keys, skip=skip)

    if not every_error:
        return once(None)[:2]
    stopping: set[str] = set()
    while True:
        error, result, refusals = once(frozenset(stopping))
        if not any(error is refusal for refusal in refusals):
            break
        stopping.add(str(error))   # a refusal the program did not catch: skip its job, and look for the next
    caught = [refusal for refusal in refusals if str(refusal) not in stopping]
    result.warnings.extend(f"caught by the program, which went on: {refusal}" for refusal in caught)
    if not stopping:
        return error, result
    every = [refusal for refusal in refusals if str(refusal) in stopping]
    every += [error] if isinstance(error, TrainJobError) else []   # what came after them may fail because of them
    return every[0] if len(every) == 1 else TrainJobErrors(every), result


def _attempt(program: Callable[[], Any], *, project: str, stack: str, config: dict[str, Any] | None, preview: bool,
             secret_keys: list[str] | None, stack_outputs: dict[str, dict[str, Any]] | None, real_keys: bool,
             skip: frozenset[str] | None) -> tuple[Exception | None, StackResult, list[TrainJobError]]:
    """One run of `program`: its error, what it registered, and, unless `skip` is None, every refused job's error
    (the jobs whose errors are in `skip` register nothing, and the program goes on past them)."""
    mocks = _EchoMocks(stack_outputs or {}, real_keys=real_keys and not preview)
    monitor = _RecordingMonitor(mocks)
    settings.set_root_resource(None)
    warnings: list[str] = []
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor,
                             logger=_Collector(warnings))
    pulumi.runtime.set_all_config(_config_map(project, config or {}),
                                  [key if ":" in key else f"{project}:{key}" for key in secret_keys or ()])
    outputs: dict[str, Any] = {}

    raised: list[Exception] = []

    @pulumi.runtime.test
    def _run():
        try:
            program()
        except Exception as exc:  # returned to the caller, with the registrations made before it
            raised.append(exc)
            return None
        return pulumi.Output.from_input(asyncio.ensure_future(_collect_outputs(outputs)))

    collected: list[TrainJobError] = []
    try:
        with _few_collections(), _no_call_stacks(), \
                (nullcontext([]) if skip is None else collecting_errors(skip)) as collected:
            _run()
    except Exception as exc:  # a value that failed while resolving (an Output argument's check, say)
        raised.append(exc)
    finally:
        settings.set_root_resource(None)
    if raised:
        _quiet_about(raised[0])
    error = _train_job_error(raised[0]) if raised else None
    return error, StackResult(project, stack, list(monitor.registered), outputs, warnings), collected


# Young objects per collection, and collections of each generation per collection of the next (the
# defaults are 700, 10, 10): chosen by measuring N-job registrations (docs/performance.md).
_RUN_GC_THRESHOLDS = (10_000, 50, 100)


@contextmanager
def _few_collections() -> Iterator[None]:
    """Garbage collection tuned for one program run: each generation is collected far less often.

    A run allocates many short-lived objects (Outputs, futures, requests) and keeps many others until
    it ends (resources, plans), so with the default settings the collector rescans the same survivors
    over and over, and its time grows faster than the number of jobs. The settings are restored
    afterwards, and the next collection takes the run's garbage as usual.
    """
    threshold = gc.get_threshold()
    gc.set_threshold(*_RUN_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


@contextmanager
def _no_call_stacks() -> Iterator[None]:
    """Resources registered without their call stacks.

    The Pulumi SDK sends the engine each resource's call stack (for the Pulumi service's links to
    the source); this engine keeps none, and capturing them takes a tenth of a run. Should a Pulumi
    release rename the function, runs capture stacks again and are only slower.
    """
    capture = getattr(pulumi_resource, "_get_stack_trace", None)
    if capture is None:
        yield
        return
    pulumi_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        pulumi_resource._get_stack_trace = capture


def _quiet_about(error: BaseException) -> None:
    """A failed program leaves registrations whose futures hold the error it returned; asyncio would
    report each when it is collected, later, in another test's output. Those reports are dropped."""
    error.trainjobs_returned = True
    loop = asyncio.get_event_loop()
    if getattr(loop.get_exception_handler(), "__name__", "") != "_ignore_returned_errors":
        loop.set_exception_handler(_ignore_returned_errors)


def _ignore_returned_errors(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    if not _returned(context.get("exception")):
        loop.default_exception_handler(context)


def _returned(error: BaseException | None) -> bool:
    return any(getattr(link, "trainjobs_returned", False) for link in _chain(error))


def _chain(error: BaseException | None) -> Iterator[BaseException]:
    """The error and every error it was raised from or while handling."""
    seen, pending = set(), [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__]


def _train_job_error(error: Exception) -> Exception:
    """The TrainJobError behind Pulumi's "While processing resource/input" wrappers, if there is one."""
    return next((link for link in _chain(error) if isinstance(link, TrainJobError)), error)


async def _collect_outputs(into: dict[str, Any]) -> None:
    root = settings.get_root_resource()
    for key, value in sorted(getattr(root, "outputs", {}).items()):
        out = pulumi.Output.from_input(value)
        resolved = await out.future(with_unknowns=True)
        into[key] = Secret(resolved) if await out.is_secret() else resolved


def _config_map(project: str, config: dict[str, Any]) -> dict[str, str]:
    """Each value as the text Pulumi passes the program (stackconfig.config_text)."""
    try:
        return {key: config_text(value) for key, value in _namespaced(project, config, "config").items()}
    except ValueError as exc:
        raise ConfigError(f"config: {exc}") from None


def _namespaced(project: str, config: dict[str, Any], source: str) -> dict[str, Any]:
    """`config` with every key in a namespace (`jobs` is `<project>:jobs`); a key given twice is a ConfigError."""
    result: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in config.items():
        full = key if ":" in key else f"{project}:{key}"
        if full in given:
            raise ConfigError(f"{source}: {full} is given twice, as {given[full]} and as {key}; keep one")
        given[full], result[full] = key, value
    return result


def _secure_path(value: Any, path: str) -> str | None:
    """The path of the first encrypted value (Pulumi's `{secure: <ciphertext>}`) in `value`, if any."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("secure"), str):
            return path
        found = (_secure_path(v, f"{path}.{k}") for k, v in value.items())
    elif isinstance(value, list):
        found = (_secure_path(v, f"{path}[{i}]") for i, v in enumerate(value))
    else:
        return None
    return next((p for p in found if p), None)


def find_project(program: Path) -> Path:
    """The directory holding the Pulumi.yaml that owns `program`."""
    for directory in [program.parent, *program.parent.parents]:
        if (directory / "Pulumi.yaml").is_file():
            return directory
    raise FileNotFoundError(f"no Pulumi.yaml in {program.parent} or above: the program is run as a Pulumi project; "
                            "create one there (`name: <project>` and `runtime: python`)")


def load_stack_config(project_dir: Path, stack: str, overrides: dict[str, Any] | None = None,
                      redact_encrypted: bool = False) -> tuple[str, dict[str, Any], list[str]]:
    """The project name, the `config:` of `Pulumi.<stack>.yaml` (a missing file: none) with `overrides`
    applied, and the keys that are secret.

    Both files are read as strict YAML (see `trainjobs.tools.stackconfig`); keys come back namespaced.
    An encrypted (`secure:`) value cannot be decrypted offline: with `redact_encrypted` (a render,
    whose views show secrets as [secret] anyway) it becomes a secret placeholder; otherwise it must
    be overridden. Every problem is a ConfigError naming the file and what to change.
    """
    project_file = project_dir / "Pulumi.yaml"
    project_doc = load_yaml_file(project_file)
    project = project_doc.get("name") if isinstance(project_doc, dict) else None
    if not isinstance(project, str) or not project:
        raise ConfigError(f"{project_file}: needs the project's name as a string, `name: <project>`")
    stack_file = project_dir / f"Pulumi.{stack}.yaml"
    document = (load_yaml_file(stack_file) if stack_file.is_file() else None) or {}
    if not isinstance(document, dict):
        raise ConfigError(f"{stack_file}: must be a mapping with a `config:` section, got {_yaml_type(document)}")
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{stack_file}: `config` must map keys to values, got {_yaml_type(config)}")
    merged = _namespaced(project, config, str(stack_file))
    merged.update(_namespaced(project, overrides or {}, "--config"))
    secret_keys = []
    for key, value in merged.items():
        encrypted = _secure_path(value, key)
        if encrypted and redact_encrypted and encrypted == key:
            merged[key] = ENCRYPTED
            secret_keys.append(key)
        elif encrypted:
            raise ConfigError(f"{stack_file}: {encrypted} is encrypted (secure:) and cannot be read offline; "
                              f"pass a test value with --config {key}=...")
    return project, merged, secret_keys


def _yaml_type(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value), json.dumps(value))


def run_program(program: str | os.PathLike, *, stack: str = "dev", config: dict[str, Any] | None = None,
                preview: bool = False, stack_outputs: dict[str, dict[str, Any]] | None = None,
                real_keys: bool = False) -> StackResult:
    """Run a Pulumi program file (e.g. `stacks/__main__.py`) with its `Pulumi.<stack>.yaml` config.

    `config` entries override the stack file's; ConfigError if either cannot be used. During a
    preview, encrypted config values are secret placeholders and stack references without supplied
    `stack_outputs` are unknown, as in a `pulumi preview` that cannot read them. The program's
    directory is put first on sys.path, as the Pulumi language host does.
    """
    path = Path(program).resolve()
    if path.is_dir():
        path = path / "__main__.py"
    project, stack_config, secret_keys = load_stack_config(find_project(path), stack, config,
                                                           redact_encrypted=preview)
    sys.path.insert(0, str(path.parent))
    try:
        return run(lambda: runpy.run_path(str(path), run_name="__main__"), project=project,
                   stack=stack, config=stack_config, preview=preview, secret_keys=secret_keys,
                   stack_outputs=stack_outputs, real_keys=real_keys, every_error=True)
    finally:
        sys.path.remove(str(path.parent))


def _plain(value: Any, redact: bool) -> Any:
    """Engine wire values as plain YAML-able data: secrets unwrapped or redacted, whole floats as ints."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            inner = value.get("value")
            if not redact:
                return _plain(inner, redact)
            if isinstance(inner, (dict, list)) and _holds_known_secret(inner):
                # Pulumi made the whole input secret for the secret values inside: redact just those.
                return _redact_secret_values(_plain(inner, redact))
            return {k: REDACTED for k in inner} if isinstance(inner, dict) else REDACTED
        return {k: _plain(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, redact) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, pulumi.output.Unknown):   # known only after the update (a preview)
        return UNKNOWN
    return value


def _holds_known_secret(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_known_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_known_secret(v) for v in value)
    return isinstance(value, str) and value in SECRET_VALUES


def _redact_secret_values(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _redact_secret_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_secret_values(v) for v in value]
    return REDACTED if isinstance(value, str) and value in SECRET_VALUES else value
