"""InitProducerId (key 22), v0-v5.

Behavior: without a transactional id, a new producer id with epoch 0 for an idempotent producer (v3+: one
naming its current id and epoch gets that id with the epoch bumped, as Kafka bumps it after a lost
sequence, unless the epoch is exhausted); ids are reserved in blocks persisted before use, so they never
repeat across restarts. With one (WRITE on the
TRANSACTIONAL_ID, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), the transaction coordinator (txn/) gives the
id's producer id with its epoch bumped, fencing the older producer and aborting its open transaction;
``transaction_timeout_ms`` must be in 1..``transaction.max.timeout.ms`` (INVALID_TRANSACTION_TIMEOUT). In a
ZooKeeper cluster only the id's coordinator (the leader of its ``__transaction_state`` partition) answers it, the
other brokers NOT_COORDINATOR; the new epoch is answered once the partition's ISR has it (COORDINATOR_NOT_AVAILABLE
when it cannot), and an open transaction of the id is aborted first (CONCURRENT_TRANSACTIONS until its markers
are written: the client retries).
Version notes: v3+ carries the caller's producer id and epoch (KIP-360), which must still be the id's (else
PRODUCER_FENCED; INVALID_PRODUCER_EPOCH before v4).
Not implemented: v6's two-phase commit (KIP-939).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..access.acls import ResourceType
from ..protocol.requests import InitProducerIdRequest
from ..txn.coordinator import MAX_EPOCH
from .registry import RequestContext, api
from .txn_wire import fenced_for


def _answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": producer_id, "producer_epoch": epoch}


@api(key=22, min=0, max=5)
async def handle(ctx: RequestContext, req: InitProducerIdRequest) -> dict[str, Any]:
    if req.transactional_id:
        if not ctx.allowed_transactional_id(Op.WRITE, req.transactional_id):
            return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        pid, epoch = (req.producer_id, req.producer_epoch) if ctx.version >= 3 else (-1, -1)
        code, pid, epoch = await ctx.transactions.init_producer(req.transactional_id, req.transaction_timeout_ms,
                                                                pid, epoch)
        return _answer(fenced_for(code, ctx.version, 4), pid, epoch)
    if not (ctx.allowed_cluster(Op.IDEMPOTENT_WRITE)
            or ctx.access.allowed_any(ctx.principal, ctx.host, Op.WRITE, ResourceType.TOPIC)):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if ctx.version >= 3 and req.producer_id >= 0 and 0 <= req.producer_epoch < MAX_EPOCH - 1:
        return _answer(ErrorCode.NONE, req.producer_id, req.producer_epoch + 1)
    return _answer(ErrorCode.NONE, ctx.services.producer_ids.next_id(), 0)
