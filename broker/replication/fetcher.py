"""A follower's fetching from one leader broker (Kafka's ReplicaFetcherThread / AbstractFetcherThread, as one
asyncio task): one connection to the leader's inter-broker listener (peer.py), one Fetch with ``replica_id`` =
this broker's id for every partition that broker leads for this one, again and again, in a fetch session
(fetch_sessions.py, KIP-227): after the first, full, Fetch each carries only the partitions whose fetch offset,
log start or leader epoch changed, and the leader answers only the partitions with something new.

Before a partition's first fetch under a new leader epoch, its log is truncated to where it agrees with the
leader's: the leader answers OffsetForLeaderEpoch for this log's latest epoch with the end offset of that epoch
in its own log, and this log is cut there (AbstractFetcherThread.getOffsetTruncationState). Fetched batches are
appended as the leader wrote them (offsets, partition leader epochs and CRCs unchanged, each one checked); the
leader's high watermark is taken as far as this log reaches. A partition whose fetch fails waits
``replica.fetch.backoff.ms`` and is fetched again; the others go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import InvalidBatch, iter_batches, validate_batch

from ..log import PartitionLog
from ..log.errors import LogClosed
from ..log.fd_cache import DescriptorCache
from ..log.flusher import PartitionFlusher
from ..log.recovery import LOG_START_OFFSET_FILE, write_offset_file
from ..topics.producer_state import rebuild_after_truncation, replay
from .fetch_sessions import FetchSessionHandler
from .peer import PeerAuthenticationError, PeerConnection, PeerError, connect_peer

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig
    from .replica import PartitionReplica

__all__ = ["LeaderFetcher", "ReplicationError"]

log = logging.getLogger(__name__)

FETCH_VERSION = 11  # current_leader_epoch (v9+), the highest the broker serves
EPOCH_VERSION = 3  # OffsetForLeaderEpoch with replica_id
UNDEFINED = -1


class ReplicationError(Exception):
    """A leader's answer this follower cannot apply (logged; the partition backs off and fetches again)."""


class LeaderFetcher:
    """Fetches every partition broker ``leader_id`` leads for this broker; ``address`` says where it listens
    (None while it is not registered)."""

    def __init__(self, leader_id: int, broker_id: int, config: BrokerConfig,
                 address: Callable[[int], tuple[str, int] | None], fd_cache: DescriptorCache | None = None) -> None:
        self.leader_id = leader_id
        self.broker_id = broker_id
        self.config = config
        self._address = address
        self._fd_cache = fd_cache  # the broker's segment descriptors, for a log started afresh (_start_at)
        self.replicas: dict[tuple[str, int], PartitionReplica] = {}
        self._retry_at: dict[tuple[str, int], float] = {}  # partitions backing off after a failed fetch
        self._changed = asyncio.Event()
        self._connection: PeerConnection | None = None
        self._session = FetchSessionHandler()  # the fetch session with the leader (KIP-227)
        self._task: asyncio.Task[None] | None = None

    # -- the partitions followed ---------------------------------------------------------

    def add(self, replica: PartitionReplica) -> None:
        """Follow ``replica`` (again: a new leader epoch truncates first)."""
        replica.truncating = True
        self.replicas[replica.key] = replica
        self._retry_at.pop(replica.key, None)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                name=f"replica fetcher from {self.leader_id}")

    def remove(self, key: tuple[str, int]) -> None:
        self.replicas.pop(key, None)
        self._retry_at.pop(key, None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._disconnect()

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.config.replica_fetch_backoff_ms / 1000
        while True:
            ready = self._ready()
            if not ready:
                self._changed.clear()
                wait = min((at for at in self._retry_at.values()), default=time.monotonic() + 60) - time.monotonic()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(wait, 0.01)):
                        await self._changed.wait()
                continue
            try:
                connection = await self._connect()
                truncating = [r for r in ready if r.truncating]
                if truncating:
                    await self._truncate(connection, truncating)
                    ready = [r for r in ready if not r.truncating]
                if ready:
                    await self._fetch(connection, ready)
            except asyncio.CancelledError:
                raise
            except PeerAuthenticationError as exc:  # a wrong password or certificate: the operator must act
                log.error("replica fetcher from broker %d: %s; again in %g s", self.leader_id, exc, backoff)
                self._disconnect()
                await asyncio.sleep(backoff)
            except (OSError, EOFError, TimeoutError, ReplicationError, PeerError) as exc:
                log.warning("replica fetcher from broker %d: %s; again in %g s", self.leader_id,
                            exc or type(exc).__name__, backoff)
                self._disconnect()
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("replica fetcher from broker %d failed; again in %g s", self.leader_id, backoff)
                self._disconnect()
                await asyncio.sleep(backoff)

    def _ready(self) -> list[PartitionReplica]:
        now = time.monotonic()
        for key in [k for k, at in self._retry_at.items() if at <= now]:
            del self._retry_at[key]
        return [r for k, r in self.replicas.items() if k not in self._retry_at]

    def _back_off(self, key: tuple[str, int]) -> None:
        self._retry_at[key] = time.monotonic() + self.config.replica_fetch_backoff_ms / 1000

    async def _connect(self) -> PeerConnection:
        if self._connection is not None:
            return self._connection
        address = self._address(self.leader_id)
        if address is None:
            raise ReplicationError(f"broker {self.leader_id} is not registered on the inter-broker listener")
        host, port = address
        self._connection = await connect_peer(self.config, host, port, f"replica-fetcher-{self.broker_id}",
                                              self.config.replica_socket_timeout_ms / 1000)
        log.info("broker %d fetching from broker %d at %s:%d (listener %s, %s)", self.broker_id, self.leader_id,
                 host, port, self._connection.security.listener, self._connection.security.protocol)
        return self._connection

    def _disconnect(self) -> None:
        self._session.reset()  # a new connection starts a new fetch session
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _timeout(self) -> float:
        return (self.config.replica_socket_timeout_ms + self.config.replica_fetch_wait_max_ms) / 1000

    # -- truncation ----------------------------------------------------------------------

    async def _truncate(self, connection: PeerConnection, replicas: list[PartitionReplica]) -> None:
        """Cut each log back to where it agrees with the leader's (OffsetForLeaderEpoch for its latest epoch)."""
        asked: dict[str, list[Any]] = {}
        latest: dict[tuple[str, int], int] = {}
        for r in replicas:
            epoch = r.partition.log.leader_epochs.latest_epoch
            if epoch is None or epoch < 0:  # an empty log (or one written before epochs): nothing to cut
                r.truncating = False
                continue
            latest[r.key] = epoch
            asked.setdefault(r.topic, []).append(
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=r.partition.index, current_leader_epoch=r.state.leader_epoch, leader_epoch=epoch))
        if not asked:
            return
        topics = [OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in asked.items()]
        request = OffsetForLeaderEpochRequest[EPOCH_VERSION](replica_id=self.broker_id, topics=topics)
        response = await connection.call(request, OffsetForLeaderEpochResponse, self._timeout())
        for topic in response.topics:
            for p in topic.partitions:
                replica = self.replicas.get((topic.topic, p.partition))
                if replica is None or not replica.truncating:
                    continue  # no longer followed from here
                if p.error_code:
                    log.warning("%s-%d: OffsetForLeaderEpoch from broker %d answered %s; again after backoff",
                                topic.topic, p.partition, self.leader_id, ErrorCode(p.error_code).name)
                    self._back_off(replica.key)
                    continue
                self._truncate_one(replica, latest[replica.key], p.leader_epoch, p.end_offset)

    def _truncate_one(self, replica: PartitionReplica, asked_epoch: int, leader_epoch: int, leader_end: int) -> None:
        plog = replica.partition.log
        end = plog.log_end_offset
        if leader_epoch == UNDEFINED or leader_end == UNDEFINED:
            target = min(replica.high_watermark, end)  # the leader knows no such epoch: keep what was committed
        else:
            epoch, own_end = plog.leader_epochs.end_offset_for(leader_epoch)
            if epoch == leader_epoch:
                target = min(leader_end, own_end)
            elif epoch == UNDEFINED:
                target = min(leader_end, end)
            else:  # this log's epoch before the leader's answer: cut to it, then the next round asks again
                target = min(own_end, end)
                if target < end:
                    self._cut(replica, target)
                return
        if target < end:
            self._cut(replica, target)
        replica.truncating = False
        log.info("%s-%d: follows broker %d from offset %d (asked epoch %d: the leader's epoch %d ends at %d)",
                 replica.topic, replica.partition.index, self.leader_id, plog.log_end_offset, asked_epoch,
                 leader_epoch, leader_end)

    def _cut(self, replica: PartitionReplica, offset: int) -> None:
        partition = replica.partition
        plog = partition.log
        log.warning("%s-%d: truncating the log from %d to %d to agree with leader broker %d", replica.topic,
                    partition.index, plog.log_end_offset, offset, self.leader_id)
        plog.truncate_to(offset)
        partition.producers = rebuild_after_truncation(plog)
        replica.truncated()

    def _start_at(self, replica: PartitionReplica, offset: int) -> None:
        """This log ends before the leader's log start (retention or DeleteRecords moved it past): empty it and
        start it at ``offset``, as Kafka's truncateFullyAndStartAt. The log is closed and opened again with its
        log start persisted beyond its end, which recovery answers with an empty log at that offset."""
        partition = replica.partition
        old = partition.log
        log.warning("%s-%d: this replica ends at %d, before leader broker %d's log start %d: emptied, it starts "
                    "there", replica.topic, partition.index, old.log_end_offset, self.leader_id, offset)
        old.close()
        write_offset_file(old.directory / LOG_START_OFFSET_FILE, offset)
        plog = PartitionLog.open(old.directory, old.config, fd_cache=self._fd_cache)
        plog.leader_epochs.truncate_from_end(0)  # the epochs of the records gone
        partition.log = plog
        partition.flusher = PartitionFlusher(plog)
        partition.producers = rebuild_after_truncation(plog)
        replica.high_watermark = offset
        replica.truncating = False

    # -- fetching ------------------------------------------------------------------------

    async def _fetch(self, connection: PeerConnection, replicas: list[PartitionReplica]) -> None:
        """One Fetch of ``replicas`` in this fetcher's session with the leader (fetch_sessions.py): a full one
        opening it, then incremental ones carrying only the partitions whose fetch data changed."""
        config = self.config
        Topic = FetchRequest.FetchTopic
        wanted = {r.key: (r.partition.log.log_end_offset, r.partition.log.log_start_offset, r.state.leader_epoch,
                          config.replica_fetch_max_bytes) for r in replicas}
        session = self._session
        send, forget = session.build(wanted)
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), (offset, log_start, epoch, max_bytes) in send.items():
            by_topic.setdefault(topic, []).append(Topic.FetchPartition(
                partition=index, current_leader_epoch=epoch, fetch_offset=offset, log_start_offset=log_start,
                partition_max_bytes=max_bytes))
        forgotten: dict[str, list[int]] = {}
        for topic, index in forget:
            forgotten.setdefault(topic, []).append(index)
        sent = {r.key: r for r in replicas}
        request = FetchRequest[FETCH_VERSION](
            replica_id=self.broker_id, max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes, max_bytes=config.replica_fetch_response_max_bytes,
            isolation_level=0, session_id=session.session_id, session_epoch=session.epoch, rack_id="",
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()],
            topics=[Topic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        response = await connection.call(request, FetchResponse, self._timeout())
        if not session.answered(response.error_code, response.session_id):
            log.info("broker %d answered %s to fetch session %d: a full Fetch next", self.leader_id,
                     ErrorCode(response.error_code).name, request.session_id)
            return
        if response.error_code:
            raise ReplicationError(f"Fetch answered {ErrorCode(response.error_code).name}")
        for topic in response.responses:
            for p in topic.partitions:
                key = (topic.topic, p.partition_index)
                replica = sent.get(key)
                if replica is None or self.replicas.get(key) is not replica or replica.truncating:
                    continue  # handed elsewhere, or a new epoch, while the fetch was out
                try:
                    self._apply(replica, p)
                except LogClosed:  # the partition was removed from this broker meanwhile
                    self.remove(key)

    def _apply(self, replica: PartitionReplica, p: Any) -> None:
        code = p.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and p.log_start_offset > replica.partition.log.log_end_offset:
            self._start_at(replica, p.log_start_offset)
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            log.warning("%s-%d: offset %d is out of range on leader broker %d; truncating again", replica.topic,
                        replica.partition.index, replica.partition.log.log_end_offset, self.leader_id)
            replica.truncating = True
            self._back_off(replica.key)
            return
        if code:
            # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH...: the controller's next state
            # for the partition settles it; until then fetch it again after the backoff
            log.info("%s-%d: fetch from broker %d answered %s", replica.topic, replica.partition.index,
                     self.leader_id, ErrorCode(code).name)
            self._back_off(replica.key)
            return
        data = p.records
        if data:
            try:
                append_fetched(replica, data)
            except ReplicationError as exc:
                log.error("%s-%d: %s", replica.topic, replica.partition.index, exc)
                self._back_off(replica.key)
                return
        replica.follow_high_watermark(p.high_watermark)
        # Kafka's FetcherLagMetrics (ReplicaFetcherManager's MaxLag is the largest)
        replica.fetch_lag = max(0, p.high_watermark - replica.partition.log.log_end_offset)


def append_fetched(replica: PartitionReplica, data: bytes | memoryview) -> int:
    """Append the leader's batches in ``data`` as they are; how many. Batches this log has already are
    skipped; each other one must pass its checks (CRC included) and start at or after this log's end: after it
    where the leader's cleaner removed the batches between (a compacted log's offset gaps, which a follower's
    log keeps as the leader has them, as Kafka's appendAsFollower). One that starts before the end while ending
    after it means the logs diverged."""
    partition = replica.partition
    plog = partition.log
    start = plog.log_end_offset
    count = 0
    view = memoryview(data)
    for pos, header in iter_batches(view):
        end = plog.log_end_offset
        if header.base_offset + header.last_offset_delta < end:
            continue
        if header.base_offset < end:
            raise ReplicationError(f"the leader's batch at offsets {header.base_offset}-{header.last_offset} "
                                   f"overlaps this log's end {end}")
        batch = bytearray(view[pos : pos + header.size])
        try:
            validate_batch(batch, header=header, compacted=True)
        except InvalidBatch as exc:
            raise ReplicationError(f"the leader's batch at offset {header.base_offset} is damaged: {exc}") from None
        plog.append_as_follower(batch, header)
        count += 1
    if count:
        replay(partition.producers, plog, start)  # idempotent producers and transactions, as the leader has them
    return count


