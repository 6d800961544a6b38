"""DeleteTopics (key 20), v0-v3.

Behavior: removes the topic and its partition directories. Unknown topics get
UNKNOWN_TOPIC_OR_PARTITION; with ``delete.topic.enable=false`` every topic gets
TOPIC_DELETION_DISABLED (73). An internal topic (``__consumer_offsets``) is INVALID_TOPIC_EXCEPTION, as
Produce and DeleteRecords answer it: Kafka's controller deletes it for a client allowed DELETE (only its
``kafka-topics.sh`` refuses), but here the group coordinator's state lives in it.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..protocol.requests import DeleteTopicsRequest
from .registry import RequestContext, api


@api(key=20, min=0, max=3)
async def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> dict[str, Any]:
    results = []
    for name in req.topic_names:
        result: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        try:
            if not ctx.allowed_topic(Op.DELETE, name):
                raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
            if not ctx.cluster.config.delete_topic_enable:
                raise BrokerError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            topic = ctx.cluster.get_topic(name)
            if topic.internal:
                raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete internal topic {name}")
            ctx.cluster.delete_topic(name)
        except BrokerError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        results.append(result)
    return {"throttle_time_ms": 0, "responses": results}
