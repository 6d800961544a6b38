"""Loading groups from ``__consumer_offsets``: its records replayed into groups and committed offsets.

One node replays every partition at start (``load_partitions``). A cluster's coordinator loads a partition
when it comes to lead it, as Kafka's GroupMetadataManager.loadGroupsAndOffsets does, while it goes on serving:
``load_partition`` reads the log ``offsets.load.buffer.size`` bytes at a time on the event loop (the log is
the loop's) and decodes each chunk in a worker thread, until it reaches the log end; the groups found are
handed over only then. Meanwhile the coordinator answers the partition's groups COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator

from headwater.kafka.records import BatchHeader, Record, decode_batch_records, iter_batches

from ..log import PartitionLog
from ..log.control import Marker, read_marker
from ..log.errors import LogClosed
from ..log.validator import decompressed_limit
from ..topics.topic import Partition
from .group import Group, GroupState, Member, group_of
from .records import GroupMetadata, OffsetAndMetadata, decode_group_value, decode_key, decode_offset_value

__all__ = ["OffsetsReplay", "batch_records", "load_partition", "load_partitions", "read_records"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_Pending = dict[int, list[tuple[str, tuple[str, int], OffsetAndMetadata]]]


def batch_records(data: bytes | memoryview, pos: int, header: BatchHeader, start: int, limit: int,
                  where: str) -> list[Record | Marker]:
    """The records at or after offset ``start`` of the batch at ``pos`` of ``data`` (a transaction marker for a
    control batch; decompressed to at most ``limit`` bytes). A batch whose records do not decode is skipped
    with an error logged (naming ``where``), so that one bad batch never keeps groups from loading."""
    try:
        if header.is_control:
            return [read_marker(bytes(data[pos:pos + header.size]))] if header.base_offset >= start else []
        return [r for r in decode_batch_records(data, pos, max_decompressed=limit)[1] if r.offset >= start]
    except ValueError as exc:  # InvalidBatch included
        log.error("skipped the batch at offsets %d-%d of %s: %s", header.base_offset, header.last_offset, where, exc)
        return []


def read_records(plog: PartitionLog, max_message_bytes: int) -> Iterator[tuple[BatchHeader, Record | Marker]]:
    """Every record of a partition with its batch's header, from its start offset to its end (``batch_records``
    for each batch)."""
    start = plog.log_start_offset
    limit = decompressed_limit(max_message_bytes)
    for data, pos, header in plog.batches_from(start):
        for r in batch_records(data, pos, header, start, limit, plog.directory.name):
            yield header, r


class OffsetsReplay:
    """What a replay of ``__consumer_offsets`` partitions finds, record after record, applied to groups at the
    end (``apply``): offset commits and their tombstones, transactional commits held until their marker, and
    each group's latest metadata."""

    def __init__(self, groups: dict[str, Group] | None = None) -> None:
        self.groups: dict[str, Group] = {} if groups is None else groups
        self._metadata: dict[str, GroupMetadata | None] = {}
        self._pending: _Pending = {}  # TxnOffsetCommit records by producer id, until their transaction's marker
        self._before = len(self.groups)
        self.commits = self.skipped = 0

    def add(self, partition: int, header: BatchHeader, record: Record | Marker) -> None:
        groups = self.groups
        if isinstance(record, Marker):
            for group_id, tp, held in self._pending.pop(header.producer_id, []):
                if record.commit:
                    group_of(groups, group_id).offsets[tp] = held
                    self.commits += 1
            return
        try:  # decoded whole before anything changes: a bad value leaves its group as it was
            key = decode_key(record.key or b"")
            if isinstance(key, tuple):
                offset = None if record.value is None else decode_offset_value(record.value)
            else:
                meta = None if record.value is None else decode_group_value(record.value)
        except ValueError as exc:  # DecodeError included: a bad version, a truncated field
            self.skipped += 1
            log.error("skipped the record at offset %d of %s-%d: it does not decode (%s)", record.offset,
                      OFFSETS_TOPIC, partition, exc)
            return
        if isinstance(key, tuple):
            group_id, t, p = key
            group = group_of(groups, group_id)
            if header.is_transactional and offset is not None:
                self._pending.setdefault(header.producer_id, []).append((group_id, (t, p), offset))
            elif offset is None:
                group.offsets.pop((t, p), None)
            else:
                group.offsets[(t, p)] = offset
                self.commits += 1
        else:
            self._metadata[key] = meta

    def add_chunk(self, partition: int, data: bytes, start: int, limit: int) -> int:
        """Every record of the whole batches in ``data`` (read from offset ``start``); the offset after them.
        Touches nothing but this replay: a worker thread may run it."""
        after = start
        where = f"{OFFSETS_TOPIC}-{partition}"
        for pos, header in iter_batches(data):
            for record in batch_records(data, pos, header, start, limit, where):
                self.add(partition, header, record)
            after = header.last_offset + 1
        return after

    def end_partition(self) -> None:
        """The partition's transactional commits left without a marker: their transaction's end is up to its
        coordinator (held as pending)."""
        for producer_id, unended in self._pending.items():
            for group_id, tp, held in unended:
                group_of(self.groups, group_id).pending_txn.setdefault(producer_id, {})[tp] = held
        self._pending = {}

    def finish(self) -> None:
        """Apply the groups' metadata (a tombstone removes a group left without offsets) and log what loaded."""
        groups = self.groups
        for group_id, meta in self._metadata.items():
            if meta is None:
                existing = groups.get(group_id)
                if existing is not None and not existing.offsets:
                    del groups[group_id]
                continue
            _restore(group_of(groups, group_id), meta)
        log.info("loaded %d groups (%d offset commits) from %s%s", len(groups) - self._before, self.commits,
                 OFFSETS_TOPIC, f"; {self.skipped} records skipped" if self.skipped else "")


def load_partitions(groups: dict[str, Group], partitions: Iterable[Partition], max_message_bytes: int) -> None:
    """Replay these partitions of ``__consumer_offsets`` into ``groups``, at once (one node, at start)."""
    replay = OffsetsReplay(groups)
    for partition in partitions:
        for header, record in read_records(partition.log, max_message_bytes):
            replay.add(partition.index, header, record)
        replay.end_partition()
    replay.finish()


async def load_partition(partition: Partition, max_message_bytes: int, buffer_size: int) -> dict[str, Group]:
    """The groups of one ``__consumer_offsets`` partition, loaded without holding up the event loop: read
    ``buffer_size`` bytes at a time on the loop (at least one batch), decoded in a worker thread, until the log
    end (appends made meanwhile included: the last check of the end and the return happen without a pause).
    LogClosed when the partition's log is closed or replaced meanwhile."""
    replay = OffsetsReplay()
    plog = partition.log
    limit = decompressed_limit(max_message_bytes)
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        if partition.log is not plog:
            raise LogClosed(f"{plog.directory} was replaced while its groups loaded")
        data = plog.read(offset, buffer_size)
        if not data:  # the rest of the log is a compacted gap
            break
        offset = await asyncio.to_thread(replay.add_chunk, partition.index, data, offset, limit)
    replay.end_partition()
    replay.finish()
    return replay.groups


def _restore(group: Group, meta: GroupMetadata) -> None:
    group.protocol_type = meta.protocol_type or None
    group.generation = meta.generation
    group.protocol = meta.protocol
    group.leader = meta.leader
    for m in meta.members:
        member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                        m.rebalance_timeout_ms, meta.protocol_type, [(meta.protocol or "", m.subscription)],
                        assignment=m.assignment)  # its session timer is armed by the coordinator's start
        group.members[m.member_id] = member
        if m.group_instance_id:
            group.static_members[m.group_instance_id] = m.member_id
    group.transition(GroupState.STABLE if group.members else GroupState.EMPTY)
