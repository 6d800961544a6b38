"""Idempotent producers: producer ids, and per-partition sequence state for dedupe.

Ids are reserved in blocks: the end of the current block is persisted before any id
from it is handed out, so a restart resumes past every id ever given.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import BatchHeader

if TYPE_CHECKING:
    from ..log import PartitionLog

__all__ = ["PartitionProducerState", "ProducerIdManager", "replay"]

BLOCK = 1000


class ProducerIdManager:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / "producer-id-block"
        self._next = int(self.path.read_text()) if self.path.exists() else 0
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as f:
                f.write(str(self._block_end))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        pid = self._next
        self._next += 1
        return pid


# -- per-partition sequence state -----------------------------------------------------------

MAX_CACHED_BATCHES = 5  # Kafka keeps the last five batches of each producer
SNAPSHOT_FILE = "producer-state.json"


@dataclass
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == 2**31 - 1 else seq + 1


class PartitionProducerState:
    """Idempotent-producer state of one partition: epochs and the last five batches each.

    ``check`` decides what to do with an incoming batch before it is appended; ``update``
    records an appended batch. The state is snapshotted to a JSON file (with the log
    offset it covers) and the batches after that offset are replayed on open.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / SNAPSHOT_FILE
        self.producers: dict[int, ProducerEntry] = {}
        self.snapshot_offset = 0

    def check(self, header: BatchHeader) -> tuple[ErrorCode, int]:
        """(NONE, -1) to append, (NONE, offset) for a duplicate already at ``offset``, or an error."""
        entry = self.producers.get(header.producer_id)
        first, last = header.base_sequence, header.base_sequence + header.last_offset_delta
        if last > 2**31 - 1:
            last -= 2**31
        if entry is None:
            return (ErrorCode.NONE, -1) if first == 0 else (ErrorCode.UNKNOWN_PRODUCER_ID, -1)
        if header.producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, -1
        if header.producer_epoch > entry.epoch:
            return (ErrorCode.NONE, -1) if first == 0 else (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        for b in entry.batches:
            if b.first_seq == first and b.last_seq == last:
                return ErrorCode.NONE, b.first_offset
        if first != _next_seq(entry.last_seq):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        return ErrorCode.NONE, -1

    def update(self, header: BatchHeader, base_offset: int) -> None:
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        last_seq = (header.base_sequence + header.last_offset_delta) % 2**31
        entry.batches.append(BatchMeta(header.base_sequence, last_seq, base_offset,
                                       base_offset + header.last_offset_delta))

    def snapshot(self, log_end_offset: int) -> None:
        data = {
            "offset": log_end_offset,
            "producers": {
                str(pid): {"epoch": e.epoch, "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset]
                                                         for b in e.batches]}
                for pid, e in self.producers.items()
            },
        }
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(data))
            f.flush()
            os.fsync(f.fileno())  # the cleaner may drop batches this snapshot stands in for
        os.replace(tmp, self.path)
        self.snapshot_offset = log_end_offset

    def load(self) -> int:
        """Load the snapshot; returns the offset from which batches must be replayed."""
        if not self.path.exists():
            return 0
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return 0  # unreadable snapshot: replay the whole log instead
        for pid, e in data["producers"].items():
            entry = ProducerEntry(e["epoch"])
            entry.batches.extend(BatchMeta(*b) for b in e["batches"])
            self.producers[int(pid)] = entry
        self.snapshot_offset = data["offset"]
        return self.snapshot_offset


def replay(state: PartitionProducerState, plog: PartitionLog, from_offset: int) -> int:
    """Re-apply the idempotent batches at or after ``from_offset``; returns how many."""
    offset = max(from_offset, plog.log_start_offset)
    count = 0
    for _, _, header in plog.batches_from(offset, 8 << 20):
        if header.producer_id >= 0 and header.base_offset >= offset:
            state.update(header, header.base_offset)
            count += 1
    return count
