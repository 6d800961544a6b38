"""read_committed on fetched bytes: which record batches belong to aborted transactions.

A read_committed Fetch answer lists the aborted transactions overlapping what it returns, as
(producer id, first offset). Kafka's Fetcher (``CompletedFetch.nextFetchedRecord``) decides from
batch headers alone: a producer joins the aborted set once a batch at or past its first offset
comes, leaves it at its abort marker, and its transactional batches in between are skipped. Only
a control batch's one record is ever decoded (to tell an abort marker from a commit).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from .records import BatchHeader, InvalidBatch, decode_batch_records

__all__ = ["ABORT", "COMMIT", "AbortedTransactions", "control_type"]

ABORT, COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type


def control_type(data: bytes | memoryview, pos: int) -> int:
    """The control record type of the control batch at ``pos`` (ABORT, COMMIT; -1 unreadable)."""
    try:
        _, records = decode_batch_records(data, pos)
    except (InvalidBatch, ValueError):
        return -1
    key = records[0].key if records else None
    return _CONTROL_KEY.unpack_from(key)[1] if key is not None and len(key) >= 4 else -1


class AbortedTransactions:
    """The bookkeeping for one fetch answer's batches, taken in offset order."""

    __slots__ = ("pending", "producers")

    def __init__(self, aborted: Iterable[tuple[int, int]] | None) -> None:
        """``aborted``: the answer's (producer id, first offset) pairs (None: the broker sent none)."""
        self.pending = sorted((first, pid) for pid, first in aborted or ())  # ascending first offset
        self.producers: set[int] = set()  # whose aborted transaction is open at the current batch

    def skip(self, header: BatchHeader, data: bytes | memoryview, pos: int) -> bool:
        """Whether the batch at ``pos`` is not for a read_committed reader: a control batch, or a
        transactional batch of an aborted transaction."""
        pending = self.pending
        while pending and pending[0][0] <= header.last_offset:
            self.producers.add(pending.pop(0)[1])
        if header.is_control:
            if header.producer_id in self.producers and control_type(data, pos) == ABORT:
                self.producers.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self.producers
