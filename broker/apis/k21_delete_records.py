"""DeleteRecords (key 21), v0-v1.

Behavior: moves each partition's log start offset up to the given offset (-1 = the
high watermark), deleting segments that lie wholly below it; answers the new low
watermark. An offset above the high watermark is OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..protocol.requests import DeleteRecordsRequest
from ..topics.topic import INTERNAL_TOPICS
from .registry import RequestContext, api


@api(key=21, min=0, max=1)
async def handle(ctx: RequestContext, req: DeleteRecordsRequest) -> dict[str, Any]:
    topics = []
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
            try:
                if not ctx.allowed_topic(Op.DELETE, topic.name):
                    raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if topic.name in INTERNAL_TOPICS:
                    raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                      f"Cannot delete records of internal topic {topic.name}")
                plog = ctx.cluster.partition(topic.name, p.partition_index).log
                offset = plog.log_end_offset if p.offset == -1 else p.offset
                if offset < 0 or offset > plog.log_end_offset:
                    raise BrokerError(ErrorCode.OFFSET_OUT_OF_RANGE)
                if offset > plog.log_start_offset:
                    plog.delete_records_before(offset)
                entry["low_watermark"] = plog.log_start_offset
            except BrokerError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
