"""Shared by the config APIs (32, 33, 44): resource types, describing a topic's configs and the
alter loop of AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.kafka.errors import ErrorCode, KafkaError

from ..cluster import Cluster
from ..config import BrokerConfig

TOPIC, BROKER = 2, 4
# ConfigSource values of DescribeConfigs v1+
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigType of DescribeConfigs v3+: BOOLEAN 1, STRING 2, INT 3, LONG 5, DOUBLE 6, LIST 7
_TYPES = {bool: 1, str: 2, int: 5, float: 6}
_BY_KEY = {"cleanup.policy": 7, "segment.bytes": 3, "max.message.bytes": 3, "index.interval.bytes": 3,
           "num.partitions": 3, "node.id": 3, "log.segment.bytes": 3, "message.max.bytes": 3,
           "socket.request.max.bytes": 3, "listeners": 7, "advertised.listeners": 7, "log.dirs": 7}


def _config_type(value: Any, key: str = "") -> int:
    return _BY_KEY.get(key) or _TYPES.get(type(value), 2)


def describe_topic(cluster: Cluster, name: str, keys: list[str] | None) -> list[dict[str, Any]]:
    topic = cluster.get_topic(name)
    props = topic.config.to_properties()
    raw = topic.config.model_dump(by_alias=True)
    out = []
    for key, value in props.items():
        if keys and key not in keys:
            continue
        override = key in topic.overrides
        source = DYNAMIC_TOPIC_CONFIG if override else DEFAULT_CONFIG
        out.append({"name": key, "value": value, "read_only": False, "config_source": source,
                    "is_default": not override, "is_sensitive": False, "synonyms": [],
                    "config_type": _config_type(raw[key], key), "documentation": None})
    return out


def describe_broker(cluster: Cluster, name: str, keys: list[str] | None) -> list[dict[str, Any]]:
    if name not in ("", str(cluster.node_id)):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown broker {name!r}")
    raw = cluster.config.model_dump(by_alias=True)
    explicit = cluster.config.model_fields_set
    fields = BrokerConfig.model_fields
    out: list[dict[str, Any]] = []
    for attr, f in fields.items():
        key = f.alias or attr
        if keys and key not in keys:
            continue
        value = raw[key]
        text = None if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
        out.append({"name": key, "value": text,
                    "read_only": True, "config_source": STATIC_BROKER_CONFIG if attr in explicit else DEFAULT_CONFIG,
                    "is_default": attr not in explicit, "is_sensitive": False, "synonyms": [],
                    "config_type": _config_type(value, key), "documentation": None})
    return out


def check_topic_resource(cluster: Cluster, resource_type: int, name: str) -> None:
    if resource_type != TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"altering resource type {resource_type} is not supported; only topics")
    cluster.get_topic(name)


def alter_topic_configs(cluster: Cluster, req: Any,
                        new_overrides: Callable[[Any], dict[str, str]]) -> dict[str, Any]:
    """The response of AlterConfigs/IncrementalAlterConfigs: per resource, ``new_overrides(resource)``
    gives the topic's whole new set of overrides, which is validated and (unless ``validate_only``)
    applied; a KafkaError is that resource's error."""
    responses = []
    for res in req.resources:
        result: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                                  "resource_name": res.resource_name}
        try:
            check_topic_resource(cluster, res.resource_type, res.resource_name)
            overrides = new_overrides(res)
            cluster.topic_config(overrides)
            if not req.validate_only:
                cluster.alter_topic_config(res.resource_name, overrides)
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        responses.append(result)
    return {"throttle_time_ms": 0, "responses": responses}
