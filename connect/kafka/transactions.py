"""A transactional producer's transactions (KIP-618 source tasks), read from aiokafka's transaction manager.

aiokafka's ``begin_transaction`` / ``commit_transaction`` / ``abort_transaction`` assert on a state they do not
expect (a producer whose sender died, fenced, cannot even begin one), so the runtime goes through
``Transactions``, which raises the error that ended the producer instead.
"""

from __future__ import annotations

from typing import Any

from aiokafka.errors import InvalidProducerEpoch, KafkaError, ProducerFenced

__all__ = ["Transactions", "is_fenced"]

_OPEN = ("IN_TRANSACTION", "ABORTABLE_ERROR")  # aiokafka's TransactionState names: a transaction to end


def is_fenced(exc: BaseException | None) -> bool:
    """The producer was fenced (a newer one took its transactional.id, or the coordinator aborted its
    transaction after transaction.timeout.ms and bumped the epoch), seen in ``exc`` or what caused it."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ProducerFenced | InvalidProducerEpoch):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class Transactions:
    """The transactions of ``producer``, an AIOKafkaProducer built with a ``transactional_id`` (started: its
    InitProducerId fenced any older producer with that id)."""

    def __init__(self, producer: Any) -> None:
        self.producer = producer
        self._txn = producer._txn_manager
        if self._txn is None or self._txn.transactional_id is None:
            raise ValueError("the producer has no transactional_id")

    @property
    def transactional_id(self) -> str:
        return str(self._txn.transactional_id)

    @property
    def open(self) -> bool:
        """A transaction was begun and not yet ended (it may have failed: then only ``abort`` ends it)."""
        return bool(self._txn.state.name in _OPEN)

    def failure(self) -> BaseException | None:
        """What ended the producer (its sender stopped: fenced, or an error it does not recover from); None
        while it can go on."""
        sender = self.producer._sender.sender_task
        if sender is not None and sender.done() and not sender.cancelled() and sender.exception() is not None:
            exc: BaseException = sender.exception()
            return exc
        if self._txn.is_fatal_error():
            waiter = self._txn.wait_for_transaction_end()
            if waiter is not None and waiter.done() and not waiter.cancelled() and waiter.exception() is not None:
                return waiter.exception()
            return KafkaError(f"the producer of transactional.id {self.transactional_id} failed")
        return None

    def _check(self) -> None:
        failure = self.failure()
        if failure is not None:
            raise failure

    async def begin(self) -> None:
        """Begin a transaction unless one is open."""
        self._check()
        if not self.open:
            await self.producer.begin_transaction()

    async def commit(self) -> None:
        """Commit the open transaction (the producer sends what it holds first); raises what kept it from
        committing."""
        self._check()
        await self.producer.commit_transaction()

    async def abort(self) -> None:
        """Abort the open transaction (also one that failed)."""
        self._check()
        await self.producer.abort_transaction()
