"""DescribeGroups (key 15), v0-v4.

Behavior: state, protocol and members (with assignments once Stable). Unknown groups
are described as Dead with no members, as Kafka does before v6.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import DescribeGroupsRequest
from .registry import RequestContext, api


@api(key=15, min=0, max=4)
async def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> dict[str, Any]:
    groups = ctx.groups
    return {"throttle_time_ms": 0, "groups": [
        groups.describe(g) if ctx.allowed_group(Op.DESCRIBE, g) else
        {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": g, "group_state": "", "protocol_type": "",
         "protocol_data": "", "members": [], "authorized_operations": None}  # None: INT32_MIN, not asked for
        for g in req.groups]}
