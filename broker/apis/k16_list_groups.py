"""ListGroups (key 16), v0-v4.

Behavior: every group this node coordinates; v4 filters by state.
"""

from __future__ import annotations

from typing import Any

from ..access.acls import AclOperation as Op
from ..protocol.requests import ListGroupsRequest
from .registry import RequestContext, api


@api(key=16, min=0, max=4)
async def handle(ctx: RequestContext, req: ListGroupsRequest) -> dict[str, Any]:
    states = list(getattr(req, "states_filter", None) or []) if ctx.version >= 4 else None
    listed = ctx.groups.list_groups(states, None)
    if not ctx.allowed_cluster(Op.DESCRIBE):  # then only the groups the client may describe, as Kafka
        listed = [g for g in listed if ctx.allowed_group(Op.DESCRIBE, g["group_id"])]
    return {"throttle_time_ms": 0, "error_code": 0, "groups": listed}
