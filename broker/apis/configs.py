"""Shared by the config APIs (32, 33, 44): resource types, describing a topic's configs (with Kafka's
sources, synonyms, types and documentation) and the alter loop of AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.kafka.errors import ErrorCode, KafkaError

from ..acls import AclOperation as Op
from ..cluster import Cluster
from ..config import BrokerConfig
from ..topic import Topic
from ..topic_configs import TOPIC_CONFIGS, to_kafka_string
from .registry import RequestContext

TOPIC, BROKER = 2, 4
# ConfigSource values of DescribeConfigs v1+
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigType of DescribeConfigs v3+ for broker properties: BOOLEAN 1, STRING 2, LONG 5, DOUBLE 6, else by key
_TYPES = {bool: 1, str: 2, int: 5, float: 6}
_BY_KEY = {"num.partitions": 3, "node.id": 3, "log.segment.bytes": 3, "message.max.bytes": 3,
           "socket.request.max.bytes": 3, "listeners": 7, "advertised.listeners": 7, "log.dirs": 7}


def _config_type(value: Any, key: str = "") -> int:
    return _BY_KEY.get(key) or _TYPES.get(type(value), 2)


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _broker_synonyms(config: BrokerConfig, key: str) -> list[dict[str, Any]]:
    """Kafka's ConfigHelper.configSynonyms: the broker properties that may supply ``key``, those set in
    the properties file (STATIC_BROKER_CONFIG) before the built-in defaults (DEFAULT_CONFIG), then
    everything before the first synonym's own entry dropped (so ``retention.ms`` with only the
    default ``log.retention.hours`` has none)."""
    group = [s.name for s in TOPIC_CONFIGS[key].synonyms]
    if not group:
        return []
    entries = []
    for name in group:
        found = config.property_value(name)
        if found is not None and found[1]:
            entries.append({"name": name, "value": _text(found[0]), "source": STATIC_BROKER_CONFIG})
    for name in group:
        default = config.property_default(name)
        if default is not None:
            entries.append({"name": name, "value": _text(default), "source": DEFAULT_CONFIG})
    while entries and entries[0]["name"] != group[0]:
        entries.pop(0)
    return entries


def describe_topic_entry(cluster: Cluster, topic: Topic, key: str, include_documentation: bool) -> dict[str, Any]:
    """One config of one topic as DescribeConfigs answers it (ConfigHelper.createTopicConfigEntry)."""
    definition = TOPIC_CONFIGS[key]
    value = to_kafka_string(definition, topic.config.value(key))
    synonyms = _broker_synonyms(cluster.config, key)
    if key in topic.overrides:
        synonyms.insert(0, {"name": key, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
    source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
    return {"name": key, "value": value, "read_only": False, "config_source": source,
            "is_default": source == DEFAULT_CONFIG, "is_sensitive": False, "synonyms": synonyms,
            "config_type": definition.config_type,
            "documentation": definition.documentation if include_documentation else None}


def describe_topic(cluster: Cluster, name: str, keys: list[str] | None, include_synonyms: bool = True,
                   include_documentation: bool = False) -> list[dict[str, Any]]:
    """Every topic config (or those of ``keys`` that exist; unknown names are left out, as Kafka does)."""
    topic = cluster.get_topic(name)
    out = []
    for key in TOPIC_CONFIGS:
        if keys and key not in keys:
            continue
        entry = describe_topic_entry(cluster, topic, key, include_documentation)
        if not include_synonyms:
            entry["synonyms"] = []
        out.append(entry)
    return out


def describe_broker(cluster: Cluster, name: str, keys: list[str] | None) -> list[dict[str, Any]]:
    if name not in ("", str(cluster.node_id)):
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {cluster.node_id} or empty string, but received {name}")
    raw = cluster.config.model_dump(by_alias=True)
    explicit = cluster.config.model_fields_set
    fields = BrokerConfig.model_fields
    out: list[dict[str, Any]] = []
    for attr, f in fields.items():
        key = f.alias or attr
        if keys and key not in keys:
            continue
        value = raw[key]
        text = None if value is None else _text(value)
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


def check_describe_allowed(ctx: RequestContext, resource_type: int, name: str) -> None:
    """DESCRIBE_CONFIGS on the topic, or on the cluster for a broker resource, as Kafka asks."""
    if resource_type == TOPIC and not ctx.allowed_topic(Op.DESCRIBE_CONFIGS, name):
        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    if resource_type == BROKER and not ctx.allowed_cluster(Op.DESCRIBE_CONFIGS):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


def alter_topic_configs(ctx: RequestContext, req: Any,
                        new_overrides: Callable[[Any], dict[str, str]]) -> dict[str, Any]:
    """The response of AlterConfigs/IncrementalAlterConfigs: per resource, ``new_overrides(resource)``
    gives the topic's whole new set of overrides, which is validated and (unless ``validate_only``)
    applied; a KafkaError is that resource's error."""
    cluster = ctx.cluster
    responses = []
    for res in req.resources:
        result: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                                  "resource_name": res.resource_name}
        try:
            if res.resource_type == TOPIC and not ctx.allowed_topic(Op.ALTER_CONFIGS, res.resource_name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
            check_topic_resource(cluster, res.resource_type, res.resource_name)
            overrides = new_overrides(res)
            cluster.topic_config(overrides)
            if not req.validate_only:
                cluster.alter_topic_config(res.resource_name, overrides)
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        responses.append(result)
    return {"throttle_time_ms": 0, "responses": responses}
