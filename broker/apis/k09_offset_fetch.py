"""OffsetFetch (key 9), v0-v7.

Behavior: committed offsets of one group; a null topic list (v2+) means every
partition the group has committed. Partitions without a commit answer offset -1.
v7's ``require_stable`` (KIP-447, sent by read_committed consumers) answers
UNSTABLE_OFFSET_COMMIT for a partition whose offsets an open transaction holds, so the
consumer waits for the transaction's end (it retries) instead of starting from an older offset.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import OffsetFetchRequest
from .registry import RequestContext, api


@api(key=9, min=0, max=7)
async def handle(ctx: RequestContext, req: OffsetFetchRequest) -> dict[str, Any]:
    if not req.group_id:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_GROUP_ID, "topics": []}
    if not ctx.allowed_group(Op.DESCRIBE, req.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": []}
    refused = ctx.groups.coordinator_error(req.group_id)  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused, "topics": []}
    wanted = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    found = ctx.groups.offsets.fetch(req.group_id, wanted)
    unstable = ctx.groups.offsets.unstable(req.group_id) if ctx.version >= 7 and req.require_stable else set()
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), om in found.items():
        if not ctx.allowed_topic(Op.DESCRIBE, topic):
            if wanted is not None:  # named: answered as denied; otherwise left out, as Kafka does
                by_topic.setdefault(topic, []).append({
                    "partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
                    "metadata": "", "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
            continue
        if (topic, partition) in unstable:
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT})
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
