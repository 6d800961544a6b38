"""OffsetDelete (key 47), v0.

Behavior: removes committed offsets of a group; a partition of a topic that active
members of a consumer group subscribe to gets GROUP_SUBSCRIBED_TO_TOPIC.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import OffsetDeleteRequest
from .registry import RequestContext, api


@api(key=47, min=0, max=0)
async def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> dict[str, Any]:
    groups = ctx.groups
    if not ctx.allowed_group(Op.DELETE, req.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    refused = groups.coordinator_error(req.group_id)
    if refused is not None:
        return {"error_code": refused, "throttle_time_ms": 0, "topics": []}
    if req.group_id not in groups.groups:
        return {"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "throttle_time_ms": 0, "topics": []}
    denied = {t.name for t in req.topics if not ctx.allowed_topic(Op.READ, t.name)}
    wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions if t.name not in denied]
    result = groups.offsets.delete(req.group_id, wanted)
    result.update({(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                   for t in req.topics if t.name in denied for p in t.partitions})
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), code in result.items():
        topics.setdefault(t, []).append({"partition_index": p, "error_code": code})
    return {"error_code": 0, "throttle_time_ms": 0,
            "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()]}
