"""AddPartitionsToTxn (key 24), v0-v4.

Behavior: v0-v3 (clients): the partitions join the producer's transaction, starting it. WRITE on the
TRANSACTIONAL_ID is needed (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for all) and WRITE on each topic
(TOPIC_AUTHORIZATION_FAILED); an unknown partition is UNKNOWN_TOPIC_OR_PARTITION; when any partition fails,
the others are OPERATION_NOT_ATTEMPTED and nothing is added, as in Kafka. The producer's id and epoch must be
the transactional id's current ones (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED; INVALID_PRODUCER_EPOCH
before v2); a transaction being ended, or a change of it still being written, is CONCURRENT_TRANSACTIONS. In a
ZooKeeper cluster a broker that does not coordinate the id answers NOT_COORDINATOR, and the coordinator answers
once the ISR of the id's ``__transaction_state`` partition has the change (COORDINATOR_NOT_AVAILABLE when it
cannot).
v4 (KIP-890 part 1, broker to broker, CLUSTER_ACTION): a batch of transactions; ``verify_only`` ones are only
checked (INVALID_TXN_STATE for a partition not in the ongoing transaction), the others added.
Not implemented: v5 (KIP-890 part 2's transaction version 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from .registry import RequestContext, api
from .txn_wire import fenced_for

TP = tuple[str, int]


def _results(codes: dict[TP, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), code in codes.items():
        by_topic.setdefault(t, []).append({"partition_index": p, "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


async def _add(ctx: RequestContext, tid: str, pid: int, epoch: int, topics: Sequence[AddPartitionsToTxnTopic],
               verify_only: bool) -> dict[TP, ErrorCode]:
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    if not ctx.allowed_transactional_id(Op.WRITE, tid):
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if verify_only:
        return ctx.transactions.verify_partitions(tid, pid, epoch, wanted)
    codes: dict[TP, ErrorCode] = {}
    for t, p in wanted:
        known = ctx.cluster.has_partition(t, p)
        codes[(t, p)] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if not ctx.allowed_topic(Op.WRITE, t)
                         else ErrorCode.NONE if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if any(codes.values()):
        return {tp: code or ErrorCode.OPERATION_NOT_ATTEMPTED for tp, code in codes.items()}
    code = fenced_for(await ctx.transactions.add_partitions(tid, pid, epoch, wanted), ctx.version, 2)
    return dict.fromkeys(wanted, code)


@api(key=24, min=0, max=4)
async def handle(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> dict[str, Any]:
    if ctx.version < 4:
        codes = await _add(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                           req.v3_and_below_producer_epoch, req.v3_and_below_topics, verify_only=False)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _results(codes)}
    if not ctx.allowed_cluster(Op.CLUSTER_ACTION):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    results = [{"transactional_id": t.transactional_id,
                "topic_results": _results(await _add(ctx, t.transactional_id, t.producer_id, t.producer_epoch,
                                                     t.topics, t.verify_only))}
               for t in req.transactions]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results}
