"""DescribeCluster (key 60), v0-v2 (flexible versions from the start; kafka-python needs v1+).

Behavior: one broker, which is also the controller (in a ZooKeeper cluster: its live brokers and
elected controller, as Metadata lists them); the cluster's authorized operations are the
principal's when asked for (else -2147483648, as Kafka answers).
"""

from __future__ import annotations

from typing import Any

from ..access.acls import CLUSTER_NAME, ResourceType
from ..protocol.requests import DescribeClusterRequest
from .k03_metadata import brokers, controller_id
from .registry import RequestContext, api


@api(key=60, min=0, max=2)
async def handle(ctx: RequestContext, req: DescribeClusterRequest) -> dict[str, Any]:
    cluster = ctx.cluster
    return {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
        "cluster_id": cluster.cluster_id, "controller_id": controller_id(cluster),
        "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                     "is_fenced": False} for b in brokers(cluster, ctx.advertised)],
        "authorized_operations": ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
        if req.include_cluster_authorized_operations else None,
    }
