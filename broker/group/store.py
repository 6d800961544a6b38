"""Where groups persist: records of the compacted ``__consumer_offsets`` topic, in Kafka's layout.

Offset commits and group metadata are written as they happen and replayed into memory on
start; a null value (tombstone) deletes an offset or a group. A group's records all go to
one partition, picked as Kafka picks it (Java's String.hashCode of the group id).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import (
    ATTR_TRANSACTIONAL,
    BatchHeader,
    Record,
    build_batch,
    decode_batch_records,
    parse_header,
)

from ..config.broker_config import BrokerConfig
from ..errors import BrokerError
from ..log import PartitionLog
from ..log.control import Marker, read_marker
from ..log.validator import decompressed_limit
from ..replication.epochs import current_leader_epoch
from ..replication.produce import wait_for_isr
from ..topics.cluster import Cluster
from ..topics.topic import Partition
from .group import Group, GroupState, Member
from .records import (
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
)

__all__ = ["OFFSETS_TOPIC", "OFFSETS_TOPIC_CONFIG", "GroupStore", "group_of", "offsets_partition", "read_records"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}

KV = list[tuple[bytes, bytes | None]]


def offsets_partition(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, whose leader coordinates it: Kafka's
    ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`` (Java's String.hashCode)."""
    return abs(java_string_hash(group_id)) % partitions


def group_of(groups: dict[str, Group], group_id: str) -> Group:
    """``groups[group_id]``, created empty when missing."""
    group = groups.get(group_id)
    if group is None:
        group = groups[group_id] = Group(group_id)
    return group


class GroupStore:
    def __init__(self, cluster: Cluster, config: BrokerConfig) -> None:
        self.cluster = cluster
        self.config = config

    def load(self, groups: dict[str, Group]) -> None:
        """Create ``__consumer_offsets`` if missing, then replay it into ``groups`` (one node: every partition)."""
        topic = self.cluster.topics.get(OFFSETS_TOPIC)
        if topic is None:
            topic = self.cluster.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, 1,
                                              dict(OFFSETS_TOPIC_CONFIG))
        self.load_partitions(groups, topic.partitions)

    def load_partitions(self, groups: dict[str, Group], partitions: Iterable[Partition]) -> None:
        """Replay these partitions of ``__consumer_offsets`` into ``groups`` (a cluster's coordinator: the ones
        it has come to lead)."""
        config = self.cluster.topics[OFFSETS_TOPIC].config
        loaded_groups: dict[str, GroupMetadata | None] = {}
        commits = skipped = 0
        before = len(groups)
        for partition in partitions:
            # Transactional offset commits (TxnOffsetCommit) by producer id, until their transaction's marker
            pending: dict[int, list[tuple[str, tuple[str, int], OffsetAndMetadata]]] = {}
            for header, record in read_records(partition.log, config.max_message_bytes):
                if isinstance(record, Marker):
                    for group_id, tp, held in pending.pop(header.producer_id, []):
                        if record.commit:
                            group_of(groups, group_id).offsets[tp] = held
                            commits += 1
                    continue
                try:  # decoded whole before anything changes: a bad value leaves its group as it was
                    key = decode_key(record.key or b"")
                    if isinstance(key, tuple):
                        offset = None if record.value is None else decode_offset_value(record.value)
                    else:
                        meta = None if record.value is None else decode_group_value(record.value)
                except ValueError as exc:  # DecodeError included: a bad version, a truncated field
                    skipped += 1
                    log.error("skipped the record at offset %d of %s-%d: it does not decode (%s)",
                              record.offset, OFFSETS_TOPIC, partition.index, exc)
                    continue
                if isinstance(key, tuple):
                    group_id, t, p = key
                    group = group_of(groups, group_id)
                    if header.is_transactional and offset is not None:
                        pending.setdefault(header.producer_id, []).append((group_id, (t, p), offset))
                    elif offset is None:
                        group.offsets.pop((t, p), None)
                    else:
                        group.offsets[(t, p)] = offset
                        commits += 1
                else:
                    loaded_groups[key] = meta
            for producer_id, unended in pending.items():  # their transaction's end is up to the coordinator
                for group_id, tp, held in unended:
                    group_of(groups, group_id).pending_txn.setdefault(producer_id, {})[tp] = held
        for group_id, meta in loaded_groups.items():
            if meta is None:
                existing = groups.get(group_id)
                if existing is not None and not existing.offsets:
                    del groups[group_id]
                continue
            _restore(group_of(groups, group_id), meta)
        log.info("loaded %d groups (%d offset commits) from %s%s", len(groups) - before, commits, OFFSETS_TOPIC,
                 f"; {skipped} records skipped" if skipped else "")

    def partition_count(self) -> int:
        """``__consumer_offsets``' partitions: the cluster's (a broker holds only some of them), else this
        broker's; 0 while it does not exist."""
        membership = self.cluster.membership
        if membership is not None:
            meta = membership.sync.topics.get(OFFSETS_TOPIC)
            return 0 if meta is None else meta.partition_count
        topic = self.cluster.topics.get(OFFSETS_TOPIC)
        return 0 if topic is None else len(topic.partitions)

    def partition_for(self, group_id: str) -> int:
        return offsets_partition(group_id, self.partition_count())

    def _append(self, group_id: str, records: KV, producer_id: int = -1, producer_epoch: int = -1) -> int:
        """One batch of records on the group's partition; a transactional one for a producer id >= 0. The
        offset after it (what a cluster's coordinator waits for its ISR to reach: ``replicated``)."""
        if not records:
            return -1
        partition = self.cluster.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        if partition.replica is not None and not partition.replica.is_leader:  # leadership moved meanwhile
            raise BrokerError(ErrorCode.NOT_COORDINATOR, f"this broker no longer coordinates group {group_id}")
        plog = partition.log
        now = int(time.time() * 1000)
        batch = bytearray(build_batch([Record(offset=i, timestamp=now, key=k, value=v)
                                       for i, (k, v) in enumerate(records)],
                                      producer_id=producer_id, producer_epoch=producer_epoch,
                                      attributes=ATTR_TRANSACTIONAL if producer_id >= 0 else 0))
        if partition.replica is None:  # one node
            plog.append(batch, parse_header(batch))
            return plog.log_end_offset
        plog.append(batch, parse_header(batch), current_leader_epoch(partition))  # stamped as a leader's
        partition.replica.advance_high_watermark()  # an ISR of the leader alone has it now
        return plog.log_end_offset

    async def replicated(self, group_id: str, end_offset: int, timeout_ms: int) -> int:
        """Once the ISR of the group's partition holds the log up to ``end_offset`` (the acks=all wait of a
        cluster's Produce, replication/produce.py): 0, or the error code to answer with. At once on one node."""
        if end_offset < 0:
            return 0
        partition = self.cluster.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        if partition.replica is None:
            return 0
        entry: dict[str, Any] = {"error_code": 0}
        await wait_for_isr([(entry, partition.replica.wait_for(end_offset))], timeout_ms)
        return int(entry["error_code"])

    def write_group(self, group: Group) -> None:
        meta = GroupMetadata(
            group.protocol_type or "", group.generation, group.protocol, group.leader, group.state_timestamp,
            [MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.session_timeout_ms, m.metadata_for(group.protocol or ""), m.assignment)
             for m in group.members.values()],
        )
        self._append(group.group_id, [(encode_group_key(group.group_id), encode_group_value(meta))])

    def write_offsets(self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata],
                      producer_id: int = -1, producer_epoch: int = -1) -> int:
        """Offset commits; a transactional producer's (TxnOffsetCommit) count once its commit marker follows.
        The offset after them."""
        return self._append(group_id, [(encode_offset_key(group_id, t, p), encode_offset_value(o))
                                for (t, p), o in offsets.items()], producer_id, producer_epoch)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        self._append(group_id, [(encode_offset_key(group_id, t, p), None) for t, p in partitions])

    def delete_group(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        """Tombstones for the group's offsets and its metadata, in one batch."""
        records: KV = [(encode_offset_key(group_id, t, p), None) for t, p in partitions]
        records.append((encode_group_key(group_id), None))
        self._append(group_id, records)


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


def read_records(plog: PartitionLog, max_message_bytes: int) -> Iterator[tuple[BatchHeader, Record | Marker]]:
    """Every record of a partition with its batch's header, from its start offset to its end; a transaction
    marker for a control batch. A batch whose records do not decode (or would expand past the validator's
    limit) is skipped with an error logged, so that one bad batch never keeps the broker from starting."""
    start = plog.log_start_offset
    limit = decompressed_limit(max_message_bytes)
    for data, pos, header in plog.batches_from(start):
        records: list[Record | Marker]
        try:
            if header.is_control:
                records = [read_marker(bytes(data[pos:pos + header.size]))] if header.base_offset >= start else []
            else:
                records = [r for r in decode_batch_records(data, pos, max_decompressed=limit)[1] if r.offset >= start]
        except ValueError as exc:  # InvalidBatch included
            log.error("skipped the batch at offsets %d-%d of %s: %s", header.base_offset, header.last_offset,
                      plog.directory.name, exc)
            continue
        for r in records:
            yield header, r
