"""AlterConfigs (key 33), v0-v1.

Behavior: replaces a topic's whole set of overrides (keys left out return to their
defaults), as the legacy API does; every value is validated first and nothing changes
on error (INVALID_CONFIG naming the key). ``validate_only`` changes nothing.
Not implemented: broker resources (INVALID_REQUEST: broker properties are static).
"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import KafkaError
from .configs import check_topic_resource
from .registry import RequestContext, api


@api(key=33, min=0, max=1)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    responses = []
    for res in req.resources:
        result: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                                  "resource_name": res.resource_name}
        try:
            check_topic_resource(ctx.cluster, res.resource_type, res.resource_name)
            overrides = {c.name: c.value for c in res.configs if c.value is not None}
            ctx.cluster.topic_config(overrides)
            if not req.validate_only:
                ctx.cluster.alter_topic_config(res.resource_name, overrides)
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        responses.append(result)
    return {"throttle_time_ms": 0, "responses": responses}
