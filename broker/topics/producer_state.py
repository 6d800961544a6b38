"""Idempotent producers: producer ids, and per-partition sequence state for dedupe; with it, the partition's
open transactions (txn_state.py), which the snapshot carries and replay rebuilds from data batches and markers.

Ids are reserved in blocks: the end of the current block is persisted before any id
from it is handed out, so a restart resumes past every id ever given.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import BatchHeader

from ..log.control import read_marker
from ..log.txn_index import AbortedTxn
from .txn_state import OpenTransactions

if TYPE_CHECKING:
    from ..log import PartitionLog

__all__ = ["PartitionProducerState", "ProducerIdManager", "load_producer_state", "rebuild_after_truncation",
           "replay"]

log = logging.getLogger(__name__)

BLOCK = 1000


class ProducerIdManager:
    """Producer ids handed out from blocks reserved before use: on a single node in the log dir's
    producer-id-block file; in a cluster (``use_blocks``) through ZooKeeper, so that no two brokers hand out
    the same id."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / "producer-id-block"
        self._next = int(self.path.read_text()) if self.path.exists() else 0
        self._block_end = self._next
        self._reserve: Callable[[int], int] | None = None

    def use_blocks(self, reserve: Callable[[int], int]) -> None:
        """From now on take blocks from ``reserve(size)`` (the first id of ``size`` ids reserved for this
        broker alone), not the file; the rest of the file's block is not the cluster's, so it is dropped."""
        self._reserve = reserve
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end and self._reserve is not None:
            self._next = self._reserve(BLOCK)
            self._block_end = self._next + BLOCK
        elif self._next >= self._block_end:
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
    # the coordinator epoch of the producer's last marker here: a marker from an older coordinator is fenced
    # (Kafka's ProducerStateEntry.coordinatorEpoch, kept across producer epochs)
    coordinator_epoch: int = -1

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
        self.transactions = OpenTransactions()
        self.snapshot_offset = 0

    def check(self, header: BatchHeader) -> tuple[ErrorCode, int]:
        """(NONE, -1) to append, (NONE, offset) for a duplicate already at ``offset``, or an error."""
        if header.is_control:  # markers come from the transaction coordinator alone (Partition.append_marker)
            return ErrorCode.INVALID_RECORD, -1
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
            coordinator_epoch = -1 if entry is None else entry.coordinator_epoch
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch,
                                                                       coordinator_epoch=coordinator_epoch)
        last_seq = (header.base_sequence + header.last_offset_delta) % 2**31
        entry.batches.append(BatchMeta(header.base_sequence, last_seq, base_offset,
                                       base_offset + header.last_offset_delta))
        if header.is_transactional:
            self.transactions.begin(header.producer_id, base_offset)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> ErrorCode:
        """Whether a transaction coordinator may append this marker (Kafka's ProducerAppendInfo checks, for a
        coordinator's append): INVALID_PRODUCER_EPOCH for an epoch older than the producer's,
        TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than its last marker's (a zombie
        coordinator's), else NONE."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def end_transaction(self, producer_id: int, producer_epoch: int, marker_offset: int,
                        commit: bool, coordinator_epoch: int = -1) -> AbortedTxn | None:
        """The marker at ``marker_offset`` closed ``producer_id``'s transaction; the aborted-index entry it
        makes, if any. Markers carry no sequence: the producer's sequences go on across its transactions,
        and restart at 0 only when the marker bumped its epoch (Kafka's appendEndTxnMarker). The marker's
        coordinator epoch is recorded as it is (a replica takes the leader's log as it is, as Kafka's
        replication origin only logs an older one)."""
        entry = self.producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        return self.transactions.end(producer_id, marker_offset, commit)

    def last_stable_offset(self, log_end_offset: int) -> int:
        return self.transactions.last_stable_offset(log_end_offset)

    def snapshot(self, log_end_offset: int) -> None:
        data = {
            "offset": log_end_offset,
            "producers": {
                str(pid): {"epoch": e.epoch, "coordinator_epoch": e.coordinator_epoch,
                           "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset] for b in e.batches]}
                for pid, e in self.producers.items()
            },
            "transactions": {str(pid): first for pid, first in self.transactions.first_offsets.items()},
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
            entry = ProducerEntry(e["epoch"], coordinator_epoch=e.get("coordinator_epoch", -1))
            entry.batches.extend(BatchMeta(*b) for b in e["batches"])
            self.producers[int(pid)] = entry
        for pid, first in data.get("transactions", {}).items():
            self.transactions.begin(int(pid), int(first))
        self.snapshot_offset = data["offset"]
        return self.snapshot_offset


def replay(state: PartitionProducerState, plog: PartitionLog, from_offset: int) -> int:
    """Re-apply the idempotent batches and transaction markers at or after ``from_offset``; returns how many.

    The aborted-transaction indexes lose their entries from ``from_offset`` on first, and get them back from
    the markers replayed, so a crash between a marker and its index entry (or a torn tail) leaves neither
    a missing nor a stale entry."""
    offset = max(from_offset, plog.log_start_offset)
    plog.truncate_txn_indexes(offset)
    count = 0
    for data, pos, header in plog.batches_from(offset, 8 << 20):
        if header.producer_id < 0 or header.base_offset < offset:
            continue
        if header.is_control:
            try:
                marker = read_marker(data[pos : pos + header.size])
            except (ValueError, IndexError) as exc:  # no marker: written before Produce refused them
                log.warning("%s: control batch at offset %d skipped in producer-state replay: %s",
                            plog.directory, header.base_offset, exc)
                continue
            aborted = state.end_transaction(header.producer_id, header.producer_epoch, header.base_offset,
                                            marker.commit, marker.coordinator_epoch)
            if aborted is not None:
                plog.record_aborted(aborted)
        else:
            state.update(header, header.base_offset)
        count += 1
    return count


def load_producer_state(directory: Path, plog: PartitionLog) -> tuple[PartitionProducerState, int]:
    """The partition's producer state: its snapshot plus the batches after it replayed; and how many were.
    A snapshot past the log end (the log lost its tail, or was truncated) describes batches that are gone:
    it is removed, lest it be loaded once the log grows past its offset again, and the whole log replayed."""
    state = PartitionProducerState(directory)
    start = state.load()
    if start > plog.log_end_offset:
        state.path.unlink(missing_ok=True)
        state = PartitionProducerState(directory)
        start = 0
    return state, replay(state, plog, start)


def rebuild_after_truncation(plog: PartitionLog) -> PartitionProducerState:
    """The producer state of a partition whose log ``PartitionLog.truncate_to`` just cut (as Kafka's
    rebuildProducerState): the caller puts it in place of the partition's (``partition.producers``)."""
    return load_producer_state(plog.directory, plog)[0]
