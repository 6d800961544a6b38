"""Transaction markers: the control batches that end a transaction in each partition it wrote to.

A marker is a v2 batch with the control and transactional attributes set, the producer's id and epoch, and
one record whose key is (version 0, type) — type 0 aborts, 1 commits — and whose value is (version 0,
coordinator epoch), as Kafka's EndTransactionMarker encodes them.
"""

from __future__ import annotations

import struct
import time
from typing import NamedTuple

from headwater.kafka.records import ATTR_CONTROL, ATTR_TRANSACTIONAL, Record, build_batch, decode_batch_records

__all__ = ["ABORT", "COMMIT", "Marker", "marker_batch", "read_marker"]

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class Marker(NamedTuple):
    commit: bool
    coordinator_epoch: int


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int | None = None) -> bytes:
    """One control batch ending ``producer_id``'s transaction (its offset is set when appended)."""
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    record = Record(0, now, _KEY.pack(0, COMMIT if commit else ABORT), _VALUE.pack(0, coordinator_epoch))
    return build_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                       attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL)


def read_marker(batch: bytes) -> Marker:
    """The marker a control batch carries."""
    record = decode_batch_records(batch)[1][0]
    if record.key is None or len(record.key) < _KEY.size or record.value is None or len(record.value) < _VALUE.size:
        raise ValueError("a control batch whose record is not a transaction marker")
    _, kind = _KEY.unpack_from(record.key)
    _, epoch = _VALUE.unpack_from(record.value)
    return Marker(kind == COMMIT, epoch)
