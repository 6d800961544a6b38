"""ListPartitionReassignments (key 46), v0 (flexible).

Behavior: the reassignments under way (all, or those of the partitions named), each partition with its
replicas, the replicas being added and those being removed, from the topic znodes' ``adding_replicas`` /
``removing_replicas`` (broker/cluster/reassigner.py); partitions named that are not being reassigned (or do not
exist) are left out, as Kafka. CLUSTER DESCRIBE is needed (else CLUSTER_AUTHORIZATION_FAILED at the top, the
partitions asked for listed without replicas: Kafka's error answer); served by the active controller
(NOT_CONTROLLER elsewhere). A single node has none under way.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..cluster.reassignment import ReplicaAssignment
from ..errors import BrokerError
from ..protocol.requests import ListPartitionReassignmentsRequest
from .controller_wire import by_topic, cluster_controller
from .registry import RequestContext, api

UNAUTHORIZED = "Cluster authorization failed."


@api(key=46, min=0, max=0)
async def handle(ctx: RequestContext, req: ListPartitionReassignmentsRequest) -> dict[str, Any]:
    keys = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    if not ctx.allowed_cluster(Op.DESCRIBE):
        error = BrokerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, UNAUTHORIZED)
        return _answer({key: ReplicaAssignment(()) for key in keys or []}, error)
    try:
        controller = cluster_controller(ctx)
        found = controller.reassigner.list(keys) if controller is not None else {}
    except BrokerError as exc:
        return _answer({}, exc)
    return _answer(found, None)


def _answer(found: dict[tuple[str, int], ReplicaAssignment], error: BrokerError | None) -> dict[str, Any]:
    def entry(index: int, assignment: ReplicaAssignment) -> dict[str, Any]:
        return {"partition_index": index, "replicas": list(assignment.replicas),
                "adding_replicas": list(assignment.adding), "removing_replicas": list(assignment.removing)}
    return {"throttle_time_ms": 0, "error_code": error.code if error else 0,
            "error_message": error.message if error else None,
            "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic(found, entry)]}
