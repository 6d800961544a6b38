"""``config/validate`` and ``/connector-plugins/{p}/config`` answers, driven by the
connector's pydantic config model (the same model that validates at create time)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from ..api.config import ConnectorConfig
from ..api.secrets import HIDDEN, hide_url_secrets, is_secret_key, is_url_key

__all__ = ["config_definitions", "validation_result"]

_COMMON = set(ConnectorConfig.model_fields)


def _type_name(annotation: Any) -> str:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next((a for a in args if a is not type(None)), str)
    if annotation is SecretStr:
        return "PASSWORD"
    if annotation is bool:
        return "BOOLEAN"
    if annotation is int:
        return "INT"
    if annotation is float:
        return "DOUBLE"
    if typing.get_origin(annotation) is list:
        return "LIST"
    return "STRING"


def _default(f: FieldInfo) -> str | None:
    if f.is_required():
        return None
    value = f.get_default(call_default_factory=True)
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def _definitions(cls: type) -> list[dict[str, Any]]:
    model = cls.config_class  # type: ignore[attr-defined]
    out = []
    for order, (attr, f) in enumerate(model.model_fields.items()):
        name = f.alias or attr
        out.append({
            "name": name,
            "type": _type_name(f.annotation),
            "required": f.is_required(),
            "default_value": _default(f),
            "importance": "HIGH" if f.is_required() else "MEDIUM",
            "documentation": f.description or "",
            "group": "Common" if attr in _COMMON else cls.__name__,
            "order": order + 1,
            "width": "NONE",
            "display_name": name,
            "dependents": [],
        })
    return out


def config_definitions(cls: type) -> list[dict[str, Any]]:
    """Kafka Connect's ConfigKeyInfo list for a connector class."""
    return _definitions(cls)


def validation_result(cls: type, props: dict[str, Any], errors: dict[str, list[str]]) -> dict[str, Any]:
    definitions = _definitions(cls)
    known = {d["name"] for d in definitions}
    configs = []
    for d in definitions:
        value = props.get(d["name"], d["default_value"])
        if (d["type"] == "PASSWORD" or is_secret_key(d["name"])) and value:
            value = HIDDEN  # as Kafka answers a PASSWORD value
        elif is_url_key(d["name"]) and isinstance(value, str):
            value = hide_url_secrets(value)
        configs.append({"definition": d, "value": {"name": d["name"], "value": None if value is None else str(value),
                                                   "recommended_values": [], "errors": errors.get(d["name"], []),
                                                   "visible": True}})
    for key, messages in errors.items():
        if key not in known:  # errors of keys outside the model: transforms, converters...
            configs.append({"definition": {"name": key, "type": "STRING", "required": False, "default_value": None,
                                           "importance": "MEDIUM", "documentation": "", "group": "Common",
                                           "order": len(configs) + 1, "width": "NONE", "display_name": key,
                                           "dependents": []},
                            "value": {"name": key, "value": HIDDEN if is_secret_key(key) and props.get(key)
                                      else props.get(key), "recommended_values": [],
                                      "errors": messages, "visible": True}})
    groups = sorted({c["definition"]["group"] for c in configs}, key=lambda g: (g != "Common", g))
    return {"name": f"{cls.__module__}.{cls.__qualname__}", "error_count": sum(len(m) for m in errors.values()),
            "groups": groups, "configs": configs}
