"""Where groups persist: records of the compacted ``__consumer_offsets`` topic, in Kafka's layout.

Offset commits and group metadata are written as they happen and replayed into memory on
start; a null value (tombstone) deletes an offset or a group. A group's records all go to
one partition, picked as Kafka picks it (Java's String.hashCode of the group id).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import ATTR_TRANSACTIONAL, Record, build_batch

from ..config.broker_config import BrokerConfig
from ..errors import BrokerError
from ..replication.leader_append import append_as_leader, isr_has
from ..topics.cluster import Cluster
from ..topics.topic import Partition
from .group import Group, group_of
from .loading import OFFSETS_TOPIC, load_partition, load_partitions, read_records
from .records import (
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
)

__all__ = ["OFFSETS_TOPIC", "OFFSETS_TOPIC_CONFIG", "GroupStore", "group_of", "offsets_partition", "read_records"]

OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}

KV = list[tuple[bytes, bytes | None]]


def offsets_partition(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, whose leader coordinates it: Kafka's
    ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`` (Java's String.hashCode)."""
    return abs(java_string_hash(group_id)) % partitions


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
        """Replay these partitions of ``__consumer_offsets`` into ``groups`` at once (loading.py)."""
        load_partitions(groups, partitions, self.cluster.topics[OFFSETS_TOPIC].config.max_message_bytes)

    async def load_partition(self, partition: Partition) -> dict[str, Group]:
        """The groups of a partition a cluster's coordinator has come to lead, loaded while the broker goes on
        serving (loading.py; ``offsets.load.buffer.size`` bytes read at a time)."""
        return await load_partition(partition, self.cluster.topics[OFFSETS_TOPIC].config.max_message_bytes,
                                    self.config.offsets_load_buffer_size)

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
        batch = bytearray(build_batch([Record(offset=i, timestamp=int(time.time() * 1000), key=k, value=v)
                                       for i, (k, v) in enumerate(records)],
                                      producer_id=producer_id, producer_epoch=producer_epoch,
                                      attributes=ATTR_TRANSACTIONAL if producer_id >= 0 else 0))
        return append_as_leader(partition, batch)

    async def replicated(self, group_id: str, end_offset: int, timeout_ms: int) -> int:
        """Once the ISR of the group's partition holds the log up to ``end_offset`` (the acks=all wait of a
        cluster's Produce, replication/produce.py): 0, or the error code to answer with. At once on one node."""
        if end_offset < 0:
            return 0
        return await isr_has(self.cluster.partition(OFFSETS_TOPIC, self.partition_for(group_id)), end_offset,
                             timeout_ms)

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
