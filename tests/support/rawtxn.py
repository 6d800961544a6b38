"""A raw transactional producer's first steps: InitProducerId for a transactional id, then the partitions
added to its transaction (AddPartitionsToTxn v3), so that its transactional batches are accepted by Produce."""

from __future__ import annotations

from collections.abc import Iterable

from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

from support.rawkafka import Conn

__all__ = ["add_partitions", "begin_transaction", "init_producer"]


def init_producer(conn: Conn, transactional_id: str, timeout_ms: int = 60000) -> InitProducerIdResponse:
    """The InitProducerId v4 answer (checked by the caller)."""
    return conn.call(InitProducerIdRequest[4](transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
                                              producer_id=-1, producer_epoch=-1), InitProducerIdResponse)


def add_partitions(conn: Conn, transactional_id: str, producer_id: int, epoch: int, topic: str,
                   partitions: Iterable[int]) -> dict[int, int]:
    """AddPartitionsToTxn v3: each partition's error code."""
    req = AddPartitionsToTxnRequest[3]
    answer = conn.call(req(v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
                           v3_and_below_producer_epoch=epoch,
                           v3_and_below_topics=[req.AddPartitionsToTxnTopic(name=topic, partitions=list(partitions))]),
                       AddPartitionsToTxnResponse)
    return {p.partition_index: p.partition_error_code for t in answer.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def begin_transaction(port: int, transactional_id: str, topic: str, partitions: Iterable[int] = (0,),
                      timeout_ms: int = 60000) -> tuple[int, int]:
    """(producer id, epoch) of a transaction open on ``topic``'s ``partitions``."""
    with Conn(port) as conn:
        init = init_producer(conn, transactional_id, timeout_ms)
        assert init.error_code == 0, init
        added = add_partitions(conn, transactional_id, init.producer_id, init.producer_epoch, topic, partitions)
        assert set(added.values()) == {0}, added
    return init.producer_id, init.producer_epoch
