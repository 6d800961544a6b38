"""The transaction coordinator, as Kafka's TransactionCoordinator and TransactionStateManager.

Every transactional id this broker coordinates, with its producer id and epoch and its transaction's state
and partitions. Each change is a transition as Kafka makes it: the target state is written to
``__transaction_state`` (txn/store.py) while the id's ``pending`` state refuses any other transition
(CONCURRENT_TRANSACTIONS), and it becomes the id's state only once the write is replicated. On one node the
write is a local append; in a ZooKeeper cluster it is answered once the partition's ISR has it.

Which ids: on one node every id (the topic is replayed at start). In a cluster the ids of the
``__transaction_state`` partitions this broker leads: the ReplicaManager tells the coordinator
(replication/leadership.py) when it comes to lead one, and it loads that partition's ids, whose coordinator
epoch is the partition's leader epoch; when it stops leading one it unloads them. Requests for other ids answer
NOT_COORDINATOR, and clients find the coordinator again (FindCoordinator answers the partition's leader).

EndTxn writes PREPARE_COMMIT / PREPARE_ABORT, then the MarkerSender writes a marker into every partition of the
transaction (txn/marker_sender.py), then COMPLETE_* is written. In a cluster the answer comes once the prepare
is replicated, as in Kafka; on one node once all three are written (the markers are local appends, so waiting
costs little and a client's next transaction never races its previous one's markers). A transaction found
prepared (loaded after a move or a crash, or whose markers failed) has its markers sent again when loaded and
by the periodic task.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode

from ..config.broker_config import BrokerConfig
from ..errors import BrokerError
from ..group.offsets import CommittedOffsets
from ..group.store import OFFSETS_TOPIC
from ..replication.epochs import current_leader_epoch
from ..topics.cluster import Cluster
from ..topics.producer_state import ProducerIdManager
from ..topics.topic import Partition
from .state import COMPLETE, PREPARED, TP, TxnMetadata, TxnState
from .store import TRANSACTION_STATE_TOPIC, TxnStore, txn_partition

if TYPE_CHECKING:  # marker_sender.py imports the inter-broker client, which imports the server and its APIs
    from .marker_sender import MarkerSender

__all__ = ["TransactionCoordinator"]

log = logging.getLogger(__name__)

MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch this close to it gets a new producer id instead of a bump
# what a state write that failed is answered with (Kafka's TransactionStateManager.appendTransactionToLog)
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_COORDINATOR,
}


def _now() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(self, cluster: Cluster, config: BrokerConfig, producer_ids: ProducerIdManager,
                 offsets: CommittedOffsets, markers: MarkerSender) -> None:
        self.cluster = cluster
        self.config = config
        self.producer_ids = producer_ids
        self.offsets = offsets
        self.markers = markers  # txn/marker_sender.py's: one node's, or a cluster's
        self.store = TxnStore(cluster, config)
        self.txns: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, str] = {}  # producer id -> transactional id, for Produce's check
        # a ZooKeeper cluster's coordinator: the __transaction_state partitions this broker leads, each with its
        # coordinator epoch (the partition's leader epoch); None on one node, which coordinates every id
        self.led: dict[int, int] | None = {} if config.zookeeper_connect else None
        self._completing: dict[str, asyncio.Task[None]] = {}  # ids whose markers are being sent
        self.failures = 0  # markers, state writes, expirations or periodic rounds that failed (each logged); retried

    # -- lifecycle --------------------------------------------------------------------------------------

    async def load(self) -> None:
        """One node: replay ``__transaction_state`` and complete the transactions found prepared. In a cluster
        nothing: each partition loads when this broker comes to lead it (``became_leader``)."""
        if self.led is not None:
            return
        self.txns = self.store.load()
        self.by_producer = {t.producer_id: tid for tid, t in self.txns.items()}
        await self.complete_prepared()

    def stop(self) -> None:
        """Stop sending markers (a prepared transaction stays so in the log: completed by its next coordinator)
        and close the marker sender's connections to the other brokers."""
        for task in self._completing.values():
            task.cancel()
        close = getattr(self.markers, "close", None)  # a cluster's sender holds connections
        if callable(close):
            close()

    async def run(self) -> None:
        """The periodic task: markers of prepared transactions sent again, timed-out transactions aborted, idle
        ids expired. A failed round is logged and counted, and the next one runs."""
        interval = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        expire_every = self.config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000
        next_expiry = time.monotonic() + expire_every
        while True:
            try:
                await self.complete_prepared()
                await self.abort_timed_out()
                if time.monotonic() >= next_expiry:
                    await self.remove_expired()
                    next_expiry = time.monotonic() + expire_every
            except Exception:
                self.failures += 1
                log.exception("the transaction coordinator's periodic round failed; next in %.1f s", interval)
            await asyncio.sleep(interval)

    # -- which ids this broker coordinates ---------------------------------------------------------------

    def coordinator_epoch(self, tid: str) -> int | None:
        """The coordinator epoch of ``tid``'s partition while this broker coordinates it (0 on one node), else
        None."""
        if self.led is None:
            return 0
        count = self.store.partition_count()
        return self.led.get(txn_partition(tid, count)) if count else None

    def coordinates(self, tid: str) -> bool:
        return self.coordinator_epoch(tid) is not None

    def became_leader(self, topic: str, partition: Partition) -> None:
        """Load the ids of a ``__transaction_state`` partition this broker now leads (replication/leadership.py's
        listener); their prepared transactions are completed."""
        if topic != TRANSACTION_STATE_TOPIC or self.led is None:
            return
        loaded = self.store.load_partitions([partition])
        for tid, txn in loaded.items():
            stale = self.txns.pop(tid, None)  # never expected: unloaded on resigning
            if stale is not None:
                self.by_producer.pop(stale.producer_id, None)
            self.txns[tid] = txn
            self.by_producer[txn.producer_id] = tid
        self.led[partition.index] = current_leader_epoch(partition)
        log.info("coordinating the transactional ids of %s-%d (coordinator epoch %d, %d loaded)",
                 TRANSACTION_STATE_TOPIC, partition.index, self.led[partition.index], len(loaded))
        for txn in loaded.values():
            if txn.state in PREPARED:
                self._complete_soon(txn)

    def resigned(self, topic: str, partition: Partition) -> None:
        """Unload the ids of a ``__transaction_state`` partition this broker no longer leads: their requests
        answer NOT_COORDINATOR, and writes in flight for them end so."""
        if topic != TRANSACTION_STATE_TOPIC or self.led is None:
            return
        self.led.pop(partition.index, None)
        count = self.store.partition_count()
        gone = [tid for tid in self.txns if count == 0 or txn_partition(tid, count) == partition.index]
        for tid in gone:
            self.by_producer.pop(self.txns.pop(tid).producer_id, None)
            completing = self._completing.pop(tid, None)
            if completing is not None:  # the partition's new leader sends its markers again
                completing.cancel()
        log.info("no longer coordinating the transactional ids of %s-%d (%d unloaded)", TRANSACTION_STATE_TOPIC,
                 partition.index, len(gone))

    # -- transitions ----------------------------------------------------------------------------------

    async def _write(self, txn: TxnMetadata, target: TxnMetadata | None) -> ErrorCode:
        """Move ``txn`` to ``target`` (None: expire it, a tombstone): written, replicated, then applied, with
        ``txn.pending`` refusing other transitions meanwhile. The error to answer with when it could not be."""
        tid = txn.transactional_id
        epoch = self.coordinator_epoch(tid)
        if epoch is None:
            return ErrorCode.NOT_COORDINATOR
        if txn.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if target is not None:
            target.last_update_ms = _now()
        txn.pending = TxnState.DEAD if target is None else target.state
        try:
            code = await self.store.replicated(tid, self.store.append(tid, target))
        except BrokerError as exc:
            code = exc.code
        finally:
            txn.pending = None
        if not code and (self.coordinator_epoch(tid) != epoch or self.txns.get(tid) is not txn):
            code = ErrorCode.NOT_COORDINATOR  # the partition's leadership moved while the write waited
        if code:
            self.failures += 1
            answer = _WRITE_ERRORS.get(ErrorCode(code), ErrorCode.UNKNOWN_SERVER_ERROR)
            log.warning("transactional id %s: the write of its state %s failed (%s); answered %s", tid,
                        "(expired)" if target is None else target.state.kafka_name, ErrorCode(code).name, answer.name)
            return answer
        if target is None:
            del self.txns[tid]
            self.by_producer.pop(txn.producer_id, None)
        else:
            txn.apply(target)
        return ErrorCode.NONE

    async def _end(self, txn: TxnMetadata, commit: bool, fence: bool = False) -> ErrorCode:
        """Prepare ``txn``'s end, then complete it: on one node before returning, in a cluster in the
        background (Kafka answers EndTxn once the prepare is written). ``fence`` first bumps the epoch (an abort
        the producer did not ask for: its next request is fenced, and the markers carry the new epoch)."""
        target = txn.copy()
        if fence and target.producer_epoch < MAX_EPOCH - 1:
            target.last_producer_epoch = target.producer_epoch
            target.producer_epoch += 1
        target.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        code = await self._write(txn, target)
        if code:
            return code
        completion = self._complete_soon(txn)
        if self.led is None:
            await asyncio.shield(completion)  # the request going away does not stop the markers
        return ErrorCode.NONE

    def _complete_soon(self, txn: TxnMetadata) -> asyncio.Task[None]:
        """The task sending ``txn``'s markers and writing its COMPLETE_* (one at a time per id)."""
        tid = txn.transactional_id
        task = self._completing.get(tid)
        if task is None:
            task = self._completing[tid] = asyncio.get_running_loop().create_task(self._complete(txn))
            task.add_done_callback(lambda done: self._completed(tid, done))
        return task

    def _completed(self, tid: str, task: asyncio.Task[None]) -> None:
        if self._completing.get(tid) is task:
            del self._completing[tid]
        if not task.cancelled() and task.exception() is not None:
            self.failures += 1
            log.error("completing the transaction of %s failed; retried by the periodic task", tid,
                      exc_info=task.exception())

    async def _complete(self, txn: TxnMetadata) -> None:
        tid = txn.transactional_id
        epoch = self.coordinator_epoch(tid)
        if epoch is None or txn.state not in PREPARED or self.txns.get(tid) is not txn:
            return
        commit = txn.state == TxnState.PREPARE_COMMIT
        try:
            await self.markers.send(txn.copy(), commit, epoch)
        except Exception as exc:  # MarkerError, logged by the sender; the prepare is durable
            self.failures += 1
            log.warning("transactional id %s stays %s (%s): its markers are sent again every "
                        "transaction.abort.timed.out.transaction.cleanup.interval.ms", tid, txn.state.kafka_name, exc)
            return
        target = txn.copy()
        target.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        target.partitions = set()
        target.start_ms = -1
        await self._write(txn, target)  # a failure is logged and counted; the periodic task sends again

    # -- periodic work --------------------------------------------------------------------------------

    async def complete_prepared(self) -> None:
        """Send the markers of every prepared transaction again and complete it."""
        tasks = [self._complete_soon(txn) for txn in list(self.txns.values()) if txn.state in PREPARED]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)  # failures: counted by _completed

    async def abort_timed_out(self) -> list[str]:
        """Abort every ongoing transaction past its timeout, bumping the epoch so its producer is fenced."""
        now = _now()
        aborted = []
        for tid, txn in list(self.txns.items()):
            if txn.state == TxnState.ONGOING and txn.pending is None and txn.start_ms + txn.timeout_ms < now:
                log.info("aborting the transaction of %s (producer %d, epoch %d): open for %d ms, past its "
                         "transaction.timeout.ms %d", tid, txn.producer_id, txn.producer_epoch, now - txn.start_ms,
                         txn.timeout_ms)
                if await self._end(txn, commit=False, fence=True) == ErrorCode.NONE:
                    aborted.append(tid)
        return aborted

    async def remove_expired(self) -> None:
        """``transactional.id.expiration.ms``: forget ids idle that long with no transaction open."""
        cutoff = _now() - self.config.transactional_id_expiration_ms
        for tid, txn in list(self.txns.items()):
            if txn.state in COMPLETE and txn.pending is None and txn.last_update_ms < cutoff:
                if await self._write(txn, None) == ErrorCode.NONE:
                    log.info("expired transactional id %s: idle past transactional.id.expiration.ms", tid)

    # -- InitProducerId -------------------------------------------------------------------------------

    async def init_producer(self, tid: str, timeout_ms: int, producer_id: int = -1,
                            producer_epoch: int = -1) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): a new epoch for ``tid``, aborting its open transaction (KIP-360:
        ``producer_id``/``producer_epoch`` >= 0 are the caller's current ones, which must still be valid)."""
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        if not self.coordinates(tid):
            return ErrorCode.NOT_COORDINATOR, -1, -1
        txn = self.txns.get(tid)
        if txn is None:  # epoch -1 until its first write: the bump below makes it 0 (Kafka's new metadata)
            txn = self.txns[tid] = TxnMetadata(tid, self.producer_ids.next_id(), -1, timeout_ms)
            self.by_producer[txn.producer_id] = tid
        elif producer_id >= 0 and (producer_id != txn.producer_id
                                   or producer_epoch not in (txn.producer_epoch, txn.last_producer_epoch)):
            return ErrorCode.PRODUCER_FENCED, -1, -1
        if txn.pending is not None or txn.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if txn.state == TxnState.ONGOING:  # the older producer's transaction: aborted, that producer fenced
            code = await self._end(txn, commit=False, fence=True)
            if code:
                return code, -1, -1
            if txn.state != TxnState.COMPLETE_ABORT:
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1  # its markers are on their way: the client retries
        target = txn.copy()
        if target.producer_epoch >= MAX_EPOCH - 1:
            target.producer_id, target.producer_epoch, target.last_producer_epoch = self.producer_ids.next_id(), 0, -1
        else:
            target.last_producer_epoch = target.producer_epoch
            target.producer_epoch += 1
        target.timeout_ms = timeout_ms
        target.state = TxnState.EMPTY
        target.partitions = set()
        target.start_ms = -1
        old_producer = txn.producer_id
        code = await self._write(txn, target)
        if code:
            return code, -1, -1
        if txn.producer_id != old_producer:
            self.by_producer.pop(old_producer, None)
            self.by_producer[txn.producer_id] = tid
        return ErrorCode.NONE, txn.producer_id, txn.producer_epoch

    # -- the transaction's partitions -----------------------------------------------------------------

    def _producer_error(self, tid: str, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        if not self.coordinates(tid):
            return ErrorCode.NOT_COORDINATOR
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending is not None or txn.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return None

    async def add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TP]) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the transaction (starting it)."""
        error = self._producer_error(tid, producer_id, producer_epoch)
        if error is not None:
            return error
        txn = self.txns[tid]
        new = set(partitions) - txn.partitions
        if txn.state == TxnState.ONGOING and not new:
            return ErrorCode.NONE
        target = txn.copy()
        if target.state != TxnState.ONGOING:
            target.state = TxnState.ONGOING
            target.start_ms = _now()
        target.partitions |= new
        return await self._write(txn, target)

    def verify_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TP]) -> dict[TP, ErrorCode]:
        """KIP-890 verification (AddPartitionsToTxn v4 verify_only): whether each partition is in the
        producer's ongoing transaction (INVALID_TXN_STATE when not)."""
        error = self._producer_error(tid, producer_id, producer_epoch)
        txn = self.txns.get(tid)
        return {tp: error if error is not None
                else ErrorCode.NONE if txn is not None and txn.state == TxnState.ONGOING and tp in txn.partitions
                else ErrorCode.INVALID_TXN_STATE for tp in partitions}

    def offsets_partition(self, group_id: str) -> TP:
        return OFFSETS_TOPIC, self.offsets.store.partition_for(group_id)

    def txn_offset_commit_error(self, tid: str, producer_id: int, producer_epoch: int,
                                group_id: str) -> ErrorCode | None:
        """Whether TxnOffsetCommit may hold offsets for this producer: its transaction is open and has the
        group's offsets partition (AddOffsetsToTxn came first). In a cluster the group's coordinator checks
        this only when it coordinates the transactional id too; elsewhere, as Kafka's group coordinator, it
        checks the producer's epoch against the ``__consumer_offsets`` partition's producer state (a marker of a
        newer epoch there: INVALID_PRODUCER_EPOCH, a fenced zombie's offsets)."""
        if self.led is not None and not self.coordinates(tid):
            try:
                partition = self.cluster.partition(*self.offsets_partition(group_id))
            except BrokerError:  # not a replica here: the group check answers NOT_COORDINATOR
                return None
            entry = partition.producers.producers.get(producer_id)
            return ErrorCode.INVALID_PRODUCER_EPOCH if entry is not None and producer_epoch < entry.epoch else None
        error = self._producer_error(tid, producer_id, producer_epoch)
        if error is not None:
            return error
        txn = self.txns[tid]
        if txn.state != TxnState.ONGOING or self.offsets_partition(group_id) not in txn.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return None

    def check_produce(self, producer_id: int, producer_epoch: int, topic: str, index: int) -> ErrorCode:
        """A transactional batch may be appended only for a partition of its producer's ongoing transaction,
        at the producer's current epoch (Kafka's KIP-890 verification, done here by the broker itself). In a
        cluster the partition's leader verifies a producer whose transactional id it coordinates; another's
        batches are checked by the partition's producer state alone (an older epoch fenced), as Kafka's
        brokers do without ``transaction.partition.verification.enable``."""
        tid = self.by_producer.get(producer_id)
        txn = self.txns.get(tid) if tid is not None else None
        if txn is None and self.led is not None:
            return ErrorCode.NONE
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_TXN_STATE
        if producer_epoch != txn.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if txn.state != TxnState.ONGOING or (topic, index) not in txn.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # -- EndTxn ---------------------------------------------------------------------------------------

    async def end_transaction(self, tid: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        error = self._producer_error(tid, producer_id, producer_epoch)
        if error is not None:
            return error
        txn = self.txns[tid]
        if txn.state == TxnState.ONGOING:
            return await self._end(txn, commit)
        if txn.state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return ErrorCode.NONE  # a retry of the request that ended it
        return ErrorCode.INVALID_TXN_STATE

    # -- DescribeTransactions / ListTransactions -----------------------------------------------------

    def describe(self, tid: str) -> TxnMetadata | None:
        return self.txns.get(tid)

    def list_transactions(self, states: list[TxnState], producer_ids: list[int], duration_ms: int = -1,
             pattern: re.Pattern[str] | None = None) -> list[TxnMetadata]:
        """KIP-664 (and KIP-994's duration and KIP-1152's id pattern): every filter given must match."""
        now = _now()
        return [t for t in self.txns.values()
                if (not states or t.state in states)
                and (not producer_ids or t.producer_id in producer_ids)
                and (duration_ms < 0 or (t.state == TxnState.ONGOING and now - t.start_ms >= duration_ms))
                and (pattern is None or pattern.fullmatch(t.transactional_id))]
