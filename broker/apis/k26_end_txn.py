"""EndTxn (key 26), v0-v4.

Behavior: commits or aborts the producer's ongoing transaction: PREPARE_* is written to
``__transaction_state``, then a marker to every partition of the transaction (the group offsets of its
TxnOffsetCommits become visible on commit, are dropped on abort), then COMPLETE_*; on one node the answer comes
after all three. In a ZooKeeper cluster, as Kafka, the answer comes once the prepare is replicated (the markers are
written by each partition's leader afterwards; the id's next transaction is CONCURRENT_TRANSACTIONS until they
are), and a broker that does not coordinate the id answers NOT_COORDINATOR. Repeating the request that ended it
answers NONE; ending with nothing open is INVALID_TXN_STATE.
WRITE on the TRANSACTIONAL_ID is needed; PRODUCER_FENCED from v2 (INVALID_PRODUCER_EPOCH before).
Not implemented: v5 (KIP-890 part 2: the epoch bumped by every EndTxn).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import EndTxnRequest
from .registry import RequestContext, api
from .txn_wire import fenced_for


@api(key=26, min=0, max=4)
async def handle(ctx: RequestContext, req: EndTxnRequest) -> dict[str, Any]:
    if not ctx.allowed_transactional_id(Op.WRITE, req.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        code = fenced_for(await ctx.transactions.end_transaction(req.transactional_id, req.producer_id,
                                                                 req.producer_epoch, req.committed), ctx.version, 2)
    return {"throttle_time_ms": 0, "error_code": code}
