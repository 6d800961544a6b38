"""OffsetFetch (key 9), v0-v5.

Behavior: committed offsets of one group; a null topic list (v2+) means every
partition the group has committed. Partitions without a commit answer offset -1.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import OffsetFetchRequest
from .registry import RequestContext, api


@api(key=9, min=0, max=5)
async def handle(ctx: RequestContext, req: OffsetFetchRequest) -> dict[str, Any]:
    if not req.group_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_GROUP_ID, "topics": []}
    if not ctx.allowed_group(Op.DESCRIBE, req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": []}
    wanted = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    found = ctx.groups.offsets.fetch(req.group_id, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), om in found.items():
        if not ctx.allowed_topic(Op.DESCRIBE, topic):
            if wanted is not None:  # named: answered as denied; otherwise left out, as Kafka does
                by_topic.setdefault(topic, []).append({
                    "partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
                    "metadata": "", "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
            continue
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": om.offset if om else -1,
            "committed_leader_epoch": om.leader_epoch if om else -1,
            "metadata": om.metadata if om else "",
            "error_code": 0,
        })
    topics = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}
