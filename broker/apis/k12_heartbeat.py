"""Heartbeat (key 12), v0-v3.

Behavior: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..group.requests import HeartbeatRequest
from ..protocol import requests as wire
from .registry import RequestContext, api


@api(key=12, min=0, max=3)
async def handle(ctx: RequestContext, req: wire.HeartbeatRequest) -> dict[str, Any]:
    if not ctx.allowed_group(Op.READ, req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    beat = HeartbeatRequest(req.group_id, req.member_id, req.group_instance_id if ctx.version >= 3 else None,
                            req.generation_id)
    return {"throttle_time_ms": 0, "error_code": ctx.groups.heartbeat(beat)}
