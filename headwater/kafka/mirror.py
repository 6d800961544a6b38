"""MirrorMaker 2's internal records, byte for byte as Kafka's mirror-client writes them.

They are Kafka protocol structs (``org.apache.kafka.common.protocol.types``), not JSON: STRING is an
INT16 length and UTF-8 bytes, integers are big-endian. Checkpoint and heartbeat values start with an
INT16 version header (0); offset syncs have none.

- offset sync (``mm2-offset-syncs.<target>.internal``): key {topic, partition:INT32}, value
  {upstreamOffset:INT64, offset:INT64}
- checkpoint (``<source>.checkpoints.internal``): key {group, topic, partition:INT32}, value
  version:INT16 + {upstreamOffset:INT64, offset:INT64, metadata}
- heartbeat (``heartbeats``): key {sourceClusterAlias, targetClusterAlias}, value version:INT16 +
  {timestamp:INT64}
"""

from __future__ import annotations

from typing import NamedTuple

from .types import DecodeError, Reader, Writer

__all__ = ["Checkpoint", "Heartbeat", "OffsetSync"]

VERSION = 0


def _text(r: Reader, field: str) -> str:
    value = r.string()
    if value is None:
        raise DecodeError(f"{field} is null")
    return value


def _version(r: Reader, what: str) -> None:
    version = r.int16()
    if version < VERSION:
        raise DecodeError(f"{what} value version {version} is not supported")


class OffsetSync(NamedTuple):
    """An upstream offset and the downstream offset its record got in the target."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return Writer().string(self.topic).int32(self.partition).to_bytes()

    def value(self) -> bytes:
        return Writer().int64(self.upstream_offset).int64(self.downstream_offset).to_bytes()

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        k, v = Reader(key), Reader(value)
        topic, partition = _text(k, "topic"), k.int32()
        return cls(topic, partition, v.int64(), v.int64())  # as Kafka, bytes after the struct are ignored


class Checkpoint(NamedTuple):
    """A consumer group's committed offset of an upstream partition, translated for the target."""

    group: str
    topic: str  # the topic's name in the target (renamed by the replication policy)
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return Writer().string(self.group).string(self.topic).int32(self.partition).to_bytes()

    def value(self) -> bytes:
        return (Writer().int16(VERSION).int64(self.upstream_offset).int64(self.downstream_offset)
                .string(self.metadata).to_bytes())

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        k, v = Reader(key), Reader(value)
        group, topic, partition = _text(k, "group"), _text(k, "topic"), k.int32()
        _version(v, "checkpoint")
        return cls(group, topic, partition, v.int64(), v.int64(), _text(v, "metadata"))


class Heartbeat(NamedTuple):
    """Emitted by the flow source -> target every ``emit.heartbeats.interval.seconds``."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def key(self) -> bytes:
        return Writer().string(self.source_cluster_alias).string(self.target_cluster_alias).to_bytes()

    def value(self) -> bytes:
        return Writer().int16(VERSION).int64(self.timestamp).to_bytes()

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        k, v = Reader(key), Reader(value)
        source, target = _text(k, "sourceClusterAlias"), _text(k, "targetClusterAlias")
        _version(v, "heartbeat")
        return cls(source, target, v.int64())
