"""DescribeConfigs (key 32), v0-v3.

Behavior: topic resources list every topic property with its effective value; those
set on the topic are DYNAMIC_TOPIC_CONFIG, the rest DEFAULT_CONFIG. Broker resources
list this node's properties (read-only, STATIC_BROKER_CONFIG when set in the file or
with --set). Not implemented: synonyms (answered empty), documentation.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode, KafkaError

from .configs import BROKER, TOPIC, describe_broker, describe_topic
from .registry import RequestContext, api


@api(key=32, min=0, max=3)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    for res in req.resources:
        result: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                                  "resource_name": res.resource_name, "configs": []}
        keys = list(res.configuration_keys) if res.configuration_keys else None
        try:
            if res.resource_type == TOPIC:
                result["configs"] = describe_topic(ctx.cluster, res.resource_name, keys)
            elif res.resource_type == BROKER:
                result["configs"] = describe_broker(ctx.cluster, res.resource_name, keys)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {res.resource_type}")
        except KafkaError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
