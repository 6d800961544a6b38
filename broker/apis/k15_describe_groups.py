"""DescribeGroups (key 15), v0-v4.

Behavior: state, protocol and members (with assignments once Stable). Unknown groups
are described as Dead with no members, as Kafka does before v6. Authorized operations (v3+) are
the principal's when asked for.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..access.acls import ResourceType
from ..protocol.requests import DescribeGroupsRequest
from .registry import RequestContext, api


@api(key=15, min=0, max=4)
async def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> dict[str, Any]:
    groups = ctx.groups
    with_operations = bool(getattr(req, "include_authorized_operations", False))
    described = []
    for g in req.groups:
        if not ctx.allowed_group(Op.DESCRIBE, g):
            described.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": g, "group_state": "",
                              "protocol_type": "", "protocol_data": "", "members": [],
                              "authorized_operations": None})  # None: INT32_MIN, "not requested"
            continue
        entry = groups.describe(g)
        if with_operations:
            entry["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, g)
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}
