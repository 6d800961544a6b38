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
from ..group.requests import JoinRequest
from ..protocol.requests import JoinGroupRequest
from .registry import RequestContext, api


@api(key=11, min=0, max=5)
async def handle(ctx: RequestContext, req: JoinGroupRequest) -> dict[str, Any]:
    if not ctx.allowed_group(Op.READ, req.group_id):
        return {"throttle_time_ms": 0, **join_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    version = ctx.version
    join = JoinRequest(
        group_id=req.group_id,
        member_id=req.member_id or "",
        instance_id=req.group_instance_id if version >= 5 else None,
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        member_id_required=version >= 4,
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.peer.rsplit(":", 1)[0],
    )
    result = await ctx.groups.join(join)
    return {"throttle_time_ms": 0, **result}
