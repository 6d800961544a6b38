"""SyncGroup (key 14), v0-v3.

Behavior: the leader's assignments are handed to every member once the leader syncs;
followers wait for that. Stale generations get ILLEGAL_GENERATION.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..group.requests import SyncRequest
from ..protocol.requests import SyncGroupRequest
from .registry import RequestContext, api


@api(key=14, min=0, max=3)
async def handle(ctx: RequestContext, req: SyncGroupRequest) -> dict[str, Any]:
    if not ctx.allowed_group(Op.READ, req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "protocol_type": None,
                "protocol_name": None, "assignment": b""}
    v5 = ctx.version >= 5
    sync = SyncRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        instance_id=req.group_instance_id if ctx.version >= 3 else None,
        generation_id=req.generation_id,
        protocol_type=req.protocol_type if v5 else None,
        protocol_name=req.protocol_name if v5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    result = await ctx.groups.sync(sync)
    return {"throttle_time_ms": 0, **result}
