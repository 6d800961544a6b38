"""Dynamic broker configs (``kafka-configs.sh --entity-type brokers``): which broker properties Kafka lets
AlterConfigs and IncrementalAlterConfigs change at run time, at which level, and the values set so far.

Two levels, as in Kafka: per broker (resource name = this node's id) and the cluster-wide default
(resource name ""); a per-broker value wins over the default, which wins over the properties file.
Honoured here: the broker defaults of the topic configs (Kafka's ``DynamicLogConfig``: each topic
config's first broker synonym, e.g. ``log.retention.ms``, ``log.segment.bytes``, ``message.max.bytes``,
``log.cleanup.policy``, ``log.cleaner.delete.retention.ms``), which apply at once to every topic without an
override of its own. The other keys Kafka marks dynamic (thread pools, the cleaner's buffers, connection
limits, SASL/Kerberos listener settings) are accepted, validated by type, kept and described, with no
effect on this broker. The values are kept in the log directory like the topic metadata (state_file.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import InvalidConfig, InvalidRequest
from .state_file import read_json, write_json
from .topic_configs import TOPIC_CONFIGS, TopicConfigDef, parse_topic_value

__all__ = ["DYNAMIC_BROKER_CONFIGS", "PER_BROKER_ONLY", "DynamicBrokerConfigs", "broker_synonyms", "honoured_values"]

log = logging.getLogger(__name__)

BROKER_CONFIGS_FILE = "headwater-broker-configs.json"


def _accepted(name: str, type_: str, default: str) -> TopicConfigDef:
    return TopicConfigDef(name, type_, default, None, (), honoured=False)


# DynamicLogConfig.ReconfigurableConfigs: the first broker synonym of each topic config, less
# log.message.format.version (Kafka excludes it); honoured, as the defaults of every topic's configs.
_LOG_CONFIGS = {d.synonyms[0].name: replace(d, name=d.synonyms[0].name, synonyms=())
                for d in TOPIC_CONFIGS.values() if d.synonyms and d.synonyms[0].name != "log.message.format.version"}

# Kafka's other dynamic broker configs (LogCleaner, DynamicThreadPool, SocketServer, producer state,
# metric reporters, and the listener SASL settings), with their ConfigDef types and defaults.
_OTHER_CONFIGS = {d.name: d for d in (
    _accepted("log.cleaner.threads", "INT", "1"),
    _accepted("log.cleaner.dedupe.buffer.size", "LONG", "134217728"),
    _accepted("log.cleaner.io.buffer.load.factor", "DOUBLE", "0.9"),
    _accepted("log.cleaner.io.buffer.size", "INT", "524288"),
    _accepted("log.cleaner.io.max.bytes.per.second", "DOUBLE", "1.7976931348623157E308"),
    _accepted("log.cleaner.backoff.ms", "LONG", "15000"),
    _accepted("num.io.threads", "INT", "8"),
    _accepted("num.network.threads", "INT", "3"),
    _accepted("num.replica.fetchers", "INT", "1"),
    _accepted("num.recovery.threads.per.data.dir", "INT", "2"),
    _accepted("background.threads", "INT", "10"),
    _accepted("max.connections", "INT", "2147483647"),
    _accepted("max.connections.per.ip", "INT", "2147483647"),
    _accepted("max.connections.per.ip.overrides", "STRING", ""),
    _accepted("max.connection.creation.rate", "INT", "2147483647"),
    _accepted("producer.id.expiration.ms", "INT", "86400000"),
    _accepted("transaction.partition.verification.enable", "BOOLEAN", "true"),
    _accepted("metric.reporters", "LIST", ""),
    _accepted("sasl.enabled.mechanisms", "LIST", "GSSAPI"),
    _accepted("sasl.kerberos.service.name", "STRING", ""),
    _accepted("sasl.kerberos.kinit.cmd", "STRING", "/usr/bin/kinit"),
    _accepted("sasl.kerberos.ticket.renew.window.factor", "DOUBLE", "0.8"),
    _accepted("sasl.kerberos.ticket.renew.jitter", "DOUBLE", "0.05"),
    _accepted("sasl.kerberos.min.time.before.relogin", "LONG", "60000"),
    _accepted("sasl.kerberos.principal.to.local.rules", "LIST", "DEFAULT"),
    _accepted("sasl.login.refresh.window.factor", "DOUBLE", "0.8"),
    _accepted("sasl.login.refresh.window.jitter", "DOUBLE", "0.05"),
    _accepted("sasl.login.refresh.min.period.seconds", "SHORT", "60"),
    _accepted("sasl.login.refresh.buffer.seconds", "SHORT", "300"),
)}

DYNAMIC_BROKER_CONFIGS: dict[str, TopicConfigDef] = {**_LOG_CONFIGS, **_OTHER_CONFIGS}
# Kafka's PerBrokerConfigs among them (its listener configs): settable per broker only, not as the default
PER_BROKER_ONLY = frozenset(name for name in _OTHER_CONFIGS if name.startswith("sasl."))

# Kafka broker properties this broker has no field for, read-only in Kafka (refused as such, not as unknown)
KAFKA_READ_ONLY = frozenset({"broker.id", "log.dir", "process.roles", "controller.listener.names",
                             "controller.quorum.voters", "zookeeper.connect", "inter.broker.listener.name"})

# DynamicBrokerConfig.brokerConfigSynonyms: properties that supply the same value, in Kafka's priority order
_SYNONYM_GROUPS = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))


def broker_synonyms(name: str) -> list[str]:
    return next((list(group) for group in _SYNONYM_GROUPS if name in group), [name])


def _scala_set(names: list[str]) -> str:
    return "Set(" + ", ".join(names) + ")"


def parse_dynamic_value(name: str, text: str) -> Any:
    """``text`` parsed and validated as Kafka's ConfigDef does for dynamic broker config ``name``
    (BrokerError(INVALID_CONFIG) in Kafka's words)."""
    d = DYNAMIC_BROKER_CONFIGS[name]
    value = parse_topic_value(d, text)
    if d.validator is not None:
        d.validator(name, value)
    return value


@dataclass
class DynamicBrokerConfigs:
    """The dynamic values of this node (per broker) and of the cluster-wide default, as Kafka-named text.
    In a ZooKeeper cluster (``zookeeper``) they are ZooKeeper's (/config/brokers/<id> and
    /config/brokers/<default>, broker/cluster/config_sync.py sets them) and the file is neither read nor written."""

    log_dir: Path
    node_id: int
    zookeeper: bool = False
    per_broker: dict[str, str] = field(default_factory=dict)
    default: dict[str, str] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.log_dir / BROKER_CONFIGS_FILE

    def load(self) -> None:
        saved = read_json(self.path) or {}
        if self.zookeeper:
            if any(saved.get("brokers", {}).values()) or saved.get("default"):
                log.warning("%s: dynamic broker configs from single-node use are not used in a ZooKeeper cluster "
                            "(the cluster's are in /config/brokers)", self.path)
            return
        self.per_broker = dict(saved.get("brokers", {}).get(str(self.node_id), {}))
        self.default = dict(saved.get("default", {}))

    def save(self) -> None:
        if self.zookeeper:
            return
        saved = read_json(self.path) or {}
        brokers = dict(saved.get("brokers", {}))
        brokers[str(self.node_id)] = self.per_broker
        write_json(self.path, {"brokers": brokers, "default": self.default})

    def level(self, resource_name: str) -> dict[str, str]:
        """The values a BROKER resource names: this node's ("<node id>") or the cluster default ("")."""
        if resource_name == "":
            return self.default
        if resource_name == str(self.node_id):
            return self.per_broker
        raise InvalidRequest(f"Unexpected broker id, expected {self.node_id} or empty "
                             f"string, but received {resource_name}")

    def check(self, resource_name: str, values: dict[str, str], known: set[str]) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs for the new values of one level: every name dynamic
        (``known`` broker properties that are not: INVALID_REQUEST naming them; names this broker does not
        know: INVALID_CONFIG), per-broker-only names not at the default level, every value of its type."""
        unknown = sorted(n for n in values if n not in DYNAMIC_BROKER_CONFIGS and n not in known | KAFKA_READ_ONLY)
        if unknown:
            raise InvalidConfig(f"Unknown broker config name: {', '.join(unknown)}")
        resource = f"ConfigResource(type=BROKER, name='{resource_name}')"
        static = sorted(n for n in values if n not in DYNAMIC_BROKER_CONFIGS)
        if static:
            raise InvalidRequest(f"Invalid config value for resource {resource}: Cannot "
                                 f"update these configs dynamically: {_scala_set(static)}")
        per_broker = sorted(n for n in values if n in PER_BROKER_ONLY)
        if resource_name == "" and per_broker:
            raise InvalidRequest(f"Invalid config value for resource {resource}: Cannot update these configs at "
                                 f"default cluster level, broker id must be specified: {_scala_set(per_broker)}")
        for name, text in values.items():
            parse_dynamic_value(name, text)


def honoured_values(default: dict[str, str], per_broker: dict[str, str]) -> dict[str, str]:
    """The dynamic values that apply to this broker's properties: the cluster default's, this node's over them."""
    merged = {k: v for k, v in default.items() if k in _LOG_CONFIGS}
    merged.update((k, v) for k, v in per_broker.items() if k in _LOG_CONFIGS)
    return merged
