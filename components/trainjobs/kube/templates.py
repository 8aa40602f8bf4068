"""Merging settings: one model's fields over another's (a runtime's pod template under a job's), and the
lists they merge by key."""

from typing import Any

from pydantic import BaseModel



def overlay(base: BaseModel, top: BaseModel) -> BaseModel:
    """`top` over `base` (same model type), each field by `merged_value`."""
    model = type(base)   # the values are validated already: merge without validating again
    return model.model_construct(**{name: merged_value(name, getattr(base, name), getattr(top, name, None))
                                    for name in model.model_fields})


def merged_value(name: str, low: Any, high: Any) -> Any:
    """Field `name`'s `high` value over its `low` one: scalars and lists replace, maps merge by key,
    env and volumes upsert, nested models merge field by field.

    Env upserts by name (a job's value replaces the runtime's in place), volumes, init containers
    and sidecars by name, volume mounts by mount path; a nested model (resources: per key of requests
    and limits) takes the fields `high` gives.
    """
    if high is None:
        return low
    if low is None:
        return high
    if name == "env":
        return tuple(upsert(list(low), list(high), key=lambda e: e.name))
    if name in ("volumes", "init_containers", "sidecars"):
        return upsert(low, high, key=lambda v: v.get("name"))
    if name == "volume_mounts":
        return upsert(low, high, key=lambda m: m.get("mountPath"))
    if isinstance(high, BaseModel) and type(high) is type(low):
        return type(low).model_construct(_fields_set=low.model_fields_set | high.model_fields_set, **{
            field: merged_value(field, getattr(low, field), getattr(high, field)) if field in high.model_fields_set
            else getattr(low, field) for field in type(low).model_fields})
    if isinstance(high, dict):
        return {**low, **high}
    return high


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
