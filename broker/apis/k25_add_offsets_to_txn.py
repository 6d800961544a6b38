"""AddOffsetsToTxn (key 25), v0-v4.

Behavior: the group's ``__consumer_offsets`` partition joins the producer's transaction, so that the offsets
TxnOffsetCommit then holds for the group are committed or dropped with it. WRITE on the TRANSACTIONAL_ID
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (GROUP_AUTHORIZATION_FAILED) are needed; the
producer checks are AddPartitionsToTxn's (PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before), and so are a
cluster's (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import AddOffsetsToTxnRequest
from .registry import RequestContext, api
from .txn_wire import fenced_for


@api(key=25, min=0, max=4)
async def handle(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> dict[str, Any]:
    if not ctx.allowed_transactional_id(Op.WRITE, req.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.allowed_group(Op.READ, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        txns = ctx.transactions
        code = fenced_for(await txns.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                                    [txns.offsets_partition(req.group_id)]), ctx.version, 2)
    return {"throttle_time_ms": 0, "error_code": code}
