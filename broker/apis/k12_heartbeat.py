"""Heartbeat (key 12), v0-v3.

Behavior: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from .registry import RequestContext, api


@api(key=12, min=0, max=3)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.allowed_group(Op.READ, req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    return {"throttle_time_ms": 0, "error_code": ctx.services["groups"].heartbeat(req, ctx.version)}
