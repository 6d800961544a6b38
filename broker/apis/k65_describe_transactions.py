"""DescribeTransactions (key 65), v0 (KIP-664).

Behavior: each transactional id's state as the coordinator holds it: Kafka's state name, timeout, start time
of the open transaction (-1 when none), producer id and epoch, and the partitions in the transaction.
DESCRIBE on the TRANSACTIONAL_ID is needed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an id the coordinator
does not know is TRANSACTIONAL_ID_NOT_FOUND, and one it does not coordinate (a ZooKeeper cluster's: another broker
leads its ``__transaction_state`` partition) NOT_COORDINATOR.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import DescribeTransactionsRequest
from .registry import RequestContext, api


def _state(tid: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "transactional_id": tid, "transaction_state": "", "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}


@api(key=65, min=0, max=0)
async def handle(ctx: RequestContext, req: DescribeTransactionsRequest) -> dict[str, Any]:
    states = []
    for tid in req.transactional_ids:
        if not ctx.allowed_transactional_id(Op.DESCRIBE, tid):
            states.append(_state(tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        if not ctx.transactions.coordinates(tid):  # a cluster's: another broker leads its partition
            states.append(_state(tid, ErrorCode.NOT_COORDINATOR))
            continue
        txn = ctx.transactions.describe(tid)
        if txn is None:
            states.append(_state(tid, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(txn.partitions):
            by_topic.setdefault(t, []).append(p)
        states.append({"error_code": ErrorCode.NONE, "transactional_id": tid,
                       "transaction_state": txn.state.kafka_name, "transaction_timeout_ms": txn.timeout_ms,
                       "transaction_start_time_ms": txn.start_ms, "producer_id": txn.producer_id,
                       "producer_epoch": txn.producer_epoch,
                       "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"throttle_time_ms": 0, "transaction_states": states}
