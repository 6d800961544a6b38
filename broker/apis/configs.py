"""Shared by the config APIs (32, 33, 44): resource types, describing a topic's or a broker's configs (with
Kafka's sources, synonyms, types and documentation) and the alter loop of AlterConfigs and
IncrementalAlterConfigs over topics and broker levels.

In a ZooKeeper cluster a cluster topic's config and the dynamic broker levels are the cluster's
(broker/cluster/config_sync.py): altered there (read, computed and written in ZooKeeper, every broker told),
and a cluster topic is described on every broker from its view of the topic, whether or not it holds a
replica of it. Topics of this broker's own (internal ones, single-node use) stay local."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import SecretStr

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..config.broker_config import is_password_setting
from ..config.dynamic_configs import DYNAMIC_BROKER_CONFIGS, broker_synonyms
from ..config.topic_configs import TOPIC_CONFIGS, TopicConfigDef, to_kafka_string
from ..errors import BrokerError, InvalidRequest
from ..protocol.requests import Resource
from ..topics.cluster import Cluster
from ..topics.topic import Topic
from .registry import RequestContext

if TYPE_CHECKING:  # kazoo loads only in cluster mode
    from ..cluster.membership import SharedConfigs

TOPIC, BROKER = 2, 4
# ConfigSource values of DescribeConfigs v1+
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
# ConfigType of DescribeConfigs v3+ for broker properties: BOOLEAN 1, STRING 2, LONG 5, DOUBLE 6, else by key
_TYPES = {bool: 1, str: 2, int: 5, float: 6}
_BY_KEY = {"num.partitions": 3, "node.id": 3, "log.segment.bytes": 3, "message.max.bytes": 3,
           "socket.request.max.bytes": 3, "listeners": 7, "advertised.listeners": 7, "log.dirs": 7}
# What AlterConfigs and IncrementalAlterConfigs compute for one resource: its new values, from the resource
# of the request, the current values and the definitions of the keys (types, defaults for APPEND)
R = TypeVar("R", bound=Resource)


_PASSWORD = 9  # DescribeConfigs' config type of a secret (Kafka's ConfigType.PASSWORD)


def _config_type(value: Any, key: str = "") -> int:
    definition = DYNAMIC_BROKER_CONFIGS.get(key)
    return _BY_KEY.get(key) or (definition.config_type if definition else _TYPES.get(type(value), 2))


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _synonyms(cluster: Cluster, names: list[str], first: str) -> list[dict[str, Any]]:
    """Kafka's ConfigHelper.configSynonyms: the properties of ``names`` (one value's synonyms, in Kafka's
    priority order) by source: dynamic per broker, dynamic cluster default, set in the properties file
    (STATIC_BROKER_CONFIG), built-in default; then everything before ``first``'s own entry dropped (so
    ``retention.ms`` with only the default ``log.retention.hours`` has none)."""
    dynamic, static = cluster.dynamic, cluster.static_config
    entries = [{"name": n, "value": values[n], "source": source}
               for source, values in ((DYNAMIC_BROKER_CONFIG, dynamic.per_broker),
                                      (DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic.default))
               for n in names if n in values]
    for name in names:
        found = static.property_value(name)
        if found is not None and found[1]:
            entries.append({"name": name, "value": _text(found[0]), "source": STATIC_BROKER_CONFIG})
    properties = static.property_names()
    for name in names:
        default = static.property_default(name)
        if default is None and name not in properties and name in DYNAMIC_BROKER_CONFIGS:
            default = DYNAMIC_BROKER_CONFIGS[name].default  # a Kafka property this broker only keeps
        if default is not None:
            entries.append({"name": name, "value": _text(default), "source": DEFAULT_CONFIG})
    while entries and entries[0]["name"] != first:
        entries.pop(0)
    return entries


def _broker_synonyms(cluster: Cluster, key: str) -> list[dict[str, Any]]:
    """The broker properties that may supply topic config ``key``'s default."""
    group = [s.name for s in TOPIC_CONFIGS[key].synonyms]
    return _synonyms(cluster, group, group[0]) if group else []


def describe_topic_entry(cluster: Cluster, topic: Topic, key: str, include_documentation: bool) -> dict[str, Any]:
    """One config of one topic as DescribeConfigs answers it (ConfigHelper.createTopicConfigEntry)."""
    definition = TOPIC_CONFIGS[key]
    value = to_kafka_string(definition, topic.config.value(key))
    synonyms = _broker_synonyms(cluster, key)
    if key in topic.overrides:
        synonyms.insert(0, {"name": key, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
    source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
    return {"name": key, "value": value, "read_only": False, "config_source": source,
            "is_default": source == DEFAULT_CONFIG, "is_sensitive": False, "synonyms": synonyms,
            "config_type": definition.config_type,
            "documentation": definition.documentation if include_documentation else None}


def _cluster_configs(cluster: Cluster, topic: str | None = None) -> SharedConfigs | None:
    """The cluster's configs when ``topic`` (None: the broker levels) is the cluster's; None when this broker's."""
    membership = cluster.membership
    if membership is None or membership.configs is None:
        return None
    if topic is not None and topic in cluster.topics and topic not in cluster.replicated:
        return None  # this broker's own (internal, or from single-node use)
    return membership.configs


def described_topic(cluster: Cluster, name: str) -> Topic:
    """The topic whose configs DescribeConfigs answers: a cluster topic as this broker's view has it (its
    overrides as ZooKeeper last said, over this broker's defaults), else this broker's own."""
    membership = cluster.membership
    meta = membership.sync.topics.get(name) if _cluster_configs(cluster, name) and membership else None
    if meta is None:
        return cluster.get_topic(name)
    try:
        config = cluster.topic_config(meta.overrides)
    except BrokerError:  # written by another tool: its replicas run on the defaults (Cluster.open_replica)
        config = cluster.defaults
    return Topic(name, meta.topic_id, dict(meta.overrides), config)


def describe_topic(cluster: Cluster, name: str, keys: list[str] | None, include_synonyms: bool = True,
                   include_documentation: bool = False) -> list[dict[str, Any]]:
    """Every topic config (or those of ``keys`` that exist; unknown names are left out, as Kafka does)."""
    topic = described_topic(cluster, name)
    out = []
    for key in TOPIC_CONFIGS:
        if keys and key not in keys:
            continue
        entry = describe_topic_entry(cluster, topic, key, include_documentation)
        if not include_synonyms:
            entry["synonyms"] = []
        out.append(entry)
    return out


def describe_broker(cluster: Cluster, name: str, keys: list[str] | None,
                    include_synonyms: bool = True) -> list[dict[str, Any]]:
    """Kafka's ConfigHelper for a BROKER resource: this node ("<node id>") lists every property with its value
    in effect and the source of the first synonym left (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG, DEFAULT_CONFIG); the cluster default ("") lists only the values set there."""
    dynamic = cluster.dynamic
    dynamic.level(name)  # another broker's id: INVALID_REQUEST
    per_broker = name != ""
    current = cluster.config.model_dump(by_alias=True)
    # the listeners' ssl.* / sasl.* / listener.name.* settings each under its own name, as Kafka lists them
    current.update(current.pop("security_properties", None) or {})
    if per_broker:
        names = list(current) + [n for n in DYNAMIC_BROKER_CONFIGS if n not in current]
    else:
        names = list(dynamic.default)
    out: list[dict[str, Any]] = []
    for key in names:
        if keys and key not in keys:
            continue
        synonyms = _synonyms(cluster, broker_synonyms(key), key)
        if not per_broker:
            synonyms = [s for s in synonyms if s["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
            value: Any = dynamic.default[key]
        else:
            value = current[key] if key in current else \
                dynamic.per_broker.get(key, dynamic.default.get(key, DYNAMIC_BROKER_CONFIGS[key].default))
        source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
        # a password (zookeeper.ssl.*, a listener's ssl.*.password or JAAS entry): null, as Kafka answers them
        sensitive = isinstance(value, SecretStr) or is_password_setting(key)
        if sensitive:
            synonyms = [{**s, "value": None} for s in synonyms]
        out.append({"name": key, "value": None if value is None or sensitive else _text(value),
                    "read_only": key not in DYNAMIC_BROKER_CONFIGS, "config_source": source,
                    "is_default": source == DEFAULT_CONFIG, "is_sensitive": sensitive,
                    "synonyms": synonyms if include_synonyms else [],
                    "config_type": _PASSWORD if sensitive else _config_type(value, key),
                    "documentation": None})
    return out


def check_describe_allowed(ctx: RequestContext, resource_type: int, name: str) -> None:
    """DESCRIBE_CONFIGS on the topic, or on the cluster for a broker resource, as Kafka asks."""
    if resource_type == TOPIC and not ctx.allowed_topic(Op.DESCRIBE_CONFIGS, name):
        raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    if resource_type == BROKER and not ctx.allowed_cluster(Op.DESCRIBE_CONFIGS):
        raise BrokerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


def _computing(new_values: Callable[[R, dict[str, str], Mapping[str, TopicConfigDef]], dict[str, str]], res: R,
               definitions: Mapping[str, TopicConfigDef]) -> Callable[[dict[str, str]], dict[str, str]]:
    """``new_values`` for ``res`` as a function of the current values alone (the cluster's read them)."""
    return lambda current: new_values(res, current, definitions)


async def alter_configs(ctx: RequestContext, resources: Sequence[R], validate_only: bool,
                        new_values: Callable[[R, dict[str, str], Mapping[str, TopicConfigDef]], dict[str, str]]
                        ) -> dict[str, Any]:
    """The response of AlterConfigs/IncrementalAlterConfigs: per resource, ``new_values`` gives a topic's whole
    new set of overrides, or the whole new set of dynamic configs of a broker level (this node, or the
    cluster default), which is validated and (unless ``validate_only``) applied, in a cluster from and to
    ZooKeeper; a BrokerError is that resource's error."""
    cluster = ctx.cluster
    responses = []
    for res in resources:
        result: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                                  "resource_name": res.resource_name}
        name = res.resource_name
        try:
            if res.resource_type == TOPIC:
                if not ctx.allowed_topic(Op.ALTER_CONFIGS, name):
                    raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
                shared = _cluster_configs(cluster, name)
                if shared is not None:
                    await shared.alter_topic(name, _computing(new_values, res, TOPIC_CONFIGS), validate_only)
                else:
                    overrides = new_values(res, dict(cluster.get_topic(name).overrides), TOPIC_CONFIGS)
                    cluster.topic_config(overrides)
                    if not validate_only:
                        cluster.alter_topic_config(name, overrides)
            elif res.resource_type == BROKER:
                if not ctx.allowed_cluster(Op.ALTER_CONFIGS):
                    raise BrokerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
                shared = _cluster_configs(cluster)
                if shared is not None:
                    await shared.alter_broker(name, _computing(new_values, res, DYNAMIC_BROKER_CONFIGS),
                                              validate_only)
                else:
                    values = new_values(res, dict(cluster.dynamic.level(name)), DYNAMIC_BROKER_CONFIGS)
                    if validate_only:
                        cluster.check_broker_configs(name, values)
                    else:
                        cluster.alter_broker_configs(name, values)
            else:
                raise InvalidRequest(f"altering resource type {res.resource_type} is not "
                                     "supported; only topics and brokers")
        except BrokerError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        responses.append(result)
    return {"throttle_time_ms": 0, "responses": responses}
