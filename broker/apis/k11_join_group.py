"""JoinGroup (key 11), v0-v5.

Behavior: the generic group coordinator (any protocol type); v4+ new members first get
MEMBER_ID_REQUIRED with their id; v5 static membership through group.instance.id.
The answer waits until the rebalance completes (see broker/group/coordinator.py).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..group.coordinator import join_error
from .registry import RequestContext, api


@api(key=11, min=0, max=5)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.allowed_group(Op.READ, req.group_id):
        return {"throttle_time_ms": 0, **join_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    host = ctx.peer.rsplit(":", 1)[0]
    result = await ctx.services["groups"].join(req, ctx.version, ctx.header.client_id or "", f"/{host}")
    return {"throttle_time_ms": 0, **result}
