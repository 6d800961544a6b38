"""One transactional id's state, as Kafka's TransactionMetadata holds it, and its ``__transaction_state`` record.

Key and value are Kafka's TransactionLogKey v0 (int16 version, transactional id) and TransactionLogValue v0
(producer id, epoch, timeout, status byte, partitions, last-update and start timestamps), so Kafka's tools
read the topic as they read Kafka's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum

from headwater.kafka.types import Reader, Writer

__all__ = ["TxnMetadata", "TxnState", "decode_key", "decode_value", "encode_key", "encode_value"]

KEY_VERSION = 0
VALUE_VERSION = 0
TP = tuple[str, int]


class TxnState(IntEnum):
    """Kafka's TransactionState and its status byte in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions give (Kafka's TransactionState.name)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def by_kafka_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.kafka_name == name), None)


PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
COMPLETE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TP] = field(default_factory=set)
    last_update_ms: int = 0
    start_ms: int = -1  # when the ongoing transaction began (-1: none)
    # The epoch before the last bump, so a KIP-360 producer that missed the answer can still re-init (in memory,
    # as in Kafka).
    last_producer_epoch: int = -1
    # Kafka's pendingState (in memory): the state a write in flight moves to; another transition meanwhile is
    # refused (CONCURRENT_TRANSACTIONS)
    pending: TxnState | None = None

    def copy(self) -> TxnMetadata:
        """The target of a transition: changed, written, and only then ``apply``'d."""
        return replace(self, partitions=set(self.partitions), pending=None)

    def apply(self, target: TxnMetadata) -> None:
        """Take ``target``'s state once its write is replicated (Kafka's completeTransitionTo)."""
        for name in ("producer_id", "producer_epoch", "last_producer_epoch", "timeout_ms", "state", "partitions",
                     "last_update_ms", "start_ms"):
            setattr(self, name, getattr(target, name))


def encode_key(transactional_id: str) -> bytes:
    return Writer().int16(KEY_VERSION).string(transactional_id).to_bytes()


def decode_key(data: bytes) -> str:
    r = Reader(data)
    version = r.int16()
    if version != KEY_VERSION:
        raise ValueError(f"unknown transaction log key version {version}")
    tid = r.string()
    if tid is None:
        raise ValueError("a transaction log key with a null transactional id")
    return tid


def encode_value(m: TxnMetadata) -> bytes:
    w = Writer().int16(VALUE_VERSION).int64(m.producer_id).int16(m.producer_epoch).int32(m.timeout_ms)
    w.int8(int(m.state))
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    w.int32(len(by_topic))
    for t, ps in by_topic.items():
        w.string(t).int32(len(ps))
        for p in ps:
            w.int32(p)
    return w.int64(m.last_update_ms).int64(m.start_ms).to_bytes()


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    r = Reader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise ValueError(f"unknown transaction log value version {version}")
    pid, epoch, timeout, status = r.int64(), r.int16(), r.int32(), r.int8()
    partitions: set[TP] = set()
    for _ in range(max(r.int32(), 0)):  # -1: null, no partitions
        topic = r.string() or ""
        for _ in range(r.int32()):
            partitions.add((topic, r.int32()))
    return TxnMetadata(transactional_id, pid, epoch, timeout, TxnState(status), partitions, r.int64(), r.int64())
