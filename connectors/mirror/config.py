"""The three MirrorMaker connectors' configs, with MM2's keys (MirrorConnectorConfig and its subclasses).

Both clusters are named by alias and reached with ``source.cluster.*`` / ``target.cluster.*`` client
settings (``bootstrap.servers``, and ``consumer.*``, ``producer.*``, ``admin.*`` for one client kind).
Where MM2's default would not run on a one-broker cluster (replication factors of 2 and 3) the default
here is -1: the target broker's own default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, field_validator, model_validator

from headwater.connect.api import SourceConnectorConfig
from headwater.connect.kafka import clients
from headwater.connect.kafka.raw_fetch import READ_COMMITTED, isolation_level
from headwater.connect.kafka.security import client_security, is_security_key

from .filters import DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE, NameFilter, group_filter, topic_filter
from .policy import ReplicationPolicy, replication_policy

__all__ = ["Cluster", "MirrorCheckpointConfig", "MirrorConfig", "MirrorHeartbeatConfig", "MirrorSourceConfig",
           "reads_committed", "source_consumer_settings"]

_ALIAS = re.compile(r"^[A-Za-z0-9_-]+$")
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
# Topic configs never copied to the target (MM2's DefaultConfigPropertyFilter): they belong to the
# target cluster's own operation.
CONFIG_PROPERTIES_EXCLUDE = (r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
                             r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
                             r"unclean\.leader\.election\.enable, min\.insync\.replicas")
_KINDS = ("consumer.", "producer.", "admin.")


@dataclass
class Cluster:
    """One side of a flow: its alias and client settings."""

    alias: str
    settings: dict[str, str] = field(default_factory=dict)  # without the source.cluster. prefix

    @property
    def bootstrap(self) -> str:
        return self.settings.get("bootstrap.servers", "")

    def client(self, kind: str) -> dict[str, str]:
        """Settings for one client kind: the cluster's common ones, then ``<kind>.*`` key by key (as MM2's)."""
        common = {k: v for k, v in self.settings.items() if not k.startswith(_KINDS)}
        return {**common, **{k[len(kind) + 1:]: v for k, v in self.settings.items() if k.startswith(kind + ".")}}

    def consumer(self, **defaults: Any) -> Any:
        return clients.consumer(self.bootstrap, self.client("consumer"), **defaults)

    def producer(self, **defaults: Any) -> Any:
        return clients.producer(self.bootstrap, self.client("producer"), **defaults)

    def admin(self, **defaults: Any) -> Any:
        return clients.admin_client(self.bootstrap, self.client("admin"), **{"request_timeout_ms": 30000, **defaults})


class MirrorConfig(SourceConnectorConfig):
    """Keys all three connectors share (MirrorConnectorConfig)."""

    source_cluster_alias: str = Field(alias="source.cluster.alias", min_length=1,
                                      description="Alias of the cluster records are mirrored from.")
    target_cluster_alias: str = Field("target", alias="target.cluster.alias", min_length=1,
                                      description="Alias of the cluster records are mirrored into.")
    replication_policy_class: str = Field(
        "DefaultReplicationPolicy", alias="replication.policy.class",
        description="DefaultReplicationPolicy (topics named <source>.<topic>) or IdentityReplicationPolicy "
                    "(names kept; one-way flows only). Kafka's Java names are accepted.")
    replication_policy_separator: str = Field(".", alias="replication.policy.separator", min_length=1,
                                              description="Separator between the source alias and the topic name.")
    offset_syncs_topic_location: str = Field(
        "source", alias="offset-syncs.topic.location", pattern="^(source|target)$",
        description="Cluster holding mm2-offset-syncs.<target>.internal: source or target.")
    admin_timeout_ms: int = Field(60000, alias="admin.timeout.ms", ge=1,
                                  description="Milliseconds to wait for either cluster's answers.")

    @field_validator("source_cluster_alias", "target_cluster_alias")
    @classmethod
    def _alias(cls, value: str) -> str:
        if not _ALIAS.match(value):
            raise ValueError(f"{value!r} is not a cluster alias (letters, digits, _ and -)")
        return value

    @field_validator("replication_policy_class")
    @classmethod
    def _policy(cls, value: str) -> str:
        replication_policy(value)  # raises with the accepted names
        return value

    @model_validator(mode="after")
    def _distinct(self) -> MirrorConfig:
        if self.source_cluster_alias == self.target_cluster_alias:
            raise ValueError(f"target.cluster.alias: the source and target clusters are both "
                             f"{self.source_cluster_alias!r}: a cluster cannot mirror into itself")
        return self

    @model_validator(mode="after")
    def _security(self) -> MirrorConfig:
        """Each cluster's client security settings (``source.cluster.security.protocol``, ``...sasl.jaas.config``,
        ``...ssl.*``, per client kind too) checked at validation: a GSSAPI login or a JKS store is refused
        here, naming the key, not when a task first connects."""
        for side in ("source", "target"):
            cluster = self.cluster(side)
            for kind in ("consumer", "producer", "admin"):
                try:
                    client_security(cluster.client(kind))
                except ValueError as exc:
                    own = any(is_security_key(k[len(kind) + 1:]) for k in cluster.settings if k.startswith(kind + "."))
                    raise ValueError(f"{side}.cluster.{kind + '.' if own else ''}{exc}") from None
        return self

    def policy(self) -> ReplicationPolicy:
        return replication_policy(self.replication_policy_class, self.replication_policy_separator)

    def remote_topic(self, topic: str) -> str:
        """The source topic's name in the target cluster."""
        return self.policy().format_remote_topic(self.source_cluster_alias, topic)

    def cluster(self, side: str) -> Cluster:
        prefix = f"{side}.cluster."
        settings = {k[len(prefix):]: str(v) for k, v in (self.model_extra or {}).items() if k.startswith(prefix)}
        alias = self.source_cluster_alias if side == "source" else self.target_cluster_alias
        return Cluster(alias, settings)

    @property
    def source(self) -> Cluster:
        return self.cluster("source")

    @property
    def target(self) -> Cluster:
        return self.cluster("target")

    def offset_syncs_cluster(self) -> Cluster:
        return self.source if self.offset_syncs_topic_location == "source" else self.target

    def settings(self) -> dict[str, str]:
        return self.originals()

    def _require_bootstrap(self, *sides: str) -> None:
        for side in sides:
            extra = self.model_extra or {}
            if not str(extra.get(f"{side}.cluster.bootstrap.servers", "")).strip():
                raise ValueError(f"{side}.cluster.bootstrap.servers: missing; name the {side} cluster's brokers "
                                 f"(host:port, comma-separated)")


class _Filtered(MirrorConfig):
    topics: str = Field(".*", alias="topics", description="Comma-separated regexes of the topics to mirror.")
    topics_exclude: str = Field(DEFAULT_TOPICS_EXCLUDE, alias="topics.exclude",
                                description="Comma-separated regexes of topics never mirrored (wins over topics).")

    @model_validator(mode="after")
    def _regexes(self) -> _Filtered:
        topic_filter(self.settings())
        return self

    def topic_filter(self) -> NameFilter:
        return topic_filter(self.settings())


class MirrorSourceConfig(_Filtered):
    refresh_topics_enabled: bool = Field(True, alias="refresh.topics.enabled",
                                         description="Look for new topics and partitions on the source.")
    refresh_topics_interval_seconds: int = Field(600, alias="refresh.topics.interval.seconds", ge=1,
                                                 description="Seconds between looks for new topics and partitions.")
    sync_topic_configs_enabled: bool = Field(True, alias="sync.topic.configs.enabled",
                                             description="Copy topic configs to the target.")
    sync_topic_configs_interval_seconds: int = Field(600, alias="sync.topic.configs.interval.seconds", ge=1,
                                                     description="Seconds between topic config syncs.")
    config_properties_exclude: str = Field(CONFIG_PROPERTIES_EXCLUDE, alias="config.properties.exclude",
                                           description="Regexes of topic configs never copied.")
    replication_factor: int = Field(-1, alias="replication.factor",
                                    description="Replication factor of the topics created on the target "
                                                "(-1: the target broker's default).")
    offset_syncs_topic_replication_factor: int = Field(-1, alias="offset-syncs.topic.replication.factor",
                                                       description="Replication factor of the offset-syncs topic.")
    offset_lag_max: int = Field(100, alias="offset.lag.max", ge=0,
                                description="Accepted for MM2 configs; offset syncs here are written at every "
                                            "batch boundary, so translation is exact whatever its value.")
    emit_offset_syncs_enabled: bool = Field(True, alias="emit.offset-syncs.enabled",
                                            description="Write offset syncs (needed for checkpoints).")
    consumer_poll_timeout_ms: int = Field(1000, alias="consumer.poll.timeout.ms", ge=1,
                                          description="Longest wait for records from the source in one poll.")

    @model_validator(mode="after")
    def _clusters(self) -> MirrorSourceConfig:
        self._require_bootstrap("source", "target")
        NameFilter("config.properties.exclude", ".*", "config.properties.exclude", self.config_properties_exclude)
        try:
            isolation_level(self.source_consumer())
        except ValueError as exc:
            raise ValueError(f"source consumer's {exc} (set by source.cluster.consumer.isolation.level, "
                             f"consumer.isolation.level or source.consumer.isolation.level)") from None
        return self

    def source_consumer(self) -> dict[str, str]:
        return source_consumer_settings(self.model_extra or {})


def source_consumer_settings(props: Mapping[str, Any]) -> dict[str, str]:
    """The source consumer's settings, as MM2's sourceConsumerConfig layers them: the source cluster's
    (``source.cluster.*``, ``source.cluster.consumer.*``), then the connector's ``consumer.*``, then its
    ``source.consumer.*`` (``isolation.level=read_committed`` among them: only committed records are copied).
    ``props``: the connector's keys but the declared ones (``consumer.poll.timeout.ms`` is no client setting)."""
    extra = {k: str(v) for k, v in props.items()}
    prefix = "source.cluster."
    cluster = Cluster("", {k[len(prefix):]: v for k, v in extra.items() if k.startswith(prefix)})
    own = {k[len(p):]: v for p in ("consumer.", "source.consumer.") for k, v in extra.items() if k.startswith(p)}
    return {**cluster.client("consumer"), **own}


def reads_committed(consumer: Mapping[str, str]) -> bool:
    """Whether consumer settings read only committed records (``isolation.level=read_committed``): MM2's
    condition for exactly-once (otherwise records of aborted and open transactions would be copied)."""
    try:
        return isolation_level(consumer) == READ_COMMITTED
    except ValueError:  # the config's own validation names the bad value
        return False


class MirrorCheckpointConfig(_Filtered):
    groups: str = Field(".*", alias="groups", description="Comma-separated regexes of the consumer groups to sync.")
    groups_exclude: str = Field(DEFAULT_GROUPS_EXCLUDE, alias="groups.exclude",
                                description="Comma-separated regexes of groups never synced (wins over groups).")
    refresh_groups_enabled: bool = Field(True, alias="refresh.groups.enabled",
                                         description="Look for new consumer groups on the source.")
    refresh_groups_interval_seconds: int = Field(600, alias="refresh.groups.interval.seconds", ge=1,
                                                 description="Seconds between looks for new consumer groups.")
    emit_checkpoints_enabled: bool = Field(True, alias="emit.checkpoints.enabled",
                                           description="Write checkpoints to <source>.checkpoints.internal.")
    emit_checkpoints_interval_seconds: int = Field(60, alias="emit.checkpoints.interval.seconds", ge=1,
                                                   description="Seconds between checkpoints.")
    sync_group_offsets_enabled: bool = Field(
        True, alias="sync.group.offsets.enabled",
        description="Commit translated offsets for the target's groups that have no active member (on by "
                    "default, unlike MM2).")
    sync_group_offsets_interval_seconds: int = Field(60, alias="sync.group.offsets.interval.seconds", ge=1,
                                                     description="Seconds between group offset syncs.")
    checkpoints_topic_replication_factor: int = Field(-1, alias="checkpoints.topic.replication.factor",
                                                      description="Replication factor of the checkpoints topic.")

    @model_validator(mode="after")
    def _clusters(self) -> MirrorCheckpointConfig:
        self._require_bootstrap("source", "target")
        group_filter(self.settings())
        return self

    def group_filter(self) -> NameFilter:
        return group_filter(self.settings())


class MirrorHeartbeatConfig(MirrorConfig):
    emit_heartbeats_enabled: bool = Field(True, alias="emit.heartbeats.enabled", description="Emit heartbeats.")
    emit_heartbeats_interval_seconds: int = Field(1, alias="emit.heartbeats.interval.seconds", ge=1,
                                                  description="Seconds between heartbeats.")
    heartbeats_topic_replication_factor: int = Field(-1, alias="heartbeats.topic.replication.factor",
                                                     description="Replication factor of the heartbeats topic.")
