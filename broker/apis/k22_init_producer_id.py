"""InitProducerId (key 22), v0-v1.

Behavior: hands out a new producer id with epoch 0 to idempotent producers; ids are
reserved in blocks persisted before use, so they never repeat across restarts.
Not implemented: transactions (a transactional id gets INVALID_REQUEST).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..access.acls import ResourceType
from ..protocol.requests import InitProducerIdRequest
from .registry import RequestContext, api


@api(key=22, min=0, max=1)
async def handle(ctx: RequestContext, req: InitProducerIdRequest) -> dict[str, Any]:
    if req.transactional_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "producer_id": -1, "producer_epoch": -1}
    if not (ctx.allowed_cluster(Op.IDEMPOTENT_WRITE)
            or ctx.access.allowed_any(ctx.principal, ctx.host, Op.WRITE, ResourceType.TOPIC)):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1,
                "producer_epoch": -1}
    producer_id = ctx.services.producer_ids.next_id()
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
