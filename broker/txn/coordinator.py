"""The transaction coordinator, as Kafka's TransactionCoordinator and TransactionStateManager.

Every transactional id this node has seen, with its producer id and epoch and its transaction's state and
partitions. Each change is written to ``__transaction_state`` before the request is answered; the topic is
replayed on start. All methods run on the broker's event loop and never await, so each request's check and
change happen as one step and no two requests interleave inside a transaction's transition.

EndTxn writes PREPARE_COMMIT / PREPARE_ABORT, then the markers (txn/markers.py), then COMPLETE_*, and answers
once all three are written (Kafka answers after the prepare; here the markers are local appends, so waiting
for them costs little and a client's next transaction never races its previous one's markers). A transaction
found prepared (after a crash between the steps, or a marker write that failed) has its markers written
again at start and by the periodic task.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable

from headwater.kafka.errors import ErrorCode

from ..config.broker_config import BrokerConfig
from ..group.offsets import CommittedOffsets
from ..group.store import OFFSETS_TOPIC
from ..topics.cluster import Cluster
from ..topics.producer_state import ProducerIdManager
from .markers import write_markers
from .state import COMPLETE, PREPARED, TP, TxnMetadata, TxnState
from .store import TxnStore

__all__ = ["TransactionCoordinator"]

log = logging.getLogger(__name__)

MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch this close to it gets a new producer id instead of a bump


def _now() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(self, cluster: Cluster, config: BrokerConfig, producer_ids: ProducerIdManager,
                 offsets: CommittedOffsets) -> None:
        self.cluster = cluster
        self.config = config
        self.producer_ids = producer_ids
        self.offsets = offsets
        self.store = TxnStore(cluster, config)
        self.txns: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, str] = {}  # producer id -> transactional id, for Produce's check
        self.failures = 0  # markers, expirations or periodic rounds that failed (each logged); retried

    # -- lifecycle --------------------------------------------------------------------------------------

    def load(self) -> None:
        """Replay ``__transaction_state``; complete the transactions found prepared (their markers again)."""
        self.txns = self.store.load()
        self.by_producer = {t.producer_id: tid for tid, t in self.txns.items()}
        self.complete_prepared()

    async def run(self) -> None:
        """The periodic task: markers of prepared transactions written again, timed-out transactions
        aborted, idle ids expired. A failed round is logged and counted, and the next one runs."""
        interval = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        expire_every = self.config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000
        next_expiry = time.monotonic() + expire_every
        while True:
            try:
                self.complete_prepared()
                self.abort_timed_out()
                if time.monotonic() >= next_expiry:
                    self.remove_expired()
                    next_expiry = time.monotonic() + expire_every
            except Exception:
                self.failures += 1
                log.exception("the transaction coordinator's periodic round failed; next in %.1f s", interval)
            await asyncio.sleep(interval)

    # -- periodic work --------------------------------------------------------------------------------

    def complete_prepared(self) -> None:
        for txn in list(self.txns.values()):
            if txn.state in PREPARED:
                self._finish(txn, txn.state == TxnState.PREPARE_COMMIT)

    def abort_timed_out(self) -> list[str]:
        """Abort every ongoing transaction past its timeout, bumping the epoch so its producer is fenced."""
        now = _now()
        aborted = []
        for tid, txn in list(self.txns.items()):
            if txn.state == TxnState.ONGOING and txn.start_ms + txn.timeout_ms < now:
                log.info("aborting the transaction of %s (producer %d, epoch %d): open for %d ms, past its "
                         "transaction.timeout.ms %d", tid, txn.producer_id, txn.producer_epoch, now - txn.start_ms,
                         txn.timeout_ms)
                self._end(txn, commit=False, fence=True)
                aborted.append(tid)
        return aborted

    def remove_expired(self) -> None:
        """``transactional.id.expiration.ms``: forget ids idle that long with no transaction open."""
        cutoff = _now() - self.config.transactional_id_expiration_ms
        for tid, txn in list(self.txns.items()):
            if txn.state in COMPLETE and txn.last_update_ms < cutoff:
                try:
                    self.store.write(tid, None)
                except Exception:
                    self.failures += 1
                    log.exception("could not expire transactional id %s", tid)
                    continue
                del self.txns[tid]
                self.by_producer.pop(txn.producer_id, None)
                log.info("expired transactional id %s: idle past transactional.id.expiration.ms", tid)

    # -- transitions ----------------------------------------------------------------------------------

    def _write(self, txn: TxnMetadata) -> None:
        txn.last_update_ms = _now()
        self.store.write(txn.transactional_id, txn)

    def _end(self, txn: TxnMetadata, commit: bool, fence: bool = False) -> None:
        """Prepare, mark and complete ``txn``; ``fence`` first bumps the epoch (an abort the producer did
        not ask for: its next request is fenced, and the markers carry the new epoch, as in Kafka)."""
        if fence and txn.producer_epoch < MAX_EPOCH - 1:
            txn.last_producer_epoch = txn.producer_epoch
            txn.producer_epoch += 1
        txn.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        self._write(txn)
        self._finish(txn, commit)

    def _finish(self, txn: TxnMetadata, commit: bool) -> None:
        try:
            write_markers(self.cluster, self.offsets, txn, commit)
        except Exception:  # the prepare is durable: the periodic task writes the markers again
            self.failures += 1
            log.exception("could not write the %s markers of transactional id %s; retried every "
                          "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                          "commit" if commit else "abort", txn.transactional_id)
            return
        txn.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        txn.partitions = set()
        txn.start_ms = -1
        self._write(txn)

    # -- InitProducerId -------------------------------------------------------------------------------

    def init_producer(self, tid: str, timeout_ms: int, producer_id: int = -1,
                      producer_epoch: int = -1) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): a new epoch for ``tid``, aborting its open transaction (KIP-360:
        ``producer_id``/``producer_epoch`` >= 0 are the caller's current ones, which must still be valid)."""
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        txn = self.txns.get(tid)
        if txn is None:
            txn = TxnMetadata(tid, self.producer_ids.next_id(), 0, timeout_ms)
            self._write(txn)
            self.txns[tid] = txn
            self.by_producer[txn.producer_id] = tid
            return ErrorCode.NONE, txn.producer_id, 0
        if producer_id >= 0 and (producer_id != txn.producer_id
                                 or producer_epoch not in (txn.producer_epoch, txn.last_producer_epoch)):
            return ErrorCode.PRODUCER_FENCED, -1, -1
        if txn.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if txn.state == TxnState.ONGOING:  # the older producer's transaction: aborted, that producer fenced
            self._end(txn, commit=False, fence=True)
            if txn.state != TxnState.COMPLETE_ABORT:
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1  # its markers failed: the client retries
        if txn.producer_epoch >= MAX_EPOCH - 1:
            self.by_producer.pop(txn.producer_id, None)
            txn.producer_id, txn.producer_epoch, txn.last_producer_epoch = self.producer_ids.next_id(), 0, -1
            self.by_producer[txn.producer_id] = tid
        else:
            txn.last_producer_epoch = txn.producer_epoch
            txn.producer_epoch += 1
        txn.timeout_ms = timeout_ms
        txn.state = TxnState.EMPTY
        txn.partitions = set()
        txn.start_ms = -1
        self._write(txn)
        return ErrorCode.NONE, txn.producer_id, txn.producer_epoch

    # -- the transaction's partitions -----------------------------------------------------------------

    def _producer_error(self, tid: str, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        txn = self.txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return None

    def add_partitions(self, tid: str, producer_id: int, producer_epoch: int, partitions: Iterable[TP]) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the transaction (starting it)."""
        error = self._producer_error(tid, producer_id, producer_epoch)
        if error is not None:
            return error
        txn = self.txns[tid]
        new = set(partitions) - txn.partitions
        if txn.state == TxnState.ONGOING and not new:
            return ErrorCode.NONE
        if txn.state != TxnState.ONGOING:
            txn.state = TxnState.ONGOING
            txn.start_ms = _now()
        txn.partitions |= new
        self._write(txn)
        return ErrorCode.NONE

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
        group's offsets partition (AddOffsetsToTxn came first)."""
        error = self._producer_error(tid, producer_id, producer_epoch)
        if error is not None:
            return error
        txn = self.txns[tid]
        if txn.state != TxnState.ONGOING or self.offsets_partition(group_id) not in txn.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return None

    def check_produce(self, producer_id: int, producer_epoch: int, topic: str, index: int) -> ErrorCode:
        """A transactional batch may be appended only for a partition of its producer's ongoing transaction,
        at the producer's current epoch (Kafka's KIP-890 verification, done here by the broker itself)."""
        tid = self.by_producer.get(producer_id)
        txn = self.txns.get(tid) if tid is not None else None
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_TXN_STATE
        if producer_epoch != txn.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if txn.state != TxnState.ONGOING or (topic, index) not in txn.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # -- EndTxn ---------------------------------------------------------------------------------------

    def end_transaction(self, tid: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        error = self._producer_error(tid, producer_id, producer_epoch)
        if error is not None:
            return error
        txn = self.txns[tid]
        if txn.state == TxnState.ONGOING:
            self._end(txn, commit)
            return ErrorCode.NONE
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
