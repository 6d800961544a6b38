"""Broker configuration: Kafka's property names, validated by pydantic.

Properties come from a ``.properties`` file and ``--set key=value`` overrides. Field
names are Python identifiers; each field's alias is the Kafka property name, so both
``BrokerConfig(**{"log.dirs": "data"})`` and error messages speak Kafka.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from headwater.properties import ConfigError, load_properties, parse_overrides, validate_model

__all__ = ["BrokerConfig", "ConfigError", "Listener", "TopicConfig", "load_broker_config", "parse_listener",
           "parse_metrics_listener"]


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


def _split_listeners(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


class _KafkaModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class TopicConfig(_KafkaModel):
    """Per-topic overrides, as stored with the topic and served by DescribeConfigs."""

    cleanup_policy: str = Field("delete", alias="cleanup.policy")
    segment_bytes: int = Field(1 << 30, alias="segment.bytes", ge=14)
    segment_ms: int = Field(7 * 24 * 3600 * 1000, alias="segment.ms", ge=1)
    retention_ms: int = Field(7 * 24 * 3600 * 1000, alias="retention.ms", ge=-1)
    retention_bytes: int = Field(-1, alias="retention.bytes", ge=-1)
    max_message_bytes: int = Field(1048588, alias="max.message.bytes", ge=0)
    flush_messages: int = Field(2**63 - 1, alias="flush.messages", ge=1)
    flush_ms: int = Field(2**63 - 1, alias="flush.ms", ge=0)
    index_interval_bytes: int = Field(4096, alias="index.interval.bytes", ge=0)
    delete_retention_ms: int = Field(24 * 3600 * 1000, alias="delete.retention.ms", ge=0)
    min_cleanable_dirty_ratio: float = Field(0.5, alias="min.cleanable.dirty.ratio", ge=0, le=1)
    min_compaction_lag_ms: int = Field(0, alias="min.compaction.lag.ms", ge=0)
    message_timestamp_type: str = Field("CreateTime", alias="message.timestamp.type")
    compression_type: str = Field("producer", alias="compression.type")

    @field_validator("cleanup_policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        parts = sorted(p.strip() for p in v.split(",") if p.strip())
        if not parts or any(p not in ("compact", "delete") for p in parts):
            raise ValueError("must be 'delete', 'compact' or 'compact,delete'")
        return ",".join(parts)

    @field_validator("message_timestamp_type")
    @classmethod
    def _ts_type(cls, v: str) -> str:
        if v not in ("CreateTime", "LogAppendTime"):
            raise ValueError("must be CreateTime or LogAppendTime")
        return v

    @field_validator("compression_type")
    @classmethod
    def _compression(cls, v: str) -> str:
        if v not in ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"):
            raise ValueError("must be producer, uncompressed, gzip, snappy, lz4 or zstd")
        return v

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def keys(cls) -> list[str]:
        return [f.alias for f in cls.model_fields.values() if f.alias]

    def to_properties(self) -> dict[str, str]:
        return {k: _to_str(v) for k, v in self.model_dump(by_alias=True).items()}

    def with_overrides(self, overrides: dict[str, Any]) -> TopicConfig:
        return validate_model(TopicConfig, {**self.model_dump(by_alias=True), **overrides})


def _to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


# Broker property -> topic property it supplies the default for (Kafka's naming).
TOPIC_DEFAULTS_FROM_BROKER = {
    "log.cleanup.policy": "cleanup.policy",
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "message.max.bytes": "max.message.bytes",
    "flush.messages": "flush.messages",
    "flush.ms": "flush.ms",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.message.timestamp.type": "message.timestamp.type",
    "compression.type": "compression.type",
}


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
    log_cleanup_policy: str = Field("delete", alias="log.cleanup.policy")
    log_segment_bytes: int = Field(1 << 30, alias="log.segment.bytes", ge=14)
    log_roll_ms: int = Field(7 * 24 * 3600 * 1000, alias="log.roll.ms", ge=1)
    log_retention_ms: int = Field(7 * 24 * 3600 * 1000, alias="log.retention.ms", ge=-1)
    log_retention_bytes: int = Field(-1, alias="log.retention.bytes", ge=-1)
    log_retention_check_interval_ms: int = Field(300_000, alias="log.retention.check.interval.ms", ge=1)
    log_index_interval_bytes: int = Field(4096, alias="log.index.interval.bytes", ge=0)
    log_cleaner_delete_retention_ms: int = Field(
        24 * 3600 * 1000, alias="log.cleaner.delete.retention.ms", ge=0
    )
    log_cleaner_min_cleanable_ratio: float = Field(0.5, alias="log.cleaner.min.cleanable.ratio", ge=0, le=1)
    log_cleaner_backoff_ms: int = Field(15000, alias="log.cleaner.backoff.ms", ge=1)
    log_message_timestamp_type: str = Field("CreateTime", alias="log.message.timestamp.type")
    compression_type: str = Field("producer", alias="compression.type")
    message_max_bytes: int = Field(1048588, alias="message.max.bytes", ge=0)
    socket_request_max_bytes: int = Field(104857600, alias="socket.request.max.bytes", ge=1024)
    flush_messages: int = Field(2**63 - 1, alias="flush.messages", ge=1)
    flush_ms: int = Field(2**63 - 1, alias="flush.ms", ge=0)
    log_flush_scheduler_interval_ms: int = Field(1000, alias="log.flush.scheduler.interval.ms", ge=1)
    offsets_topic_num_partitions: int = Field(50, alias="offsets.topic.num.partitions", ge=1)
    group_initial_rebalance_delay_ms: int = Field(3000, alias="group.initial.rebalance.delay.ms", ge=0)
    group_min_session_timeout_ms: int = Field(6000, alias="group.min.session.timeout.ms", ge=1)
    group_max_session_timeout_ms: int = Field(1800000, alias="group.max.session.timeout.ms", ge=1)
    offset_metadata_max_bytes: int = Field(4096, alias="offset.metadata.max.bytes", ge=0)
    # Prometheus metrics over HTTP (metrics.py); None or empty: not served
    metrics_listener: str | None = Field(None, alias="metrics.listener")
    # ACLs (acls.py): enforced on every API when enabled; Kafka's authorizer.class.name switch, simplified
    authorizer_enabled: bool = Field(False, alias="authorizer.enabled")
    allow_everyone_if_no_acl_found: bool = Field(False, alias="allow.everyone.if.no.acl.found")
    super_users: str = Field("", alias="super.users")  # ';'-separated principals, e.g. User:admin;User:ops
    # Client quotas (quotas.py): the rate window, Kafka's names and defaults
    quota_window_num: int = Field(11, alias="quota.window.num", ge=1)
    quota_window_size_seconds: int = Field(1, alias="quota.window.size.seconds", ge=1)

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

    def topic_defaults(self) -> TopicConfig:
        dumped = self.model_dump(by_alias=True)
        return validate_model(
            TopicConfig, {topic_key: dumped[broker_key] for broker_key, topic_key in TOPIC_DEFAULTS_FROM_BROKER.items()}
        )


def load_broker_config(path: str | Path | None = None, overrides: list[str] | None = None) -> BrokerConfig:
    props = load_properties(path) if path else {}
    props.update(parse_overrides(overrides or []))
    return validate_model(BrokerConfig, props)
