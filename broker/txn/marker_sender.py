"""Sending a transaction's markers: the coordinator's side of Kafka's TransactionMarkerChannelManager.

The transaction coordinator ends a prepared transaction by writing a commit or abort marker into every partition
the transaction wrote to, then its COMPLETE_* state. A ``MarkerSender`` does the writing and returns only once
every marker is written (and, on a cluster, replicated to its partition's ISR); when some cannot be written it
raises ``MarkerError`` and the coordinator keeps the transaction prepared and tries again later, as Kafka's
coordinator keeps retrying a marker until it is written.

``LocalMarkerSender`` is one node's: every partition is local. ``ClusterMarkerSender`` is a ZooKeeper cluster's:
the partitions are grouped by their current leader (the partition states this broker watches); those this broker
leads are appended here (txn/marker_append.py, the path WriteTxnMarkers takes), the others are sent to their
leader as WriteTxnMarkers over an inter-broker connection (replication/peer.py). As Kafka's
TransactionMarkerRequestCompletionHandler: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a partition without a leader and a
connection that fails are retried with the leaders as they are then; a partition whose topic the cluster no
longer has is skipped (Kafka: "likely deleted already"); INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED
end the sending at once (``MarkerError.fenced``: a newer coordinator or producer has taken over); other errors fail
the send. Kafka retries forever; here the retries stop after ``request.timeout.ms`` with MarkerError, and the
coordinator's periodic task sends again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from headwater.kafka.errors import ErrorCode

from ..config.broker_config import BrokerConfig
from ..group.offsets import CommittedOffsets
from ..replication.peer import PeerConnection, PeerError, connect_peer
from ..replication.state import NO_LEADER
from ..security.inter_broker import inter_broker_listener
from ..topics.cluster import Cluster
from .marker_append import MarkerEntry, append_markers
from .state import TxnMetadata

__all__ = ["GONE", "ClusterMarkerSender", "LeaderView", "LocalMarkerSender", "MarkerError", "MarkerSender",
           "marker_sender"]

log = logging.getLogger(__name__)

TP = tuple[str, int]
GONE = -2  # LeaderView.leader_of: the cluster has no such partition (its topic was deleted)
WRITE_TXN_MARKERS_VERSION = 1

# Kafka's TransactionMarkerRequestCompletionHandler: retried with the leaders as they are then
RETRIABLE = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                       ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})
# ... the transaction can be ignored: a newer producer epoch or coordinator has taken it over
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
# ... the producer could not have written there: nothing to end
DONE = frozenset({ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})

FIRST_BACKOFF, MAX_BACKOFF = 0.05, 1.0  # seconds between rounds of retries, doubling

# A partition's outcome in one round: an error code, or why it could not be sent (retried)
Outcome = ErrorCode | str
LocalAppend = Callable[[Sequence[MarkerEntry], int], Awaitable[list[dict[TP, ErrorCode]]]]


class MarkerError(Exception):
    """Some of a transaction's markers could not be written (already logged); the transaction stays prepared.
    ``fenced``: a partition refused the marker as older than its producer's last one (INVALID_PRODUCER_EPOCH,
    TRANSACTION_COORDINATOR_FENCED): sending it again cannot succeed."""

    def __init__(self, message: str, fenced: bool = False) -> None:
        super().__init__(message)
        self.fenced = fenced


class MarkerSender(Protocol):
    async def send(self, txn: TxnMetadata, commit: bool, coordinator_epoch: int) -> None:
        """Write ``txn``'s commit/abort marker to each of ``txn.partitions`` (a snapshot taken at the call) on its
        current leader, returning once every one is written and replicated; partitions of deleted topics are
        skipped with a warning; raises MarkerError after logging when some could not be written (the caller
        keeps the transaction prepared and retries)."""
        ...


def _marker(txn: TxnMetadata, commit: bool, coordinator_epoch: int, partitions: Sequence[TP]) -> MarkerEntry:
    return MarkerEntry(txn.producer_id, txn.producer_epoch, commit, coordinator_epoch, tuple(partitions))


def _describe(txn: TxnMetadata, marker: MarkerEntry) -> str:
    return (f"{marker.kind} markers of transactional id {txn.transactional_id} (producer {marker.producer_id}, "
            f"epoch {marker.producer_epoch}, coordinator epoch {marker.coordinator_epoch})")


def _named(outcomes: dict[TP, Outcome]) -> str:
    return ", ".join(f"{t}-{p}: {o.name if isinstance(o, ErrorCode) else o}" for (t, p), o in sorted(outcomes.items()))


def _settle(txn: TxnMetadata, marker: MarkerEntry, outcomes: dict[TP, Outcome], pending: set[TP],
            skip_unknown: bool) -> dict[TP, Outcome]:
    """Take one round's outcomes: the written partitions leave ``pending``; MarkerError for a fenced or
    unexpected error; the outcomes to retry. ``skip_unknown``: UNKNOWN_TOPIC_OR_PARTITION means deleted."""
    retry: dict[TP, Outcome] = {}
    for tp, outcome in outcomes.items():
        if outcome in DONE:
            pending.discard(tp)
        elif skip_unknown and outcome == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            log.warning("%s: %s-%d no longer exists; skipped", _describe(txn, marker), *tp)
            pending.discard(tp)
        elif outcome in FENCED:
            log.warning("%s refused (%s): a newer producer or coordinator has taken the transaction over; not sent "
                        "again", _describe(txn, marker), _named({tp: outcome}))
            raise MarkerError(f"{_describe(txn, marker)}: {_named({tp: outcome})}", fenced=True)
        elif isinstance(outcome, str) or outcome in RETRIABLE:
            retry[tp] = outcome
        else:
            log.error("%s: unexpected error %s from %s-%d", _describe(txn, marker), outcome.name, *tp)
            raise MarkerError(f"{_describe(txn, marker)}: {_named({tp: outcome})}")
    return retry


class LocalMarkerSender:
    """One node: every partition is this broker's, each marker a local append (txn/marker_append.py)."""

    def __init__(self, cluster: Cluster, offsets: CommittedOffsets) -> None:
        self.cluster = cluster
        self.offsets = offsets

    async def send(self, txn: TxnMetadata, commit: bool, coordinator_epoch: int) -> None:
        marker = _marker(txn, commit, coordinator_epoch, sorted(txn.partitions))
        if not marker.partitions:
            return
        try:
            [codes] = await append_markers(self.cluster, self.offsets, [marker],
                                           self.cluster.config.request_timeout_ms)
        except Exception as exc:
            log.exception("could not write the %s", _describe(txn, marker))
            raise MarkerError(f"{_describe(txn, marker)}: {exc}") from exc
        pending = set(marker.partitions)
        failed = _settle(txn, marker, dict(codes), pending, skip_unknown=True)
        if failed:
            log.warning("could not write the %s: %s", _describe(txn, marker), _named(failed))
            raise MarkerError(f"{_describe(txn, marker)}: {_named(failed)}")


class LeaderView(Protocol):
    """Where the cluster's partitions are led, as this broker knows it now."""

    def leader_of(self, topic: str, index: int) -> int:
        """The partition's leader; NO_LEADER (-1) while it has none; GONE when the cluster has no such partition."""
        ...

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        """(host, port) of the broker's inter-broker listener; None while it is not registered."""
        ...


class _MembershipView:
    """The LeaderView of this broker's ZooKeeper watches (cluster/topic_sync.py's partition states, the live
    brokers' registrations)."""

    def __init__(self, cluster: Cluster, listener: str) -> None:
        self.cluster = cluster
        self.listener = listener

    def leader_of(self, topic: str, index: int) -> int:
        membership = self.cluster.membership
        meta = membership.sync.topics.get(topic) if membership is not None else None
        if meta is None or index not in meta.assignment:
            return GONE
        state = meta.states.get(index)
        return NO_LEADER if state is None else state.leader

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        membership = self.cluster.membership
        registered = membership.view.brokers.get(broker_id) if membership is not None else None
        return registered.endpoints.get(self.listener) if registered is not None else None


class ClusterMarkerSender:
    """A ZooKeeper cluster's: each partition's marker on its current leader, retried as leaders move."""

    def __init__(self, broker_id: int, config: BrokerConfig, view: LeaderView, local: LocalAppend) -> None:
        self.broker_id = broker_id
        self.config = config
        self.view = view
        self.local = local  # appends the markers of partitions this broker leads
        self._peers: dict[int, PeerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}  # one request at a time on a peer connection

    @classmethod
    def for_cluster(cls, cluster: Cluster, offsets: CommittedOffsets) -> ClusterMarkerSender:
        """The sender of a cluster's broker: leaders from its watches, remote leaders on the inter-broker
        listener the replica fetchers use."""
        config = cluster.config
        return cls(config.node_id, config, _MembershipView(cluster, inter_broker_listener(config)),
                   functools.partial(append_markers, cluster, offsets))

    async def send(self, txn: TxnMetadata, commit: bool, coordinator_epoch: int) -> None:
        pending = set(txn.partitions)  # the snapshot: the caller's set may change while this waits
        everything = _marker(txn, commit, coordinator_epoch, sorted(pending))
        timeout = self.config.request_timeout_ms / 1000
        deadline = time.monotonic() + timeout
        backoff = FIRST_BACKOFF
        rounds = 0
        while pending:
            rounds += 1
            outcomes = await self._round(txn, commit, coordinator_epoch, pending, deadline)
            retry = _settle(txn, everything, outcomes, pending, skip_unknown=False)
            if not pending:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning("could not write the %s within request.timeout.ms=%d (%d rounds): %s",
                            _describe(txn, everything), self.config.request_timeout_ms, rounds, _named(retry))
                raise MarkerError(f"{_describe(txn, everything)}: {_named(retry)}")
            log.debug("%s: retrying %s", _describe(txn, everything), _named(retry))
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _round(self, txn: TxnMetadata, commit: bool, coordinator_epoch: int, pending: set[TP],
                     deadline: float) -> dict[TP, Outcome]:
        """One try of every pending partition, on its leader as known now; each partition's outcome."""
        outcomes: dict[TP, Outcome] = {}
        by_leader: dict[int, list[TP]] = {}
        for tp in sorted(pending):
            leader = self.view.leader_of(*tp)
            if leader == GONE:
                log.warning("%s: the cluster no longer has %s-%d (its topic is deleted); skipped",
                            _describe(txn, _marker(txn, commit, coordinator_epoch, [tp])), *tp)
                outcomes[tp] = ErrorCode.NONE
            elif leader < 0:
                outcomes[tp] = "no leader"
            else:
                by_leader.setdefault(leader, []).append(tp)
        sends = [self._send_to(leader, _marker(txn, commit, coordinator_epoch, tps), deadline)
                 for leader, tps in by_leader.items()]
        for answered in await asyncio.gather(*sends):
            outcomes.update(answered)
        return outcomes

    async def _send_to(self, leader: int, marker: MarkerEntry, deadline: float) -> dict[TP, Outcome]:
        if leader == self.broker_id:
            [local] = await self.local([marker], self.config.request_timeout_ms)
            return dict[TP, Outcome](local)
        lock = self._locks.setdefault(leader, asyncio.Lock())
        async with lock:
            try:
                answer = await self._call(leader, marker, deadline)
            except (OSError, EOFError, TimeoutError, PeerError) as exc:
                self._disconnect(leader)
                why = f"broker {leader}: {exc or type(exc).__name__}"
                return dict.fromkeys(marker.partitions, why)
        codes: dict[TP, Outcome] = dict.fromkeys(marker.partitions, f"broker {leader} did not answer for it")
        for result in answer.markers:
            if result.producer_id != marker.producer_id:
                continue
            for topic in result.topics:
                for p in topic.partitions:
                    if (topic.name, p.partition_index) in codes:
                        codes[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return codes

    async def _call(self, leader: int, marker: MarkerEntry, deadline: float) -> Any:
        connection = self._peers.get(leader)
        wait = max(deadline - time.monotonic(), 0.0) + 1.0  # the leader's own ISR wait ends with REQUEST_TIMED_OUT
        if connection is None:
            address = self.view.address_of(leader)
            if address is None:
                raise PeerError("not registered on the inter-broker listener")
            connection = await connect_peer(self.config, *address, f"txn-marker-sender-{self.broker_id}",
                                            min(wait, self.config.request_timeout_ms / 1000))
            self._peers[leader] = connection
        topics: dict[str, list[int]] = {}
        for topic, index in marker.partitions:
            topics.setdefault(topic, []).append(index)
        entry = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest[WRITE_TXN_MARKERS_VERSION](markers=[entry(
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch, transaction_result=marker.commit,
            coordinator_epoch=marker.coordinator_epoch,
            topics=[entry.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()])])
        return await connection.call(request, WriteTxnMarkersResponse, wait)

    def _disconnect(self, broker_id: int) -> None:
        connection = self._peers.pop(broker_id, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        """Close the connections to the other brokers (at the broker's stop)."""
        for broker_id in list(self._peers):
            self._disconnect(broker_id)


def marker_sender(cluster: Cluster, offsets: CommittedOffsets) -> LocalMarkerSender | ClusterMarkerSender:
    """The broker's marker sender: a cluster's when it runs with ``zookeeper.connect``, else one node's."""
    if not cluster.config.zookeeper_connect:
        return LocalMarkerSender(cluster, offsets)
    return ClusterMarkerSender.for_cluster(cluster, offsets)
