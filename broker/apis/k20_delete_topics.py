"""DeleteTopics (key 20), v0-v3.

Behavior: removes the topic and its partition directories. Unknown topics get
UNKNOWN_TOPIC_OR_PARTITION; with ``delete.topic.enable=false`` every topic gets
TOPIC_DELETION_DISABLED (73). An internal topic (``__consumer_offsets``) is INVALID_TOPIC_EXCEPTION, as
Produce and DeleteRecords answer it: Kafka's controller deletes it for a client allowed DELETE (only its
``kafka-topics.sh`` refuses), but here the group coordinator's state lives in it.
In a ZooKeeper cluster (docs/CLUSTER.md) a cluster topic is marked in /admin/delete_topics for the controller
to delete (every replica's broker then removes its logs); the answer comes once this broker's view no longer
has it, or at the request's ``timeout_ms`` (REQUEST_TIMED_OUT: the deletion goes on), as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..errors import BrokerError
from ..protocol.requests import DeleteTopicsRequest
from ..topics.topic import INTERNAL_TOPICS
from .registry import RequestContext, api


@api(key=20, min=0, max=3)
async def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> dict[str, Any]:
    cluster = ctx.cluster
    membership = cluster.membership
    results = []
    marked: dict[str, dict[str, Any]] = {}  # cluster topics whose deletion the answer waits for
    for name in req.topic_names:
        result: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        try:
            if not ctx.allowed_topic(Op.DELETE, name):
                raise BrokerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
            if not cluster.config.delete_topic_enable:
                raise BrokerError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            if name in INTERNAL_TOPICS and (name in cluster.topics or (membership is not None
                                                                     and membership.has_topic(name))):
                raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete internal topic {name}")
            if membership is not None and membership.has_topic(name):
                from ..cluster.topic_admin import delete_topic  # kazoo loads only in cluster mode

                await delete_topic(cluster, name)
                marked[name] = result
            else:
                topic = cluster.get_topic(name)
                if topic.internal:
                    raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete internal topic {name}")
                cluster.delete_topic(name)
        except BrokerError as exc:
            result.update(error_code=exc.code, error_message=exc.message)
        results.append(result)
    timeout_ms = getattr(req, "timeout_ms", 0)
    if marked and timeout_ms > 0:
        from ..cluster.topic_admin import wait_for_deletion

        for name in await wait_for_deletion(cluster, list(marked), timeout_ms / 1000):
            marked[name].update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                                error_message=f"Topic {name} is marked for deletion; it is not deleted yet.")
    return {"throttle_time_ms": 0, "responses": results}
