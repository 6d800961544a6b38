"""Per-record checks of a produced batch, as Kafka's LogValidator makes them (KIP-467).

Records are read only when a check needs them: the topic is compacted (null keys), its CreateTime
bounds (``message.timestamp.before/after.max.ms``) are finite, or the producer set LogAppendTime on
the batch. Ordinary topics never get here, so the produce hot path stays header-only. Every record
is checked, key first then timestamp, and any error rejects the whole batch.

Where the broker expands a compressed batch (here, the group store's loading, the cleaner), it expands it
to at most ``decompressed_limit`` bytes: ``DECOMPRESSED_BATCH_FACTOR`` times the topic's
``max.message.bytes`` (64 MiB at Kafka's default 1 MiB), well above what real batches reach (a producer's
batch is at most max.message.bytes compressed, and text rarely compresses beyond 10:1) and far below what a
crafted one can (1 MB of zstd holds terabytes of zeros). Kafka streams records without such a cap; a
batch past it is MESSAGE_TOO_LARGE, found without expanding it further.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import ATTR_LOG_APPEND_TIME, BatchHeader, RecordSummary, record_summaries

if TYPE_CHECKING:
    from ..config.broker_config import TopicConfig

__all__ = ["DECOMPRESSED_BATCH_FACTOR", "RecordErrors", "decompressed_limit", "needs_record_checks",
           "validate_records"]

DECOMPRESSED_BATCH_FACTOR = 64


def decompressed_limit(max_message_bytes: int) -> int:
    """How far the broker expands a batch of a topic with this ``max.message.bytes``."""
    return DECOMPRESSED_BATCH_FACTOR * max_message_bytes


def _long(v: int) -> int:
    """Java long arithmetic: wrap to 64 bits (Kafka's message prints ``now - Long.MAX`` that way)."""
    return (v + 2**63) % 2**64 - 2**63


@dataclass
class RecordErrors:
    """A rejected batch: the error code, Kafka's summary text and each bad record's index and message."""

    code: int
    message: str
    errors: list[tuple[int, str]]


def needs_record_checks(config: TopicConfig, header: BatchHeader) -> bool:
    return config.checks_records or bool(header.attributes & ATTR_LOG_APPEND_TIME)


def _record_text(r: RecordSummary) -> str:
    # DefaultRecord.toString
    return (f"DefaultRecord(offset={r.offset}, timestamp={r.timestamp}, key={max(r.key_size, 0)} bytes, "
            f"value={max(r.value_size, 0)} bytes)")


def validate_records(batch: bytes | bytearray | memoryview, header: BatchHeader, config: TopicConfig,
                     partition: str, now_ms: int) -> RecordErrors | None:
    """None if every record passes; otherwise what Kafka answers. ``partition`` prints as ``topic-N``."""
    compact = config.compact
    create_time = config.message_timestamp_type == "CreateTime"
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    log_append_batch = bool(header.attributes & ATTR_LOG_APPEND_TIME)
    errors: list[tuple[int, str, int]] = []
    records = record_summaries(batch, header, decompressed_limit(config.max_message_bytes))
    for index, record in enumerate(records):
        if compact and record.key_size < 0:
            errors.append((index, "Compacted topic cannot accept message without key in topic partition "
                                  f"{partition}", ErrorCode.INVALID_RECORD))
        elif create_time and record.timestamp != -1:
            diff = now_ms - record.timestamp
            if diff > before or -diff > after:
                errors.append((index, f"Timestamp {record.timestamp} of message with offset {record.offset} is out "
                                      f"of range. The timestamp should be within [{_long(now_ms - before)}, "
                                      f"{_long(now_ms + after)}]", ErrorCode.INVALID_TIMESTAMP))
        elif log_append_batch:
            errors.append((index, f"Invalid timestamp type in message {_record_text(record)}. Producer should not "
                                  "set timestamp type to LogAppendTime.", ErrorCode.INVALID_TIMESTAMP))
    if not errors:
        return None
    listed = [(i, m) for i, m, _ in errors]
    if any(code == ErrorCode.INVALID_TIMESTAMP for *_, code in errors):
        return RecordErrors(ErrorCode.INVALID_TIMESTAMP,
                            "One or more records have been rejected due to invalid timestamp", listed)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in listed[:3])
    return RecordErrors(ErrorCode.INVALID_RECORD,
                        f"One or more records have been rejected due to {len(listed)} record errors in total, "
                        f"and only showing the first three errors at most: [{shown}]", listed)
