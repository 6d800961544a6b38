"""LeaveGroup (key 13), v0-v3.

Behavior: v0-v2 name one member id; v3 a list of members by id or group.instance.id,
each answered on its own. Leaving triggers a rebalance of the rest.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import LeaveGroupRequest
from .registry import RequestContext, api


@api(key=13, min=0, max=3)
async def handle(ctx: RequestContext, req: LeaveGroupRequest) -> dict[str, Any]:
    if not ctx.allowed_group(Op.READ, req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
    if ctx.version < 3:
        identities: list[tuple[str, str | None]] = [(req.member_id, None)]
    else:
        identities = [(m.member_id, m.group_instance_id) for m in req.members]
    code, members = ctx.groups.leave(req.group_id, identities)
    if ctx.version < 3 and members:
        code = members[0]["error_code"]
    return {"throttle_time_ms": 0, "error_code": code, "members": members}
