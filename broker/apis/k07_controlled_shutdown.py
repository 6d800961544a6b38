"""ControlledShutdown (key 7), v1-v3 (v2 adds broker_epoch; v3 flexible; v0's header without a client id is not
served): a broker about to stop asks the controller to move its leaderships away (Kafka's ZooKeeper mode).

Behavior: on the active controller, the partitions the broker leads (with more than one replica) get another live
in-sync replica as leader and the broker leaves every ISR it is in (broker/cluster/controlled_shutdown.py); the answer
names the partitions it still leads, which no other in-sync replica could take. Errors, at the top with no
partitions: NOT_CONTROLLER on a broker that is not the active controller, BROKER_NOT_AVAILABLE for a broker that is
not registered, STALE_BROKER_EPOCH for an epoch older than the broker's registration, CLUSTER_AUTHORIZATION_FAILED
without CLUSTER_ACTION on the cluster (what brokers hold, as Kafka). A single node is its own controller with
nothing to move: its own id is answered with no partitions (one replica each, which Kafka never moves), any other
BROKER_NOT_AVAILABLE.
"""

from __future__ import annotations

import logging
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..cluster.controlled_shutdown import UNKNOWN_BROKER_EPOCH
from ..errors import BrokerError
from ..protocol.requests import ControlledShutdownRequest
from .controller_wire import cluster_controller
from .registry import RequestContext, api

log = logging.getLogger(__name__)


@api(key=7, min=1, max=3)
async def handle(ctx: RequestContext, req: ControlledShutdownRequest) -> dict[str, Any]:
    if not ctx.allowed_cluster(Op.CLUSTER_ACTION):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker_epoch = int(getattr(req, "broker_epoch", UNKNOWN_BROKER_EPOCH)) if ctx.version >= 2 \
        else UNKNOWN_BROKER_EPOCH
    try:
        controller = cluster_controller(ctx)
        if controller is not None:
            remaining = await controller.shutdowns.shut_down(req.broker_id, broker_epoch)
        elif req.broker_id == ctx.cluster.node_id:
            remaining = []
        else:
            raise BrokerError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker id {req.broker_id} does not exist.")
    except BrokerError as exc:
        log.info("ControlledShutdown of broker %d from %s: %s: %s", req.broker_id, ctx.peer, ErrorCode(exc.code).name,
                 exc.message)
        return _answer(exc.code)
    return _answer(ErrorCode.NONE, remaining)


def _answer(error_code: int, remaining: list[tuple[str, int]] | None = None) -> dict[str, Any]:
    return {"error_code": error_code, "remaining_partitions": [{"topic_name": t, "partition_index": p}
                                                               for t, p in remaining or []]}
