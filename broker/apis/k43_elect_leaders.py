"""ElectLeaders (key 43), v0-v2 (v2 flexible; v0 elects the preferred replica only).

Behavior: elects the leader of each partition named (every partition when null, answering only those not
ELECTION_NOT_NEEDED, as Kafka) by the election type asked: PREFERRED (0) the assignment's first replica when it
is live and in the ISR, UNCLEAN (1) a leader for a partition whose leader is gone, out of the ISR if need be; as
Kafka's ZooKeeper-mode controller (broker/cluster/leader_elections.py): per partition ELECTION_NOT_NEEDED,
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION
(being deleted), NOT_CONTROLLER on a broker that is not the active controller. CLUSTER ALTER is needed (else
CLUSTER_AUTHORIZATION_FAILED at the top and for every partition named). An unknown election type is
INVALID_REQUEST. The answer comes once the new leaders are written. A single node leads every partition it has
with its preferred (and only) replica: ELECTION_NOT_NEEDED.
"""

from __future__ import annotations

import logging
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..cluster.leader_elections import NOT_NEEDED, PREFERRED, UNCLEAN
from ..errors import BrokerError, UnknownTopicOrPartition
from ..protocol.requests import ElectLeadersRequest
from .controller_wire import by_topic, cluster_controller, single_node_has
from .registry import RequestContext, api

log = logging.getLogger(__name__)
API = "ElectLeaders"

Key = tuple[str, int]


@api(key=43, min=0, max=2)
async def handle(ctx: RequestContext, req: ElectLeadersRequest) -> dict[str, Any]:
    election_type = int(getattr(req, "election_type", PREFERRED)) if ctx.version >= 1 else PREFERRED
    named = None if req.topic_partitions is None else \
        sorted({(t.topic, p) for t in req.topic_partitions for p in t.partitions})
    if not ctx.allowed_cluster(Op.ALTER):
        error = BrokerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {key: error for key in named or []})
    if election_type not in (PREFERRED, UNCLEAN):
        error = BrokerError(ErrorCode.INVALID_REQUEST, f"election_type: unknown election type {election_type} "
                                                       f"(0: PREFERRED, 1: UNCLEAN)")
        return _answer(ErrorCode.INVALID_REQUEST, {key: error for key in named or []})
    results: dict[Key, int | BrokerError]
    try:
        controller = cluster_controller(ctx)
        if controller is not None:
            keys = named if named is not None else \
                [(t, p) for t, meta in controller.sync.topics.items() for p in meta.assignment]
            results = await controller.elections.elect(keys, election_type)
        else:
            keys = named if named is not None else \
                [(name, p.index) for name, topic in ctx.cluster.topics.items() for p in topic.partitions]
            results = {key: _single_node(ctx, key) for key in keys}
    except BrokerError as exc:  # NOT_CONTROLLER: for every partition, as Kafka
        results = {key: exc for key in named or []}
    for (name, index), result in sorted(results.items(), key=lambda item: item[0]):
        if isinstance(result, int):
            log.info("%s: %s-%d led by broker %d", API, name, index, result)
    if named is None:  # every partition: only those elected or failed
        results = {k: r for k, r in results.items()
                   if not (isinstance(r, BrokerError) and r.code == ErrorCode.ELECTION_NOT_NEEDED)}
    return _answer(ErrorCode.NONE, results)


def _single_node(ctx: RequestContext, key: Key) -> BrokerError:
    if not single_node_has(ctx, *key):
        return UnknownTopicOrPartition("The partition does not exist.")
    return BrokerError(ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED)


def _answer(error_code: int, results: dict[Key, int | BrokerError]) -> dict[str, Any]:
    def entry(index: int, result: int | BrokerError) -> dict[str, Any]:
        failed = result if isinstance(result, BrokerError) else None
        return {"partition_id": index, "error_code": failed.code if failed else 0,
                "error_message": failed.message if failed else None}
    return {"throttle_time_ms": 0, "error_code": error_code,
            "replica_election_results": [{"topic": name, "partition_result": partitions}
                                         for name, partitions in by_topic(results, entry)]}
