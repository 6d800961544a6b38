"""SyncGroup (key 14), v0-v3.

Behavior: the leader's assignments are handed to every member once the leader syncs;
followers wait for that. Stale generations get ILLEGAL_GENERATION.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from .registry import RequestContext, api


@api(key=14, min=0, max=3)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.allowed_group(Op.READ, req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    result = await ctx.services["groups"].sync(req, ctx.version)
    return {"throttle_time_ms": 0, **result}
