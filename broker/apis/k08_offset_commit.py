"""OffsetCommit (key 8), v0-v7.

Behavior: members commit with their generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
REBALANCE_IN_PROGRESS as Kafka); generation -1 with no member id is a "simple"
commit, allowed while the group has no members. Offsets are stored as records in
``__consumer_offsets`` before the answer; in a ZooKeeper cluster the answer waits until the ISR of the group's
partition has them (``offsets.commit.timeout.ms``; COORDINATOR_NOT_AVAILABLE when it does not in time, or too few
replicas are in sync), and a broker that does not coordinate the group answers NOT_COORDINATOR. Unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION; metadata over ``offset.metadata.max.bytes`` gets
OFFSET_METADATA_TOO_LARGE. Not implemented: the v2-v4 per-request retention time
(offsets are kept until deleted).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..group.store import OFFSETS_TOPIC
from ..protocol.requests import OffsetCommitRequest
from .offset_entries import check_entries, fail_accepted
from .registry import RequestContext, api


@api(key=8, min=0, max=7)
async def handle(ctx: RequestContext, req: OffsetCommitRequest) -> dict[str, Any]:
    offsets = ctx.groups.offsets
    generation = req.generation_id_or_member_epoch if ctx.version >= 1 else -1
    member_id = req.member_id if ctx.version >= 1 else ""
    instance_id = getattr(req, "group_instance_id", None) if ctx.version >= 7 else None
    group_error = (ErrorCode.GROUP_AUTHORIZATION_FAILED if not ctx.allowed_group(Op.READ, req.group_id)
                   else offsets.commit_check(req.group_id, member_id or "", generation, instance_id))
    accepted, topics = check_entries(ctx, req.topics, group_error, ctx.version >= 6)
    if accepted:
        code = await offsets.commit(req.group_id, accepted)
        ctx.cluster.notify_data(((OFFSETS_TOPIC, offsets.store.partition_for(req.group_id)),))
        fail_accepted(topics, accepted, code)
    return {"throttle_time_ms": 0, "topics": topics}
