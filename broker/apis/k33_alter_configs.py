"""AlterConfigs (key 33), v0-v1.

Behavior: replaces a topic's whole set of overrides (keys left out return to their defaults), or the
whole set of dynamic configs of a BROKER resource (name = this node's id: per broker; "": the cluster-wide
default), as the legacy API does; every value is validated first and nothing changes on error
(topics: INVALID_CONFIG naming the key, in Kafka's words; brokers: INVALID_REQUEST "Cannot update these
configs dynamically: Set(...)" for a property Kafka does not mark dynamic, see config/dynamic_configs.py).
``validate_only`` changes nothing. In a ZooKeeper cluster a cluster topic's config and the broker levels are
written to ZooKeeper (/config/topics/<t>, /config/brokers/<id>|<default>) and every broker applies them
(broker/cluster/config_sync.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.topic_configs import TopicConfigDef
from ..protocol.requests import AlterConfigsRequest, ConfigResource
from .configs import alter_configs
from .registry import RequestContext, api


def _new_values(res: ConfigResource, _current: dict[str, str],
                _definitions: Mapping[str, TopicConfigDef]) -> dict[str, str]:
    """The resource's values are the whole new set (a key left out returns to its default)."""
    return {c.name: c.value for c in res.configs if c.value is not None}


@api(key=33, min=0, max=1)
async def handle(ctx: RequestContext, req: AlterConfigsRequest) -> dict[str, Any]:
    return await alter_configs(ctx, req.resources, req.validate_only, _new_values)
