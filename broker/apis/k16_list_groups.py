"""ListGroups (key 16), v0-v4.

Behavior: every group this node coordinates; v4 filters by state. While a cluster's coordinator loads the groups
of a ``__consumer_offsets`` partition the answer carries COORDINATOR_LOAD_IN_PROGRESS with the groups it has, as
Kafka's.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import ListGroupsRequest
from .registry import RequestContext, api


@api(key=16, min=0, max=4)
async def handle(ctx: RequestContext, req: ListGroupsRequest) -> dict[str, Any]:
    states = list(getattr(req, "states_filter", None) or []) if ctx.version >= 4 else None
    listed = ctx.groups.list_groups(states, None)
    if not ctx.allowed_cluster(Op.DESCRIBE):  # then only the groups the client may describe, as Kafka
        listed = [g for g in listed if ctx.allowed_group(Op.DESCRIBE, g["group_id"])]
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if ctx.groups.loading else ErrorCode.NONE
    return {"throttle_time_ms": 0, "error_code": error, "groups": listed}
