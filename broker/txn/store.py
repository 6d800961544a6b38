"""Where transactional ids persist: the compacted ``__transaction_state`` topic, replayed on start.

One record per change of a transactional id (its latest wins, compaction keeps it), on the partition Kafka
picks: Java's String.hashCode of the id modulo ``transaction.state.log.num.partitions``. A null value
deletes an expired id.
"""

from __future__ import annotations

import logging
import time

from headwater.kafka.records import Record, build_batch, parse_header

from ..config.broker_config import BrokerConfig
from ..group.records import java_string_hash
from ..group.store import read_records
from ..log.control import Marker
from ..topics.cluster import Cluster
from .state import TxnMetadata, decode_key, decode_value, encode_key, encode_value

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnStore"]

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TxnStore:
    def __init__(self, cluster: Cluster, config: BrokerConfig) -> None:
        self.cluster = cluster
        self.config = config

    def load(self) -> dict[str, TxnMetadata]:
        """Create ``__transaction_state`` if missing, then replay it: the latest state of every id."""
        topic = self.cluster.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            topic = self.cluster.create_topic(
                TRANSACTION_STATE_TOPIC, self.config.transaction_state_log_num_partitions, 1,
                {"cleanup.policy": "compact", "segment.bytes": str(self.config.transaction_state_log_segment_bytes)})
        found: dict[str, TxnMetadata] = {}
        skipped = 0
        for partition in topic.partitions:
            for _, record in read_records(partition.log, topic.config.max_message_bytes):
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
        log.info("loaded %d transactional ids from %s%s", len(found), TRANSACTION_STATE_TOPIC,
                 f"; {skipped} records skipped" if skipped else "")
        return found

    def partition_for(self, transactional_id: str) -> int:
        return abs(java_string_hash(transactional_id)) % len(self.cluster.topics[TRANSACTION_STATE_TOPIC].partitions)

    def write(self, transactional_id: str, metadata: TxnMetadata | None) -> None:
        """Append the id's new state (None: a tombstone)."""
        plog = self.cluster.partition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id)).log
        value = None if metadata is None else encode_value(metadata)
        batch = bytearray(build_batch([Record(0, int(time.time() * 1000), encode_key(transactional_id), value)]))
        plog.append(batch, parse_header(batch))
