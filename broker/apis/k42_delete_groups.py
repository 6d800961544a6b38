"""DeleteGroups (key 42), v0-v1.

Behavior: deletes groups with no members, with their committed offsets (tombstones in
``__consumer_offsets``); NON_EMPTY_GROUP while members remain; GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import DeleteGroupsRequest
from .registry import RequestContext, api


@api(key=42, min=0, max=1)
async def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> dict[str, Any]:
    groups = ctx.groups
    return {"throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": groups.delete_group(g) if ctx.allowed_group(Op.DELETE, g)
                         else ErrorCode.GROUP_AUTHORIZATION_FAILED} for g in req.groups_names]}
