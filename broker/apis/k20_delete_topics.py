"""DeleteTopics (key 20), v0-v3.

Behavior: removes the topic and its partition directories. Unknown topics get
UNKNOWN_TOPIC_OR_PARTITION; with ``delete.topic.enable=false`` every topic gets
TOPIC_DELETION_DISABLED (73); internal topics cannot be deleted (INVALID_REQUEST).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError, InvalidRequest
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
                raise InvalidRequest(f"internal topic {name} cannot be deleted")
            ctx.cluster.delete_topic(name)
        except BrokerError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        results.append(result)
    return {"throttle_time_ms": 0, "responses": results}
