"""Broker configuration: Kafka's property names, validated by pydantic.

Properties come from a ``.properties`` file and ``--set key=value`` overrides. Field
names are Python identifiers; each field's alias is the Kafka property name, so both
``BrokerConfig(**{"log.dirs": "data"})`` and error messages speak Kafka.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from headwater.properties import ConfigError, load_properties, parse_overrides, validate_model

from ..cluster.zk_connect import parse_zookeeper_connect
from ..errors import BrokerError, InvalidConfig
from ..replication.replica_selector import check_selector_class
from ..security.listeners import DEFAULT_PROTOCOL_MAP, ListenerSecurity, check_keys, is_security_key, parse_protocol_map
from ..security.settings import BadSetting, ListenerSettings
from .topic_configs import (
    LONG_MAX,
    TOPIC_CONFIGS,
    check_names,
    parse_and_validate,
    to_kafka_string,
    validate_topic_values,
)

__all__ = ["BrokerConfig", "ConfigError", "Listener", "TopicConfig", "is_password_setting", "load_broker_config",
           "parse_ip_overrides", "parse_listener", "parse_metrics_listener"]

# Kafka's PASSWORD-typed security settings (ssl.*.password, the PEM key and certificates given inline, a JAAS
# entry with its passwords, OAuth client secrets), whatever listener or mechanism prefix they carry: never answered
_PASSWORD_SETTINGS = (".password", "sasl.jaas.config", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                      "ssl.truststore.certificates", "secret")


def is_password_setting(name: str) -> bool:
    """Whether ``name`` (e.g. ``listener.name.sasl_ssl.plain.sasl.jaas.config``) holds a secret."""
    return name == "password" or name.endswith(_PASSWORD_SETTINGS)


class Listener(BaseModel):
    name: str
    host: str
    port: int


def parse_listener(value: str) -> Listener:
    """``PLAINTEXT://host:port`` -> Listener. An empty host means all interfaces."""
    if "://" not in value:
        raise ValueError(f"expected NAME://host:port, got {value!r}")
    name, rest = value.split("://", 1)
    parts = urlsplit("//" + rest)
    if parts.port is None:
        raise ValueError(f"missing port in {value!r}")
    return Listener(name=name.upper(), host=parts.hostname or "", port=parts.port)


def parse_metrics_listener(value: str) -> tuple[str, int]:
    """``http://host:port`` (``metrics.listener``) -> (host, port); an empty host means all interfaces,
    port 0 any free port. Metrics are always at ``/metrics``, so a path may only be that."""
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        raise ValueError("the port must be a number from 0 to 65535") from None
    if parts.scheme != "http" or port is None or parts.path not in ("", "/", "/metrics") \
            or parts.query or parts.fragment or parts.username is not None:
        raise ValueError("expected http://HOST:PORT, e.g. http://127.0.0.1:9404 (empty: no metrics)")
    return parts.hostname or "", port


def parse_ip_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:100,127.0.0.1:200`` -> {host: limit}."""
    out = {}
    for item in _split_listeners(value):
        host, sep, limit = item.rpartition(":")
        if not sep or not host or not limit.isdigit():
            raise ValueError(f"expected host:limit entries separated by commas, e.g. 127.0.0.1:200; got {item!r}")
        out[host.strip()] = int(limit)
    return out


def _split_listeners(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


class _KafkaModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


def _topic_field(name: str) -> Any:
    """A TopicConfig field: Kafka's name as the alias, Kafka's default (topic_configs.py is the one table)."""
    return Field(TOPIC_CONFIGS[name].default_value, alias=name)


class TopicConfig(_KafkaModel):
    """A topic's effective configs, every key of Kafka's LogConfig (the table and the validation that
    speaks Kafka's error texts are in topic_configs.py; ``Cluster.topic_config`` builds this from overrides).
    LIST values are held as their comma-joined text."""

    segment_bytes: int = _topic_field("segment.bytes")
    segment_ms: int = _topic_field("segment.ms")
    segment_jitter_ms: int = _topic_field("segment.jitter.ms")
    segment_index_bytes: int = _topic_field("segment.index.bytes")
    flush_messages: int = _topic_field("flush.messages")
    flush_ms: int = _topic_field("flush.ms")
    retention_bytes: int = _topic_field("retention.bytes")
    retention_ms: int = _topic_field("retention.ms")
    max_message_bytes: int = _topic_field("max.message.bytes")
    index_interval_bytes: int = _topic_field("index.interval.bytes")
    delete_retention_ms: int = _topic_field("delete.retention.ms")
    min_compaction_lag_ms: int = _topic_field("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _topic_field("max.compaction.lag.ms")
    file_delete_delay_ms: int = _topic_field("file.delete.delay.ms")
    min_cleanable_dirty_ratio: float = _topic_field("min.cleanable.dirty.ratio")
    cleanup_policy: str = _topic_field("cleanup.policy")
    unclean_leader_election_enable: bool = _topic_field("unclean.leader.election.enable")
    min_insync_replicas: int = _topic_field("min.insync.replicas")
    compression_type: str = _topic_field("compression.type")
    compression_gzip_level: int = _topic_field("compression.gzip.level")
    compression_lz4_level: int = _topic_field("compression.lz4.level")
    compression_zstd_level: int = _topic_field("compression.zstd.level")
    preallocate: bool = _topic_field("preallocate")
    message_format_version: str = _topic_field("message.format.version")
    message_timestamp_type: str = _topic_field("message.timestamp.type")
    message_timestamp_difference_max_ms: int = _topic_field("message.timestamp.difference.max.ms")
    message_timestamp_before_max_ms: int = _topic_field("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _topic_field("message.timestamp.after.max.ms")
    leader_replication_throttled_replicas: str = _topic_field("leader.replication.throttled.replicas")
    follower_replication_throttled_replicas: str = _topic_field("follower.replication.throttled.replicas")
    message_downconversion_enable: bool = _topic_field("message.downconversion.enable")
    remote_storage_enable: bool = _topic_field("remote.storage.enable")
    local_retention_ms: int = _topic_field("local.retention.ms")
    local_retention_bytes: int = _topic_field("local.retention.bytes")
    remote_log_copy_disable: bool = _topic_field("remote.log.copy.disable")
    remote_log_delete_on_disable: bool = _topic_field("remote.log.delete.on.disable")

    @field_validator("cleanup_policy", "leader_replication_throttled_replicas",
                     "follower_replication_throttled_replicas", mode="before")
    @classmethod
    def _list_text(cls, v: Any) -> Any:
        return ",".join(v) if isinstance(v, list) else v

    # Cached: produce asks on every request (the model is frozen, so they never go stale).
    @cached_property
    def policies(self) -> list[str]:
        return [p.strip().lower() for p in self.cleanup_policy.split(",") if p.strip()]

    @cached_property
    def compact(self) -> bool:
        return "compact" in self.policies

    @cached_property
    def delete(self) -> bool:
        return "delete" in self.policies

    @cached_property
    def checks_records(self) -> bool:
        """Whether produced records must be read to be checked (log/validator.py): null keys on a
        compacted topic, or CreateTime bounds that are not Long.MAX."""
        return self.compact or (self.message_timestamp_type == "CreateTime" and (
            self.timestamp_before_max_ms != LONG_MAX or self.timestamp_after_max_ms != LONG_MAX))

    @property
    def timestamp_before_max_ms(self) -> int:
        """Kafka 3.x: before.max.ms, or the deprecated difference.max.ms while before is unset (Long.MAX)."""
        before = self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms if before == LONG_MAX else before

    @property
    def timestamp_after_max_ms(self) -> int:
        after = self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms if after == LONG_MAX else after

    @property
    def max_segment_ms(self) -> int:
        """Kafka's LogConfig.maxSegmentMs: a compacted topic rolls by max.compaction.lag.ms too, so that
        its records become cleanable in time."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @classmethod
    def keys(cls) -> list[str]:
        return [f.alias for f in cls.model_fields.values() if f.alias]

    def value(self, key: str) -> Any:
        """The value of Kafka property ``key``."""
        return getattr(self, _TOPIC_ATTRS[key])

    def to_properties(self) -> dict[str, str]:
        return {key: to_kafka_string(TOPIC_CONFIGS[key], self.value(key)) for key in TOPIC_CONFIGS}

    def with_overrides(self, overrides: dict[str, str]) -> TopicConfig:
        """These configs with Kafka-named ``overrides`` (text, as clients send them) applied, each
        parsed and validated as Kafka does, then the checks across keys; BrokerError(INVALID_CONFIG)
        carries Kafka's message."""
        check_names(overrides)
        parsed = {_TOPIC_ATTRS[k]: parse_and_validate(k, v) for k, v in overrides.items()}
        config = self.model_validate({**self.model_dump(), **parsed})
        validate_topic_values({key: config.value(key) for key in TOPIC_CONFIGS})
        return config


_TOPIC_ATTRS = {f.alias: attr for attr, f in TopicConfig.model_fields.items() if f.alias}


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


# The broker's flush scheduler period (1 s here, Long.MAX in Kafka) supplies flush.ms only when set.
_DEFAULT_NOT_A_TOPIC_DEFAULT = {"log.flush.scheduler.interval.ms"}
# Broker keys of earlier releases, kept as the last fallback for the topic default of the same name.
_LEGACY_TOPIC_DEFAULTS = {"flush.messages", "flush.ms"}


class BrokerConfig(_KafkaModel):
    listeners: str = Field("PLAINTEXT://127.0.0.1:9092", alias="listeners")
    advertised_listeners: str | None = Field(None, alias="advertised.listeners")
    node_id: int = Field(1, alias="node.id", ge=0)
    cluster_id: str = Field("headwater-cluster", alias="cluster.id", min_length=1)
    log_dirs: str = Field("data/broker", alias="log.dirs", min_length=1)
    num_partitions: int = Field(1, alias="num.partitions", ge=1)
    default_replication_factor: int = Field(1, alias="default.replication.factor", ge=1)
    auto_create_topics_enable: bool = Field(True, alias="auto.create.topics.enable")
    delete_topic_enable: bool = Field(True, alias="delete.topic.enable")
    # Broker defaults of the topic configs: Kafka's names and defaults (topic_configs.py lists which broker
    # properties supply which topic config, in Kafka's priority order; None: unset, the next one applies)
    log_cleanup_policy: str = Field("delete", alias="log.cleanup.policy")
    log_segment_bytes: int = Field(1 << 30, alias="log.segment.bytes", ge=14)
    log_roll_ms: int | None = Field(None, alias="log.roll.ms")
    log_roll_hours: int = Field(168, alias="log.roll.hours", ge=1)
    log_roll_jitter_ms: int | None = Field(None, alias="log.roll.jitter.ms")
    log_roll_jitter_hours: int = Field(0, alias="log.roll.jitter.hours", ge=0)
    log_retention_ms: int | None = Field(None, alias="log.retention.ms")
    log_retention_minutes: int | None = Field(None, alias="log.retention.minutes")
    log_retention_hours: int = Field(168, alias="log.retention.hours")
    log_retention_bytes: int = Field(-1, alias="log.retention.bytes")
    log_retention_check_interval_ms: int = Field(300_000, alias="log.retention.check.interval.ms", ge=1)
    log_index_interval_bytes: int = Field(4096, alias="log.index.interval.bytes", ge=0)
    log_index_size_max_bytes: int = Field(10485760, alias="log.index.size.max.bytes", ge=4)
    log_segment_delete_delay_ms: int = Field(60000, alias="log.segment.delete.delay.ms", ge=0)
    log_cleaner_delete_retention_ms: int = Field(
        24 * 3600 * 1000, alias="log.cleaner.delete.retention.ms", ge=0
    )
    log_cleaner_min_cleanable_ratio: float = Field(0.5, alias="log.cleaner.min.cleanable.ratio", ge=0, le=1)
    log_cleaner_min_compaction_lag_ms: int = Field(0, alias="log.cleaner.min.compaction.lag.ms", ge=0)
    log_cleaner_max_compaction_lag_ms: int = Field(LONG_MAX, alias="log.cleaner.max.compaction.lag.ms", ge=1)
    log_cleaner_backoff_ms: int = Field(15000, alias="log.cleaner.backoff.ms", ge=1)
    log_message_timestamp_type: str = Field("CreateTime", alias="log.message.timestamp.type")
    log_message_timestamp_difference_max_ms: int = Field(
        LONG_MAX, alias="log.message.timestamp.difference.max.ms", ge=0)
    log_message_timestamp_before_max_ms: int = Field(LONG_MAX, alias="log.message.timestamp.before.max.ms", ge=0)
    log_message_timestamp_after_max_ms: int = Field(LONG_MAX, alias="log.message.timestamp.after.max.ms", ge=0)
    log_message_format_version: str = Field("3.0-IV1", alias="log.message.format.version")
    log_message_downconversion_enable: bool = Field(True, alias="log.message.downconversion.enable")
    log_preallocate: bool = Field(False, alias="log.preallocate")
    log_local_retention_ms: int = Field(-2, alias="log.local.retention.ms", ge=-2)
    log_local_retention_bytes: int = Field(-2, alias="log.local.retention.bytes", ge=-2)
    min_insync_replicas: int = Field(1, alias="min.insync.replicas", ge=1)
    unclean_leader_election_enable: bool = Field(False, alias="unclean.leader.election.enable")
    compression_type: str = Field("producer", alias="compression.type")
    compression_gzip_level: int = Field(-1, alias="compression.gzip.level")
    compression_lz4_level: int = Field(9, alias="compression.lz4.level")
    compression_zstd_level: int = Field(3, alias="compression.zstd.level")
    message_max_bytes: int = Field(1048588, alias="message.max.bytes", ge=0)
    socket_request_max_bytes: int = Field(104857600, alias="socket.request.max.bytes", ge=1024)
    log_flush_interval_messages: int = Field(LONG_MAX, alias="log.flush.interval.messages", ge=1)
    log_flush_interval_ms: int | None = Field(None, alias="log.flush.interval.ms")
    log_flush_scheduler_interval_ms: int = Field(1000, alias="log.flush.scheduler.interval.ms", ge=1)
    # Earlier releases' names for the two above; still read, after them
    flush_messages: int | None = Field(None, alias="flush.messages", ge=1)
    flush_ms: int | None = Field(None, alias="flush.ms", ge=0)
    offsets_topic_num_partitions: int = Field(50, alias="offsets.topic.num.partitions", ge=1)
    # a ZooKeeper cluster's __consumer_offsets (one node: always 1 replica, this broker)
    offsets_topic_replication_factor: int = Field(3, alias="offsets.topic.replication.factor", ge=1)
    # how long a cluster's OffsetCommit waits for the ISR to have the commit
    offsets_commit_timeout_ms: int = Field(5000, alias="offsets.commit.timeout.ms", ge=1)
    group_initial_rebalance_delay_ms: int = Field(3000, alias="group.initial.rebalance.delay.ms", ge=0)
    group_min_session_timeout_ms: int = Field(6000, alias="group.min.session.timeout.ms", ge=1)
    group_max_session_timeout_ms: int = Field(1800000, alias="group.max.session.timeout.ms", ge=1)
    offset_metadata_max_bytes: int = Field(4096, alias="offset.metadata.max.bytes", ge=0)
    # The transaction coordinator (txn/): Kafka's names and defaults
    transaction_state_log_num_partitions: int = Field(50, alias="transaction.state.log.num.partitions", ge=1)
    transaction_state_log_segment_bytes: int = Field(104857600, alias="transaction.state.log.segment.bytes", ge=14)
    transaction_max_timeout_ms: int = Field(900000, alias="transaction.max.timeout.ms", ge=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = Field(
        10000, alias="transaction.abort.timed.out.transaction.cleanup.interval.ms", ge=1)
    transactional_id_expiration_ms: int = Field(604800000, alias="transactional.id.expiration.ms", ge=1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = Field(
        3600000, alias="transaction.remove.expired.transaction.cleanup.interval.ms", ge=1)
    # Prometheus metrics over HTTP (metrics/prometheus.py); None or empty: not served
    metrics_listener: str | None = Field(None, alias="metrics.listener")
    # ACLs (access/acls.py): enforced on every API when enabled; Kafka's authorizer.class.name switch, simplified
    authorizer_enabled: bool = Field(False, alias="authorizer.enabled")
    allow_everyone_if_no_acl_found: bool = Field(False, alias="allow.everyone.if.no.acl.found")
    super_users: str = Field("", alias="super.users")  # ';'-separated principals, e.g. User:admin;User:ops
    # Client quotas (access/quotas.py): the rate window, Kafka's names and defaults
    quota_window_num: int = Field(11, alias="quota.window.num", ge=1)
    quota_window_size_seconds: int = Field(1, alias="quota.window.size.seconds", ge=1)
    # Limits no client can break (server/connection_limits.py, apis/k01_fetch.py): Kafka's names and defaults
    fetch_max_bytes: int = Field(57671680, alias="fetch.max.bytes", ge=1024)
    max_connections: int = Field(2**31 - 1, alias="max.connections", ge=0)
    max_connections_per_ip: int = Field(2**31 - 1, alias="max.connections.per.ip", ge=0)
    max_connections_per_ip_overrides: str = Field("", alias="max.connections.per.ip.overrides")
    connections_max_idle_ms: int = Field(600000, alias="connections.max.idle.ms", ge=1)
    # Scale on one machine (log/fd_cache.py, topics/cluster.py): segment files open at once (-1: derived from the
    # open-files limit, leaving room for sockets) and partitions this broker holds in all (KIP-578's name)
    log_open_files_max: int = Field(-1, alias="log.open.files.max", ge=-1)
    max_broker_partitions: int = Field(2**31 - 1, alias="max.broker.partitions", ge=1)

    # Cluster membership on ZooKeeper (broker/cluster/); without zookeeper.connect the broker is a single node.
    # broker.id is node.id under Kafka's ZooKeeper-mode name; a ZooKeeper cluster needs one of them set explicitly.
    zookeeper_connect: str | None = Field(None, alias="zookeeper.connect")
    broker_id: int | None = Field(None, alias="broker.id", ge=0)
    broker_rack: str | None = Field(None, alias="broker.rack")
    zookeeper_session_timeout_ms: int = Field(18000, alias="zookeeper.session.timeout.ms", ge=1)
    zookeeper_connection_timeout_ms: int | None = Field(None, alias="zookeeper.connection.timeout.ms", ge=1)
    # The controller's topics (broker/cluster/controller.py): the preferred replica leads again as soon as it is
    # live and in the ISR (at once, not on Kafka's leader.imbalance.check.interval.seconds schedule).
    auto_leader_rebalance_enable: bool = Field(True, alias="auto.leader.rebalance.enable")
    # Replication between the brokers of a ZooKeeper cluster (broker/replication/): Kafka's names and defaults
    replica_lag_time_max_ms: int = Field(30000, alias="replica.lag.time.max.ms", ge=1)
    replica_fetch_wait_max_ms: int = Field(500, alias="replica.fetch.wait.max.ms", ge=0)
    replica_fetch_min_bytes: int = Field(1, alias="replica.fetch.min.bytes", ge=1)
    replica_fetch_max_bytes: int = Field(1048576, alias="replica.fetch.max.bytes", ge=0)
    replica_fetch_response_max_bytes: int = Field(10485760, alias="replica.fetch.response.max.bytes", ge=0)
    replica_fetch_backoff_ms: int = Field(1000, alias="replica.fetch.backoff.ms", ge=0)
    replica_socket_timeout_ms: int = Field(30000, alias="replica.socket.timeout.ms", ge=1)
    replica_high_watermark_checkpoint_interval_ms: int = Field(
        5000, alias="replica.high.watermark.checkpoint.interval.ms", ge=1)
    # Transaction coordinators in a ZooKeeper cluster (txn/): the replicated __transaction_state, Kafka's names and
    # defaults (request.timeout.ms, below, bounds a coordinator's wait for the ISR to have each of its state writes)
    transaction_state_log_replication_factor: int = Field(3, alias="transaction.state.log.replication.factor", ge=1)
    transaction_state_log_min_isr: int = Field(2, alias="transaction.state.log.min.isr", ge=1)
    # transaction markers (docs/CLUSTER.md "Transactions"): how long WriteTxnMarkers waits for the ISR to have a
    # marker, and how long a cluster's marker sender retries a partition's marker before the coordinator's next try
    request_timeout_ms: int = Field(30000, alias="request.timeout.ms", ge=1)
    # Controlled shutdown in a ZooKeeper cluster (broker/cluster/controlled_shutdown.py): before a clean stop the
    # broker asks the controller to move its leaderships away, as many times as max.retries says, backoff apart;
    # Kafka's names and defaults. controller.socket.timeout.ms bounds connecting to the controller.
    controlled_shutdown_enable: bool = Field(True, alias="controlled.shutdown.enable")
    controlled_shutdown_max_retries: int = Field(3, alias="controlled.shutdown.max.retries", ge=0)
    controlled_shutdown_retry_backoff_ms: int = Field(5000, alias="controlled.shutdown.retry.backoff.ms", ge=0)
    controller_socket_timeout_ms: int = Field(30000, alias="controller.socket.timeout.ms", ge=1)

    @model_validator(mode="before")
    @classmethod
    def _broker_id_is_node_id(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        broker_id = values.get("broker.id", values.get("broker_id"))
        node_id = values.get("node.id", values.get("node_id"))
        if broker_id is None or str(broker_id).strip() == "":
            return values
        if node_id is not None and str(node_id).strip() != str(broker_id).strip():
            raise ValueError(f"broker.id ({broker_id}) and node.id ({node_id}) differ; set one of them")
        return {**values, "node.id": broker_id} if "node_id" not in values else values

    @field_validator("zookeeper_connect")
    @classmethod
    def _zookeeper_connect(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        try:
            parse_zookeeper_connect(v.strip())
        except ValueError as exc:
            raise ValueError(f"zookeeper.connect: {exc}") from None
        return v.strip()

    @model_validator(mode="after")
    def _cluster_needs_an_id(self) -> BrokerConfig:
        if self.zookeeper_connect and "node_id" not in self.model_fields_set:
            raise ValueError("broker.id: a broker with zookeeper.connect needs its broker.id set (unique in the "
                             "cluster); generated ids are not supported")
        return self

    @property
    def zookeeper_connection_timeout(self) -> float:
        """Seconds to wait for the first ZooKeeper connection (Kafka: the session timeout when unset)."""
        return (self.zookeeper_connection_timeout_ms or self.zookeeper_session_timeout_ms) / 1000

    @field_validator("log_open_files_max")
    @classmethod
    def _open_files_max(cls, v: int) -> int:
        if 0 <= v < 3:
            raise ValueError("must be -1 (derived from the open-files limit) or at least 3 (one segment's files)")
        return v

    @field_validator("max_connections_per_ip_overrides")
    @classmethod
    def _per_ip_overrides(cls, v: str) -> str:
        parse_ip_overrides(v)
        return v

    # Listener security (security/listeners.py): Kafka's names; ssl.*, sasl.* and listener.name.<l>.* keys are
    # gathered into security_properties (they name listeners and mechanisms, so they cannot all be fields)
    listener_security_protocol_map: str = Field(DEFAULT_PROTOCOL_MAP, alias="listener.security.protocol.map")
    inter_broker_listener_name: str | None = Field(None, alias="inter.broker.listener.name")
    security_inter_broker_protocol: str | None = Field(None, alias="security.inter.broker.protocol")
    connections_max_reauth_ms: int = Field(0, alias="connections.max.reauth.ms", ge=0)
    connection_failed_authentication_delay_ms: int = Field(100, alias="connection.failed.authentication.delay.ms",
                                                           ge=0)
    security_properties: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold passwords

    # Followers and group loading (replication/fetcher.py, group/loading.py): Kafka's names and defaults
    # the bytes a coordinator reads of __consumer_offsets at a time while it loads a partition's groups
    offsets_load_buffer_size: int = Field(5242880, alias="offsets.load.buffer.size", ge=1)
    # the followers' fetch sessions (KIP-227) a leader keeps; 0: none, every follower Fetch is a full one
    max_incremental_fetch_session_cache_slots: int = Field(1000, alias="max.incremental.fetch.session.cache.slots",
                                                           ge=0)

    # Fetching from the closest replica (KIP-392, replication/replica_selector.py): the leader's choice of replica
    # for a consumer's Fetch v11+; unset: every consumer reads from leaders
    replica_selector_class: str | None = Field(None, alias="replica.selector.class")

    @field_validator("replica_selector_class")
    @classmethod
    def _replica_selector_class(cls, v: str | None) -> str | None:
        return check_selector_class(v)

    # The ZooKeeper connection's security (cluster/zk_security.py): Kafka's zookeeper.ssl.* names and defaults
    # (store types unset: from the file's extension, as ZooKeeper's), its secure ACLs, and SASL from a JAAS
    # file's Client section (Kafka reads the last three as JVM system properties; here they are properties)
    zookeeper_set_acl: bool = Field(False, alias="zookeeper.set.acl")
    zookeeper_ssl_client_enable: bool = Field(False, alias="zookeeper.ssl.client.enable")
    zookeeper_client_cnxn_socket: str | None = Field(None, alias="zookeeper.clientCnxnSocket")  # Java's; no effect
    zookeeper_ssl_keystore_location: str | None = Field(None, alias="zookeeper.ssl.keystore.location")
    zookeeper_ssl_keystore_password: SecretStr | None = Field(None, alias="zookeeper.ssl.keystore.password")
    zookeeper_ssl_keystore_type: str | None = Field(None, alias="zookeeper.ssl.keystore.type")
    zookeeper_ssl_truststore_location: str | None = Field(None, alias="zookeeper.ssl.truststore.location")
    zookeeper_ssl_truststore_password: SecretStr | None = Field(None, alias="zookeeper.ssl.truststore.password")
    zookeeper_ssl_truststore_type: str | None = Field(None, alias="zookeeper.ssl.truststore.type")
    zookeeper_ssl_protocol: str = Field("TLSv1.2", alias="zookeeper.ssl.protocol")
    zookeeper_ssl_enabled_protocols: str | None = Field(None, alias="zookeeper.ssl.enabled.protocols")
    zookeeper_ssl_cipher_suites: str | None = Field(None, alias="zookeeper.ssl.cipher.suites")
    zookeeper_ssl_endpoint_identification_algorithm: str = Field(
        "HTTPS", alias="zookeeper.ssl.endpoint.identification.algorithm")
    zookeeper_ssl_crl_enable: bool = Field(False, alias="zookeeper.ssl.crl.enable")
    zookeeper_ssl_ocsp_enable: bool = Field(False, alias="zookeeper.ssl.ocsp.enable")
    java_security_auth_login_config: str | None = Field(None, alias="java.security.auth.login.config")
    zookeeper_sasl_client: bool = Field(True, alias="zookeeper.sasl.client")
    zookeeper_sasl_clientconfig: str = Field("Client", alias="zookeeper.sasl.clientconfig")

    @model_validator(mode="before")
    @classmethod
    def _gather_security_properties(cls, values: Any) -> Any:
        if not isinstance(values, dict) or not any(isinstance(k, str) and is_security_key(k) for k in values):
            return values
        gathered = dict(values.get("security_properties") or {})
        rest = {}
        for key, value in values.items():
            if isinstance(key, str) and is_security_key(key):
                gathered[key] = str(value)
            else:
                rest[key] = value
        return {**rest, "security_properties": gathered}

    @field_validator("listeners", "advertised_listeners")
    @classmethod
    def _listeners(cls, v: str | None) -> str | None:
        if v is None:
            return v
        items = _split_listeners(v)
        if not items:
            raise ValueError("at least one listener is required, e.g. PLAINTEXT://127.0.0.1:9092")
        for item in items:
            parse_listener(item)
        return v

    @field_validator("listener_security_protocol_map")
    @classmethod
    def _protocol_map(cls, v: str) -> str:
        parse_protocol_map(v)
        return v

    @model_validator(mode="after")
    def _check_listeners(self) -> BrokerConfig:
        protocols = parse_protocol_map(self.listener_security_protocol_map)
        names: list[str] = []
        for listener in self.listener_list():
            if listener.name in names:
                raise ValueError(f"listeners: listener name {listener.name} appears twice")
            if listener.name not in protocols:
                raise ValueError(f"listeners: listener name {listener.name} has no security protocol in "
                                 f"listener.security.protocol.map ({self.listener_security_protocol_map})")
            names.append(listener.name)
        if self.advertised_listeners:
            for listener in self.advertised_listener_list():
                if listener.name not in names:
                    raise ValueError(f"advertised.listeners: {listener.name} is not a listener name in listeners "
                                     f"({', '.join(names)})")
                if listener.host in ("", "0.0.0.0", "::"):
                    raise ValueError(f"advertised.listeners: {listener.name} needs a host clients can reach, "
                                     f"not {listener.host or 'an empty one'}")
        if self.inter_broker_listener_name is not None:
            if self.security_inter_broker_protocol is not None:
                raise ValueError("inter.broker.listener.name and security.inter.broker.protocol: set only one")
            if self.inter_broker_listener_name.upper() not in names:
                raise ValueError(f"inter.broker.listener.name: {self.inter_broker_listener_name} is not a listener "
                                 f"name in listeners ({', '.join(names)})")
        elif self.security_inter_broker_protocol is not None:
            protocol = self.security_inter_broker_protocol.upper()
            if not any(protocols[n] == protocol for n in names):
                raise ValueError(f"security.inter.broker.protocol: no listener has protocol {protocol}")
        try:
            self.listener_security(check_only=True)
        except BadSetting as exc:
            raise ValueError(str(exc)) from None
        return self

    def security_protocol(self, listener: str) -> str:
        return parse_protocol_map(self.listener_security_protocol_map)[listener]

    def listener_settings(self) -> dict[str, ListenerSettings]:
        return check_keys(self.security_properties, [listener.name for listener in self.listener_list()])

    def listener_security(self, services: Any = None, check_only: bool = False) -> dict[str, ListenerSecurity]:
        """Each listener's security by name; with ``check_only`` nothing is read from disk. BadSetting naming
        the key when a setting cannot be used."""
        protocols = parse_protocol_map(self.listener_security_protocol_map)
        out = {}
        for name, settings in self.listener_settings().items():
            if check_only:
                out[name] = ListenerSecurity.check(name, protocols[name], settings, self.connections_max_reauth_ms)
            else:
                out[name] = ListenerSecurity.build(name, protocols[name], settings, self.connections_max_reauth_ms,
                                                   services)
        return out

    @field_validator("metrics_listener")
    @classmethod
    def _metrics_listener(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        parse_metrics_listener(v.strip())
        return v.strip()

    def listener_list(self) -> list[Listener]:
        return [parse_listener(item) for item in _split_listeners(self.listeners)]

    def advertised_listener_list(self) -> list[Listener]:
        if self.advertised_listeners:
            return [parse_listener(item) for item in _split_listeners(self.advertised_listeners)]
        return self.listener_list()

    @property
    def log_dir(self) -> Path:
        # Kafka accepts a comma-separated list; one directory is all a single node needs.
        return Path(self.log_dirs.split(",")[0].strip())

    @model_validator(mode="after")
    def _check_topic_defaults(self) -> BrokerConfig:
        self.topic_defaults()  # a bad topic default fails at load, naming the broker property
        return self

    def property_value(self, name: str) -> tuple[Any, bool] | None:
        """``(value, set explicitly)`` of broker property ``name``, or None if this broker has no such
        property or it is unset."""
        attr = _BROKER_ATTRS.get(name)
        if attr is None:
            return None
        value = getattr(self, attr)
        explicit = attr in self.model_fields_set
        if value is None or (name in _DEFAULT_NOT_A_TOPIC_DEFAULT and not explicit):
            return None
        return value, explicit

    def topic_defaults(self) -> TopicConfig:
        """Every topic config's default on this broker: the first of its broker synonyms that is set
        (units converted), else Kafka's default; validated as a topic override would be."""
        overrides: dict[str, str] = {}
        sources: dict[str, str] = {}
        for key, definition in TOPIC_CONFIGS.items():
            candidates = [(syn.name, syn.factor) for syn in definition.synonyms]
            if key in _LEGACY_TOPIC_DEFAULTS:  # after the explicit Kafka names, before their defaults
                candidates.insert(sum(1 for n, _ in candidates if self._explicit(n)), (key, 1))
            for name, factor in candidates:
                found = self.property_value(name)
                if found is not None:
                    overrides[key], sources[key] = _text(found[0] * factor if factor != 1 else found[0]), name
                    break
        try:
            return TopicConfig().with_overrides(overrides)
        except BrokerError as exc:
            named = next((sources[k] for k in overrides if k in exc.message), "")
            raise ConfigError(f"{named}: {exc.message}" if named else exc.message) from None

    @classmethod
    def property_default(cls, name: str) -> Any:
        """The built-in default of broker property ``name`` as a topic default (None: it has none)."""
        attr = _BROKER_ATTRS.get(name)
        if attr is None or name in _DEFAULT_NOT_A_TOPIC_DEFAULT:
            return None
        return cls.model_fields[attr].default

    def _explicit(self, name: str) -> bool:
        return _BROKER_ATTRS.get(name, "") in self.model_fields_set

    @classmethod
    def property_names(cls) -> set[str]:
        return set(_BROKER_ATTRS)

    def with_dynamic(self, values: dict[str, str]) -> BrokerConfig:
        """These properties with dynamic broker configs (Kafka-named text) over them, validated as a
        properties file is; BrokerError(INVALID_CONFIG) naming the property when one does not fit."""
        if not values:
            return self
        try:
            config = validate_model(BrokerConfig, {**self.model_dump(by_alias=True, exclude_unset=True), **values})
        except ConfigError as exc:
            raise InvalidConfig(str(exc)) from None
        return config


_BROKER_ATTRS = {f.alias: attr for attr, f in BrokerConfig.model_fields.items() if f.alias}
_BROKER_FIELDS = {attr: alias for alias, attr in _BROKER_ATTRS.items()}


def load_broker_config(path: str | Path | None = None, overrides: list[str] | None = None) -> BrokerConfig:
    props = load_properties(path) if path else {}
    props.update(parse_overrides(overrides or []))
    return validate_model(BrokerConfig, props)
