"""FindCoordinator (key 10), v0-v2.

Behavior: this node coordinates every group. Transaction coordinators (key type 1)
are not available (COORDINATOR_NOT_AVAILABLE): transactions are not implemented.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import FindCoordinatorRequest
from .k03_metadata import brokers
from .registry import RequestContext, api


@api(key=10, min=0, max=2)
async def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> dict[str, Any]:
    if getattr(req, "key_type", 0) != 0:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": "transactions are not supported", "node_id": -1, "host": "", "port": -1}
    if not ctx.allowed_group(Op.DESCRIBE, req.key):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "error_message": "Group authorization failed.", "node_id": -1, "host": "", "port": -1}
    me = brokers(ctx.cluster, ctx.advertised)[0]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": me["node_id"],
            "host": me["host"], "port": me["port"]}
