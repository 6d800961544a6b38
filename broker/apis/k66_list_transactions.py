"""ListTransactions (key 66), v0-v2 (KIP-664).

Behavior: the transactional ids the principal may DESCRIBE, filtered by state names (Kafka's: Ongoing,
CompleteCommit, ...; names it does not know come back in ``unknown_state_filters``), producer ids, v1's
``duration_filter`` (ongoing for at least that many ms; KIP-994) and v2's ``transactional_id_pattern`` (a
regular expression the whole id must match; a bad one is INVALID_REQUEST). In a ZooKeeper cluster each broker
lists the ids it coordinates, as Kafka's (the admin client asks every broker).
"""

from __future__ import annotations

import re
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import ListTransactionsRequest
from ..txn import TxnState
from .registry import RequestContext, api


@api(key=66, min=0, max=2)
async def handle(ctx: RequestContext, req: ListTransactionsRequest) -> dict[str, Any]:
    states = [TxnState.by_kafka_name(name) for name in req.state_filters]
    unknown = [name for name, state in zip(req.state_filters, states, strict=True) if state is None]
    known = [s for s in states if s is not None]
    if req.state_filters and not known:  # only unknown states: nothing can match
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
                "transaction_states": []}
    duration = getattr(req, "duration_filter", -1) if ctx.version >= 1 else -1
    pattern_text = getattr(req, "transactional_id_pattern", None) if ctx.version >= 2 else None
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "unknown_state_filters": [],
                "transaction_states": []}
    found = ctx.transactions.list_transactions(known, list(req.producer_id_filters), duration, pattern)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                    "transaction_state": t.state.kafka_name}
                                   for t in found if ctx.allowed_transactional_id(Op.DESCRIBE, t.transactional_id)]}
