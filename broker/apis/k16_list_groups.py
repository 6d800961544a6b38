"""ListGroups (key 16), v0-v4.

Behavior: every group this node coordinates; v4 filters by state.
"""

from __future__ import annotations

from typing import Any

from .registry import RequestContext, api


@api(key=16, min=0, max=4)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    states = list(getattr(req, "states_filter", None) or []) if ctx.version >= 4 else None
    return {"throttle_time_ms": 0, "error_code": 0, "groups": ctx.services["groups"].list_groups(states, None)}
