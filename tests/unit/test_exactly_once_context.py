"""The worker's TransactionContext (KIP-618): requests taken once, after the poll or the record they name, and
a task asking both to commit and to abort at the same point refused; the boundary settings read as Kafka's."""

from __future__ import annotations

import pytest

from headwater.connect.api import ConnectException, SourceRecord
from headwater.connect.runtime.exactly_once_task import WorkerTransactionContext, transaction_boundary


def record(n: int) -> SourceRecord:
    return SourceRecord("t", n, str(n), source_partition={"p": 0}, source_offset={"n": n})


def test_requests_are_taken_once() -> None:
    context = WorkerTransactionContext()
    first, second = record(1), record(1)  # equal, but not the same record
    context.commit_transaction(first)
    context.abort_transaction()
    assert context.has_record_requests()
    assert context.record_request(second) is None
    assert context.record_request(first) == "commit" and context.record_request(first) is None
    assert not context.has_record_requests()
    assert context.batch_request() == "abort" and context.batch_request() is None


def test_commit_and_abort_at_the_same_point_is_refused() -> None:
    context = WorkerTransactionContext()
    context.commit_transaction()
    context.abort_transaction()
    with pytest.raises(ConnectException, match="both to commit and to abort"):
        context.batch_request()
    one = record(2)
    context.commit_transaction(one)
    context.abort_transaction(one)
    with pytest.raises(ConnectException, match="both to commit and to abort"):
        context.record_request(one)


def test_boundary_settings() -> None:
    assert transaction_boundary({}, 60000) == ("poll", 60000)
    assert transaction_boundary({"transaction.boundary": "Interval"}, 60000) == ("interval", 60000)
    assert transaction_boundary({"transaction.boundary": "interval", "transaction.boundary.interval.ms": "250"},
                                60000) == ("interval", 250)
    with pytest.raises(ValueError, match="String must be one of"):
        transaction_boundary({"transaction.boundary": "never"}, 60000)
