"""Pod templates: a runtime's template overlaid with a job's settings, and the lists they merge."""

from typing import Any

from trainjobs.core.args import PodTemplate, Resources, TrainJobArgs


def overlay(base: PodTemplate, top: PodTemplate) -> PodTemplate:
    """`top` over `base` (same model type): scalars and lists replace, maps merge by key, env and
    volumes upsert.

    Env upserts by name (a job's value replaces the runtime's in place), volumes, init containers
    and sidecars by name, volume mounts by mount path, resources per key of requests and limits.
    """
    merged: dict[str, Any] = {}
    model = type(base)   # the values are validated already: merge without validating again
    for name in model.model_fields:
        low, high = getattr(base, name), getattr(top, name, None)
        if high is None:
            merged[name] = low
        elif low is None:
            merged[name] = high
        elif name == "env":
            merged[name] = tuple(upsert(list(low), list(high), key=lambda e: e.name))
        elif name in ("volumes", "init_containers", "sidecars"):
            merged[name] = upsert(low, high, key=lambda v: v.get("name"))
        elif name == "volume_mounts":
            merged[name] = upsert(low, high, key=lambda m: m.get("mountPath"))
        elif name == "resources":
            merged[name] = Resources.model_construct(requests={**low.requests, **high.requests},
                                                     limits={**low.limits, **high.limits})
        elif isinstance(high, dict):
            merged[name] = {**low, **high}
        else:
            merged[name] = high
    return model.model_construct(**merged)


def upsert(items: list, additions: list, key) -> list:
    result = list(items)
    for item in additions:
        for i, existing in enumerate(result):
            if key(existing) == key(item):
                result[i] = item
                break
        else:
            result.append(item)
    return result


def upsert_env(env: list[dict[str, Any]], additions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Env entries in Kubernetes form, later ones replacing earlier ones of the same name in place."""
    return upsert(env, additions, key=lambda e: e["name"])


def effective_template(runtime_template: PodTemplate | None, args: TrainJobArgs) -> PodTemplate:
    return overlay(runtime_template or PodTemplate(), args.template_overrides())


def template_env(template: PodTemplate) -> list[dict[str, Any]]:
    """The template's env entries in Kubernetes form."""
    return [e.manifest() for e in template.env or ()]
