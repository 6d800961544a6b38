"""Appending transaction markers as the leader of their partitions: what a WriteTxnMarkers request does on the
broker it reaches (Kafka's KafkaApis.handleWriteTxnMarkersRequest), and what the cluster's marker sender does for
the partitions its own broker leads (marker_sender.py), so the two share one path.

For each marker and partition, as Kafka: a partition this broker does not have is UNKNOWN_TOPIC_OR_PARTITION (one
another broker holds: NOT_LEADER_OR_FOLLOWER, as ``Cluster.partition`` answers); a replica it does not lead
NOT_LEADER_OR_FOLLOWER; fewer in-sync replicas than ``min.insync.replicas`` NOT_ENOUGH_REPLICAS (markers are
appended with acks=-1); a marker of an older producer epoch or coordinator epoch than the producer's last one
there INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED (Partition.append_marker). An appended marker is
answered once the partition's ISR has it (REQUEST_TIMED_OUT after ``request.timeout.ms``); only then does a
``__consumer_offsets`` marker end the producer's pending offsets there (Kafka's onTransactionCompleted after the
append's acks=-1 answer). On a single node every partition is local and the markers count at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from ..group.offsets import CommittedOffsets
from ..group.store import OFFSETS_TOPIC
from ..replication.produce import leader_refusal, wait_for_isr
from ..topics.cluster import Cluster

__all__ = ["MarkerEntry", "append_markers"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MarkerEntry:
    """One marker of a WriteTxnMarkers request: ending ``producer_id``'s transaction in ``partitions``."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TP, ...]

    @property
    def kind(self) -> str:
        return "commit" if self.commit else "abort"


def _append_one(cluster: Cluster, marker: MarkerEntry, tp: TP,
                waits: list[tuple[dict[str, Any], asyncio.Future[int]]]) -> dict[str, Any]:
    """Append ``marker`` to partition ``tp``; its result entry (error_code), with the ISR wait added to ``waits``."""
    entry: dict[str, Any] = {"error_code": ErrorCode.NONE}
    try:
        partition = cluster.partition(*tp)
        replica = partition.replica
        refused = leader_refusal(replica, -1) if replica is not None else 0
        if refused:
            entry["error_code"] = refused
            return entry
        offset = partition.append_marker(marker.producer_id, marker.producer_epoch, marker.commit,
                                         marker.coordinator_epoch)
    except BrokerError as exc:
        entry["error_code"] = exc.code
        return entry
    except OSError:  # the log's disk: Kafka answers KAFKA_STORAGE_ERROR, which the coordinator retries
        log.exception("%s marker of producer %d not written to %s-%d", marker.kind, marker.producer_id, *tp)
        entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return entry
    if replica is not None:
        waits.append((entry, replica.wait_for(offset + 1)))
    return entry


async def append_markers(cluster: Cluster, offsets: CommittedOffsets, markers: Sequence[MarkerEntry],
                         timeout_ms: int) -> list[dict[TP, ErrorCode]]:
    """Append every marker to each of its partitions as their leader and wait for their ISRs; each marker's
    error code by partition (NONE: written and replicated)."""
    waits: list[tuple[dict[str, Any], asyncio.Future[int]]] = []
    entries = [{tp: _append_one(cluster, marker, tp, waits) for tp in marker.partitions} for marker in markers]
    appended = [tp for by_partition in entries for tp, entry in by_partition.items() if not entry["error_code"]]
    if appended:
        cluster.notify_data(appended)  # the followers' fetches parked here take the markers now
    await wait_for_isr(waits, timeout_ms)
    if appended and waits:
        cluster.notify_data(appended)  # the high watermarks moved: read_committed fetches may read on
    results: list[dict[TP, ErrorCode]] = []
    for marker, by_partition in zip(markers, entries, strict=True):
        codes = {tp: ErrorCode(entry["error_code"]) for tp, entry in by_partition.items()}
        for (topic, index), code in codes.items():
            if topic == OFFSETS_TOPIC and code == ErrorCode.NONE:
                offsets.end_transaction(index, marker.producer_id, marker.commit)
        failed = {tp: code.name for tp, code in codes.items() if code}
        if failed:
            log.info("%s marker of producer %d (epoch %d, coordinator epoch %d) not written: %s", marker.kind,
                     marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, failed)
        results.append(codes)
    return results
