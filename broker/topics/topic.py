"""A topic of this node: its id, configs and partitions, and the rules for its name."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from headwater.kafka.records import parse_header

from ..config.broker_config import TopicConfig
from ..errors import BrokerError, InvalidTopic
from ..log import PartitionLog
from ..log.control import marker_batch
from ..log.flusher import PartitionFlusher
from ..metrics.stats import TopicCounters
from ..replication.epochs import current_leader_epoch
from .producer_state import PartitionProducerState

if TYPE_CHECKING:
    from ..replication.state import PartitionState

__all__ = ["INTERNAL_TOPICS", "MAX_PARTITIONS_PER_REQUEST", "MAX_TOPIC_LENGTH", "TOO_MANY_PARTITIONS", "Partition",
           "Topic", "validate_topic_name"]

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249

# Kafka's Topic.INTERNAL_TOPICS: topics only the broker writes (through its log, never through Produce).
# Clients may read them; Produce, DeleteRecords and DeleteTopics refuse them, Metadata flags them
# is_internal. Internal by name, as in Kafka: a topic the broker comes to own later is added here.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

# New partitions one CreateTopics or CreatePartitions request may ask for, all topics together: Kafka's
# controller has the same fixed bound (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH) and refuses
# the whole request with POLICY_VIOLATION.
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopic("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopic(f"topic name is longer than {MAX_TOPIC_LENGTH} characters")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopic(
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass(slots=True)
class Partition:
    """One partition of a topic: its log, what flushes it, and its idempotent producers' state."""

    index: int
    log: PartitionLog
    flusher: PartitionFlusher
    producers: PartitionProducerState
    on_append: Callable[[], None] | None = None  # wakes long-polling fetches (the LSO may have moved)
    # In a ZooKeeper cluster (docs/CLUSTER.md): the leadership the controller last handed this broker
    # (set by the cluster code, broker/cluster/), and this replica's replication state (broker/replication/:
    # follower positions, high watermark, ISR). Both None on a single node: this broker leads, alone.
    state: PartitionState | None = None
    replica: Any = None

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> int:
        """End ``producer_id``'s transaction in this partition with a commit or abort marker; its offset. The
        transaction coordinator's one way to write a marker (the partition's transaction state follows it).
        BrokerError(INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED) for a marker of an older producer
        epoch or coordinator epoch than the producer's last here, nothing appended (Kafka's ProducerAppendInfo)."""
        refused = self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if refused:
            raise BrokerError(refused, f"{'commit' if commit else 'abort'} marker of producer {producer_id} epoch "
                                       f"{producer_epoch} from coordinator epoch {coordinator_epoch}: the partition "
                                       f"has seen a newer one")
        batch = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch)
        offset = self.log.append(bytearray(batch), parse_header(batch), current_leader_epoch(self))
        aborted = self.producers.end_transaction(producer_id, producer_epoch, offset, commit, coordinator_epoch)
        if aborted is not None:
            self.log.record_aborted(aborted)
        if self.replica is not None:  # a leader alone in its ISR commits the marker at once
            self.replica.advance_high_watermark()
        if self.on_append is not None:
            self.on_append()
        return offset

    def last_stable_offset(self) -> int:
        """Read_committed consumers read below this: the first offset of the earliest open transaction, else
        the log end (never below the log start, which retention may have moved past an open transaction)."""
        plog = self.log
        return max(self.producers.last_stable_offset(plog.log_end_offset), plog.log_start_offset)


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    overrides: dict[str, str]
    config: TopicConfig
    partitions: list[Partition] = field(default_factory=list)  # by index
    stats: TopicCounters = field(default_factory=TopicCounters)  # BrokerTopicMetrics, bumped by Produce/Fetch
    # Metadata's partition entries, kept while the partition count stays (apis/k03_metadata.py)
    metadata_partitions: Any = field(default=None, repr=False, compare=False)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def metadata(self) -> dict[str, Any]:
        return {
            "id": str(self.topic_id),
            "partitions": len(self.partitions),
            "config": self.overrides,
            "internal": self.internal,
        }
