"""Example stack: every training job is described in the stack's config (`Pulumi.<stack>.yaml`).

    config:
      trainjobs-examples:jobs:
        - kind: TorchTrainJob
          name: mnist-ddp
          image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
          num_nodes: 2
          ...

An optional `profile` (a PlatformProfile) holds what every job inherits; a job's own arguments win:

      trainjobs-examples:profile:
        labels: {team: llm}
        tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]

Each entry is a component class name (`kind`), a job name and that component's arguments, plus
optionally `code`: files of this program's directory shipped as a ConfigMap `<name>-code` and
mounted read-only in the job's pods, so a stock image runs them (at most 1 MiB in all):

      code: {files: [train.py], mount_path: /workspace}

MPI jobs (MpiTrainJob, DeepSpeedTrainJob, MlxTrainJob) generate their SSH key with pulumi-tls unless the
stack has a secret `mpiSshKey`: an unencrypted private key every MPI job then uses as its `ssh_private_key`
(a job's own `ssh_private_key` wins). No pulumi-tls plugin is needed then:

      pulumi config set --secret mpiSshKey < id_ed25519

Every entry is checked before anything is created; the problems stop the program as a
pulumi.RunError, which `pulumi up` and `trainjobs render` print without a traceback.
"""

import difflib
import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import pulumi
import pulumi_kubernetes as k8s

import trainjobs
from trainjobs.pipeline.component import TrainJobComponent

HERE = Path(__file__).resolve().parent
KINDS = [name for name in trainjobs.__all__ if name.endswith("TrainJob")]   # imported when a job uses one
CONFIG_MAP_MAX_BYTES = 1024 * 1024  # the API server's limit on a ConfigMap's keys and values together
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


class Job(NamedTuple):
    component: type[TrainJobComponent]
    name: str
    args: dict[str, Any]
    code: dict[str, str]  # file name -> content; empty: nothing shipped
    mount_path: str | None


def _shown(value: Any) -> str:
    return {dict: "a mapping", list: "a list"}.get(type(value)) or json.dumps(value)


def read_jobs(key: str, jobs: Any) -> list[Job]:
    """The `jobs` config as checked entries; one RunError listing every problem otherwise."""
    if not isinstance(jobs, list):
        raise pulumi.RunError(f"{key}: must be a list of jobs, each a mapping with kind, name and the component's "
                              f"arguments; got {_shown(jobs)}")
    problems: list[str] = []
    found: list[Job] = []
    first_index: dict[tuple[str, Any], int] = {}
    for i, entry in enumerate(jobs):
        at = f"jobs[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{at}: must be a mapping with kind, name and the component's arguments, "
                            f"got {_shown(entry)}")
            continue
        args = dict(entry)
        kind, name, code = args.pop("kind", None), args.pop("name", None), args.pop("code", None)
        if not isinstance(kind, str) or kind not in KINDS:
            close = difflib.get_close_matches(kind, KINDS, n=1) if isinstance(kind, str) else []
            hint = f'did you mean "{close[0]}"?' if close else f"use one of {', '.join(sorted(KINDS))}"
            problems.append(f"{at}.kind: " + ("missing" if kind is None else f"{_shown(kind)} is not a component")
                            + f"; {hint}")
        if name is None:
            problems.append(f"{at}.name: missing; name the job (its Kubernetes objects are named after it)")
        elif not isinstance(name, str):
            problems.append(f"{at}.name: must be a string, got {_shown(name)}")
        elif (name, args.get("run")) in first_index:   # runs of one job stand side by side (docs/runs.md)
            problems.append(f"{at}.name: {_shown(name)} is also the name of jobs[{first_index[name, args.get('run')]}]"
                            "; give each job its own name, or each run its own run")
        else:
            first_index[name, args.get("run")] = i
        files, mount_path = _code(code, f"{at}.code", problems) if code is not None else ({}, None)
        found.append(Job(getattr(trainjobs, kind) if kind in KINDS else None, name, args, files, mount_path))
    if problems:
        raise pulumi.RunError(f"{key}: invalid jobs\n" + "\n".join(f"  - {p}" for p in problems))
    return found


def _code(code: Any, at: str, problems: list[str]) -> tuple[dict[str, str], str | None]:
    """A `code` entry's files (name -> text) and mount path; what is wrong is added to `problems`."""
    if not isinstance(code, dict):
        problems.append(f"{at}: must be a mapping like {{files: [train.py], mount_path: /workspace}}, "
                        f"got {_shown(code)}")
        return {}, None
    problems.extend(f"{at}.{extra}: unknown key; code takes files and mount_path"
                    for extra in sorted(code.keys() - {"files", "mount_path"}))
    mount_path = code.get("mount_path")
    if not (isinstance(mount_path, str) and mount_path.startswith("/")):
        wrong = "missing" if mount_path is None else f"{_shown(mount_path)} is not an absolute path"
        problems.append(f"{at}.mount_path: {wrong}; give the directory the files appear in, e.g. /workspace")
    paths = code.get("files")
    if not (isinstance(paths, list) and paths):
        wrong = "missing" if paths is None else f"{_shown(paths)} is not a list of files"
        problems.append(f"{at}.files: {wrong}; list files of {HERE}, e.g. [train.py]")
        return {}, mount_path
    files: dict[str, str] = {}
    for j, path in enumerate(paths):
        try:
            name, text = _read_code_file(path)
        except ValueError as exc:
            problems.append(f"{at}.files[{j}]: {exc}")
            continue
        if name in files:
            problems.append(f"{at}.files[{j}]: another file is also named {name}; each file name is a ConfigMap "
                            "key, so rename one")
        files[name] = text
    size = sum(len(name.encode()) + len(text.encode()) for name, text in files.items())
    if size > CONFIG_MAP_MAX_BYTES:
        problems.append(f"{at}.files: {size} bytes, over the {CONFIG_MAP_MAX_BYTES} a ConfigMap holds; "
                        "ship fewer files or put them in the image")
    return files, mount_path


def _read_code_file(path: Any) -> tuple[str, str]:
    """A file of the program's directory as (ConfigMap key, text); ValueError saying what is wrong otherwise."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError(f"must be a file name, got {_shown(path)}")
    file = (HERE / path).resolve()
    if not file.is_relative_to(HERE):
        raise ValueError(f"{path} is outside {HERE}; ship only files of the program's directory")
    if not CONFIG_MAP_KEY.fullmatch(file.name):
        raise ValueError(f"{file.name!r} cannot be a ConfigMap key; name the file with letters, digits, '-', '_' "
                         "and '.'")
    try:
        return file.name, file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"no file {file}; list files relative to {HERE}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{file} is not UTF-8 text; only text files can be shipped") from None
    except OSError as exc:
        raise ValueError(f"cannot read {file}: {exc.strerror}") from None


def _appended(items: Any, item: dict) -> Any:
    """`items` plus `item`; a value that is not a list is left for the component to report."""
    return [item] if items is None else [*items, item] if isinstance(items, list) else items


def ship_code(job: Job) -> list[pulumi.Resource]:
    """Turn a job's `code` into a ConfigMap and a read-only volume mount of it in `job.args`."""
    if not job.code:
        return []
    config_map = f"{job.name}-code"
    namespace = job.args.get("namespace")
    metadata = {"name": config_map, **({"namespace": namespace} if namespace else {})}
    job.args["volumes"] = _appended(job.args.get("volumes"), {"name": "code", "configMap": {"name": config_map}})
    job.args["volume_mounts"] = _appended(job.args.get("volume_mounts"),
                                          {"name": "code", "mountPath": job.mount_path, "readOnly": True})
    return [k8s.core.v1.ConfigMap(config_map, metadata=metadata, data=job.code)]


def read_profile(key: str, profile: Any) -> trainjobs.PlatformProfile | None:
    """The stack's profile, checked once for all its jobs."""
    if profile is None:
        return None
    if not isinstance(profile, dict):
        raise pulumi.RunError(f"{key}: must be a mapping of job arguments every job inherits; got {_shown(profile)}")
    return trainjobs.PlatformProfile(**profile)


config = pulumi.Config()
profile = read_profile(config.full_key("profile"), config.get_object("profile"))
# Read as a plain string so that every job checks it before anything registers; each job stores it only as a
# Pulumi secret.
ssh_key = config.get("mpiSshKey")
for job in read_jobs(config.full_key("jobs"), config.require_object("jobs")):
    if profile is not None:
        job.args.setdefault("profile", profile)
    if ssh_key is not None and "ssh_private_key" in job.component.args_type.model_fields:
        job.args.setdefault("ssh_private_key", ssh_key)
    shipped = ship_code(job)
    component = job.component(job.name, job.args, pulumi.ResourceOptions(depends_on=shipped))
    pulumi.export(job.name, {key: getattr(component, key) for key in component.outputs_type.model_fields})
