"""Ending a transaction in every partition it wrote to: a marker each, and its group offsets.

Kafka's TransactionMarkerChannelManager sends WriteTxnMarkers to each partition's leader; on one node every
partition is local, so the marker is appended directly (Partition.append_marker), and the offsets a
TxnOffsetCommit held for the producer become committed (or are dropped) as the ``__consumer_offsets`` marker
is written.
"""

from __future__ import annotations

import logging

from ..errors import BrokerError
from ..group.offsets import CommittedOffsets
from ..group.store import OFFSETS_TOPIC
from ..topics.cluster import Cluster
from .state import TxnMetadata

__all__ = ["write_markers"]

log = logging.getLogger(__name__)


def write_markers(cluster: Cluster, offsets: CommittedOffsets, txn: TxnMetadata, commit: bool,
                  coordinator_epoch: int = 0) -> None:
    """Write ``txn``'s commit or abort marker to each of its partitions. A partition deleted since it joined
    the transaction is skipped with a warning (there is nothing left to end); any other failure raises."""
    for topic, index in sorted(txn.partitions):
        try:
            partition = cluster.partition(topic, index)
        except BrokerError as exc:
            log.warning("no %s marker for %s-%d of transactional id %s: %s", "commit" if commit else "abort",
                        topic, index, txn.transactional_id, exc.message)
            continue
        partition.append_marker(txn.producer_id, txn.producer_epoch, commit, coordinator_epoch)
        if topic == OFFSETS_TOPIC:
            offsets.end_transaction(index, txn.producer_id, commit)
    if txn.partitions:
        cluster.notify_data(txn.partitions)
