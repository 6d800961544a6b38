"""DescribeCluster (key 60), v0-v2 (flexible versions from the start; kafka-python needs v1+).

Behavior: one broker, which is also the controller.
"""

from __future__ import annotations

from typing import Any

from ..protocol.requests import DescribeClusterRequest
from .registry import RequestContext, api


@api(key=60, min=0, max=2)
async def handle(ctx: RequestContext, req: DescribeClusterRequest) -> dict[str, Any]:
    cluster = ctx.cluster
    endpoint = ctx.advertised  # the connection's listener
    return {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
        "cluster_id": cluster.cluster_id, "controller_id": cluster.node_id,
        "brokers": [{"broker_id": cluster.node_id, "host": endpoint.host or "localhost", "port": endpoint.port,
                     "rack": None, "is_fenced": False}],
    }
