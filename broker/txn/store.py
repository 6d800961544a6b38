"""Where transactional ids persist: the compacted ``__transaction_state`` topic, replayed when loaded.

One record per change of a transactional id (its latest wins, compaction keeps it), on the partition Kafka
picks: Java's String.hashCode of the id modulo the topic's partition count. A null value deletes an expired
id. On one node the topic is this broker's, made and replayed whole at start. In a ZooKeeper cluster it is the
cluster's (made by the first FindCoordinator for a transactional id, apis/k10_find_coordinator.py), and the
coordinator replays a partition when it comes to lead it; its writes are a leader's appends, answered once
the partition's ISR has them (replication/leader_append.py), as Kafka's TransactionStateManager appends with
acks=-1.
"""

from __future__ import annotations

import logging
import time

from headwater.kafka.records import Record, build_batch

from ..config.broker_config import BrokerConfig
from ..group.records import java_string_hash
from ..group.store import read_records
from ..log.control import Marker
from ..replication.leader_append import append_as_leader, isr_has
from ..topics.cluster import Cluster
from ..topics.topic import Partition
from .state import TxnMetadata, decode_key, decode_value, encode_key, encode_value

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnStore", "transaction_state_config", "txn_partition"]

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"


def transaction_state_config(config: BrokerConfig) -> dict[str, str]:
    """The topic's configs, as Kafka's TransactionLog sets them (min.insync.replicas from
    ``transaction.state.log.min.isr``, never an unclean leader: a coordinator must not lose a prepare)."""
    return {"cleanup.policy": "compact", "segment.bytes": str(config.transaction_state_log_segment_bytes),
            "min.insync.replicas": str(config.transaction_state_log_min_isr),
            "unclean.leader.election.enable": "false", "compression.type": "uncompressed"}


def txn_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of an id, whose leader coordinates it: Kafka's
    ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``."""
    return abs(java_string_hash(transactional_id)) % partitions


class TxnStore:
    def __init__(self, cluster: Cluster, config: BrokerConfig) -> None:
        self.cluster = cluster
        self.config = config

    def load(self) -> dict[str, TxnMetadata]:
        """One node: create ``__transaction_state`` if missing, then replay it: the latest state of every id."""
        topic = self.cluster.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            topic = self.cluster.create_topic(
                TRANSACTION_STATE_TOPIC, self.config.transaction_state_log_num_partitions, 1,
                {"cleanup.policy": "compact", "segment.bytes": str(self.config.transaction_state_log_segment_bytes)})
        return self.load_partitions(topic.partitions)

    def load_partitions(self, partitions: list[Partition]) -> dict[str, TxnMetadata]:
        """Replay these partitions: the latest state of each of their ids."""
        max_bytes = self.cluster.topics[TRANSACTION_STATE_TOPIC].config.max_message_bytes
        found: dict[str, TxnMetadata] = {}
        skipped = 0
        for partition in partitions:
            for _, record in read_records(partition.log, max_bytes):
                if isinstance(record, Marker):  # the broker writes no transaction here
                    continue
                try:
                    tid = decode_key(record.key or b"")
                    if record.value is None:
                        found.pop(tid, None)
                    else:
                        found[tid] = decode_value(tid, record.value)
                except ValueError as exc:  # DecodeError included
                    skipped += 1
                    log.error("skipped the record at offset %d of %s-%d: it does not decode (%s)",
                              record.offset, TRANSACTION_STATE_TOPIC, partition.index, exc)
        log.info("loaded %d transactional ids from %d partitions of %s%s", len(found), len(partitions),
                 TRANSACTION_STATE_TOPIC, f"; {skipped} records skipped" if skipped else "")
        return found

    def partition_count(self) -> int:
        """``__transaction_state``'s partitions (the cluster's); 0 while it does not exist."""
        return self.cluster.partitions_of(TRANSACTION_STATE_TOPIC)

    def partition_for(self, transactional_id: str) -> int:
        return txn_partition(transactional_id, self.partition_count())

    def append(self, transactional_id: str, metadata: TxnMetadata | None) -> int:
        """Append the id's new state (None: a tombstone); the offset after it, for ``replicated``.
        BrokerError(NOT_LEADER_OR_FOLLOWER) when this broker no longer leads the id's partition."""
        index = self.partition_for(transactional_id)
        partition = self.cluster.partition(TRANSACTION_STATE_TOPIC, index)
        value = None if metadata is None else encode_value(metadata)
        batch = bytearray(build_batch([Record(0, int(time.time() * 1000), encode_key(transactional_id), value)]))
        end = append_as_leader(partition, batch)
        return end

    async def replicated(self, transactional_id: str, end_offset: int) -> int:
        """0 once the ISR of the id's partition has its log up to ``end_offset`` (at once on one node), else
        the wait's error code; bounded by ``request.timeout.ms`` as Kafka bounds the coordinator's appends."""
        partition = self.cluster.partition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        return await isr_has(partition, end_offset, self.config.request_timeout_ms)
