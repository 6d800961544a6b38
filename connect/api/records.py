"""Records as connectors see them: SourceRecord out of a source task, SinkRecord into a sink task."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .data import Schema

__all__ = ["ConnectRecord", "Header", "SinkRecord", "SourceRecord", "TopicPartition"]


@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class Header:
    key: str
    value: Any
    schema: Schema | None = None


@dataclass
class ConnectRecord:
    """What every record has: where it goes and what it carries."""

    topic: str
    value: Any = None
    key: Any = None
    kafka_partition: int | None = None
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    timestamp: int | None = None
    headers: list[Header] = field(default_factory=list)

    def new_record(self, **changes: Any) -> ConnectRecord:
        """A copy with some fields changed (what SMTs return); headers list is copied."""
        # A plain __dict__ copy: dataclasses.replace re-runs __init__ and costs ~10x more per record.
        unknown = changes.keys() - self.__dict__.keys()
        if unknown:
            raise TypeError(f"unknown record fields: {sorted(unknown)}")
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        if "headers" not in changes:
            copy.headers = list(self.headers)
        return copy

    def header(self, key: str) -> Header | None:
        """The last header with this key (Kafka's lastWithName)."""
        for h in reversed(self.headers):
            if h.key == key:
                return h
        return None


@dataclass
class SourceRecord(ConnectRecord):
    """A record from a source task, with the source position it came from."""

    source_partition: dict[str, Any] = field(default_factory=dict)
    source_offset: dict[str, Any] = field(default_factory=dict)


@dataclass
class SinkRecord(ConnectRecord):
    """A record consumed from Kafka for a sink task; commit by the original* position."""

    kafka_offset: int = -1
    timestamp_type: str = "CreateTime"
    original_topic: str | None = None
    original_kafka_partition: int | None = None
    original_kafka_offset: int | None = None

    def __post_init__(self) -> None:
        if self.original_topic is None:
            self.original_topic = self.topic
        if self.original_kafka_partition is None:
            self.original_kafka_partition = self.kafka_partition
        if self.original_kafka_offset is None:
            self.original_kafka_offset = self.kafka_offset
