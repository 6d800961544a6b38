"""A raw transactional producer's first steps: InitProducerId for a transactional id, then the partitions
added to its transaction (AddPartitionsToTxn v3), so that its transactional batches are accepted by Produce;
and a transaction coordinator's WriteTxnMarkers to a partition's leader."""

from __future__ import annotations

from collections.abc import Iterable

from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

from support.rawkafka import Conn

__all__ = ["add_partitions", "begin_transaction", "init_producer", "write_markers"]


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


def write_markers(port: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                  partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    """WriteTxnMarkers v1 of one marker to the broker at ``port``: each partition's error code."""
    entry = WriteTxnMarkersRequest.WritableTxnMarker
    marker = entry(producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
                   coordinator_epoch=coordinator_epoch,
                   topics=[entry.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in partitions.items()])
    with Conn(port) as conn:
        answer = conn.call(WriteTxnMarkersRequest[1](markers=[marker]), WriteTxnMarkersResponse)
    [result] = answer.markers
    assert result.producer_id == producer_id, answer
    return {(t.name, p.partition_index): p.error_code for t in result.topics for p in t.partitions}
