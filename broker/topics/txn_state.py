"""The transactions open in one partition and its last stable offset (Kafka's ProducerStateManager's
ongoing transactions).

A transactional data batch opens its producer's transaction in the partition at the batch's base offset
(or extends the one already open); a marker closes it. The last stable offset (LSO) is the first offset of
the earliest open transaction, or the log end when none is open: read_committed consumers read below it.
An aborted transaction becomes an entry of the aborted-transaction index (broker/log/txn_index.py) with
the LSO as it stands once it is closed.
"""

from __future__ import annotations

from ..log.txn_index import AbortedTxn

__all__ = ["OpenTransactions"]


class OpenTransactions:
    def __init__(self) -> None:
        self.first_offsets: dict[int, int] = {}  # producer id -> first offset of its open transaction

    def begin(self, producer_id: int, offset: int) -> None:
        """A transactional data batch of ``producer_id`` at ``offset``: opens its transaction if none is."""
        self.first_offsets.setdefault(producer_id, offset)

    def end(self, producer_id: int, marker_offset: int, commit: bool) -> AbortedTxn | None:
        """Close ``producer_id``'s transaction with the marker at ``marker_offset``; the index entry of an
        abort that covered data here (a marker for a transaction with no data here opens nothing)."""
        first = self.first_offsets.pop(producer_id, None)
        if commit or first is None:
            return None
        return AbortedTxn(producer_id, first, marker_offset, self.last_stable_offset(marker_offset + 1))

    def last_stable_offset(self, log_end_offset: int) -> int:
        return min(self.first_offsets.values(), default=log_end_offset)

    def __len__(self) -> int:
        return len(self.first_offsets)
