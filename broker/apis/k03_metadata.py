"""Metadata (key 3), v0-v8.

Behavior: this node is the only broker, the controller and the leader of every
partition (leader epoch 0, one replica, in sync). With ``zookeeper.connect`` the brokers, the controller
and the topics are the ZooKeeper cluster's (broker/cluster/, docs/CLUSTER.md): every partition's leader,
leader epoch, replicas, ISR and offline replicas (those not live) as ZooKeeper holds them; a partition
without a live leader is LEADER_NOT_AVAILABLE with leader -1. ``__consumer_offsets`` is a cluster topic (made by
the first FindCoordinator for a group, never by Metadata); ``__transaction_state`` stays each broker's own (this
broker leads it), and auto-creation makes a cluster topic, answered LEADER_NOT_AVAILABLE until it has
leaders, as Kafka answers a topic it has just created.
A null topic list (or an empty one in v0) means all topics. Unknown topics are created when the request allows it
(v4+ flag, always before v4) and ``auto.create.topics.enable`` is on; being
synchronous here, they are answered as ready at once instead of LEADER_NOT_AVAILABLE.
The broker's address is the one advertised for the listener the client connected on.
Authorized operations (v8+) are the principal's, for the topics and the cluster when asked for, and
-2147483648 ("not requested") otherwise, as Kafka answers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import CLUSTER_NAME, ResourceType
from ..access.acls import AclOperation as Op
from ..config.broker_config import Listener
from ..errors import BrokerError
from ..protocol.hot_paths import EncodedOnce
from ..protocol.requests import MetadataRequest
from ..topics.cluster import Cluster, Topic
from ..topics.topic import INTERNAL_TOPICS
from .registry import RequestContext, api

if TYPE_CHECKING:
    from ..cluster.topic_meta import TopicMeta

# authorized operations not asked for: the codec writes None as Kafka's -2147483648 (INT32_MIN)
UNREQUESTED_OPERATIONS = None


def brokers(cluster: Cluster, endpoint: Listener) -> list[dict[str, Any]]:
    """This node as the connection's listener advertises it; in a ZooKeeper cluster every live broker that
    advertises the connection's listener name (as Kafka answers)."""
    if cluster.membership is not None:
        return [{"node_id": b.broker_id, "host": b.endpoints[endpoint.name][0], "port": b.endpoints[endpoint.name][1],
                 "rack": b.rack} for b in cluster.membership.metadata_brokers(endpoint.name)]
    return [{"node_id": cluster.node_id, "host": endpoint.host or "localhost", "port": endpoint.port, "rack": None}]


def controller_id(cluster: Cluster) -> int:
    """This node, or the ZooKeeper cluster's elected controller (-1 while none is)."""
    return cluster.node_id if cluster.membership is None else cluster.membership.view.controller_id


def _partitions(node: int, topic: Topic) -> EncodedOnce:
    """The topic's partition entries, built (and encoded, hot_paths.py) once per partition count."""
    cached = topic.metadata_partitions
    if not isinstance(cached, EncodedOnce) or len(cached) != len(topic.partitions):
        cached = topic.metadata_partitions = EncodedOnce([
            {
                "error_code": 0,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": 0,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for p in range(len(topic.partitions))
        ])
    return cached


def _cluster_partitions(cluster: Cluster, meta: TopicMeta) -> EncodedOnce:
    """A cluster topic's partition entries, built (and encoded) once per change of its states or the live brokers."""
    assert cluster.membership is not None
    view = cluster.membership.view
    cached = meta.metadata_partitions
    if cached is not None and cached[0] is view:
        return cached[1]
    live = view.brokers
    entries = []
    for p, replicas in sorted(meta.assignment.items()):
        state = meta.states.get(p)
        led = state is not None and state.leader in live
        entries.append({
            "error_code": ErrorCode.NONE if led else ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": p,
            "leader_id": state.leader if led and state is not None else -1,
            "leader_epoch": state.leader_epoch if state is not None else -1,
            "replica_nodes": list(replicas),
            "isr_nodes": list(state.isr) if state is not None else [],
            "offline_replicas": [r for r in replicas if r not in live],
        })
    built = EncodedOnce(entries)
    meta.metadata_partitions = (view, built)
    return built


def cluster_topic_entry(cluster: Cluster, meta: TopicMeta, authorized_operations: set[int] | None = None
                        ) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": meta.name,
        "topic_id": meta.topic_id,
        "is_internal": meta.name in INTERNAL_TOPICS,
        "partitions": _cluster_partitions(cluster, meta),
        "authorized_operations": authorized_operations,
    }


def topic_entry(cluster: Cluster, topic: Topic, authorized_operations: set[int] | None = None) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": _partitions(cluster.node_id, topic),
        "authorized_operations": authorized_operations,
    }


def error_entry(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "is_internal": False, "partitions": [],
            "authorized_operations": UNREQUESTED_OPERATIONS}


async def _auto_create(cluster: Cluster, name: str) -> None:
    """A cluster topic with num.partitions and default.replication.factor (answered before its leaders come)."""
    from ..cluster.topic_admin import create_topic, plan_topic  # kazoo loads only in cluster mode

    try:
        await create_topic(cluster, name, plan_topic(cluster, name, -1, -1, None, {}), {})
    except BrokerError as exc:
        if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:  # made by another client meanwhile: on its way
            raise


@api(key=3, min=0, max=8)
async def handle(ctx: RequestContext, req: MetadataRequest) -> dict[str, Any]:
    cluster = ctx.cluster
    replicated = cluster.membership.sync.topics if cluster.membership is not None and \
        cluster.membership.topics is not None else {}
    if req.topics is None or (ctx.version == 0 and not req.topics):
        # all topics: those the client may not describe are left out, as Kafka does
        # (a replicated topic's local replicas outlive its deletion briefly: the cluster's view decides)
        every = (cluster.topics.keys() - cluster.replicated) | replicated.keys()
        names = [n for n in sorted(every) if ctx.allowed_topic(Op.DESCRIBE, n)]
        named = False
    else:
        names = [t.name for t in req.topics]
        named = True
    allow_create = ctx.version < 4 or bool(getattr(req, "allow_auto_topic_creation", True))
    with_operations = bool(getattr(req, "include_topic_authorized_operations", False))
    topics = []
    for name in names:
        if named and not ctx.allowed_topic(Op.DESCRIBE, name):
            topics.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        operations = ctx.authorized_operations(ResourceType.TOPIC, name) if with_operations else None
        meta = replicated.get(name)
        if meta is not None:  # __consumer_offsets too, once the first FindCoordinator made it
            topics.append(cluster_topic_entry(cluster, meta, operations))
            continue
        topic = cluster.topics.get(name) if name not in cluster.replicated else None
        if topic is None:
            if allow_create and cluster.config.auto_create_topics_enable and not (
                    ctx.allowed_cluster(Op.CREATE) or ctx.allowed_topic(Op.CREATE, name)):
                topics.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if not (allow_create and cluster.config.auto_create_topics_enable):
                topics.append(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                if cluster.membership is not None:
                    if name in INTERNAL_TOPICS:  # made by their coordinators (FindCoordinator), never here
                        topics.append(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                        continue
                    await _auto_create(cluster, name)
                    topics.append(error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE))
                    continue
                topic = cluster.create_topic(name)
            except BrokerError as exc:
                topics.append(error_entry(name, exc.code))
                continue
        topics.append(topic_entry(cluster, topic, operations))
    return {
        "throttle_time_ms": 0,
        "brokers": brokers(cluster, ctx.advertised),
        "cluster_id": cluster.cluster_id,
        "controller_id": controller_id(cluster),
        "topics": topics,
        "authorized_operations": ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
        if getattr(req, "include_cluster_authorized_operations", False) else UNREQUESTED_OPERATIONS,
    }
