"""DescribeConfigs (key 32), v0-v4 (v4 flexible).

Behavior: topic resources list every topic config of Kafka's LogConfig (config/topic_configs.py) with its
effective value, as Kafka's ConfigHelper does: ``config_source`` DYNAMIC_TOPIC_CONFIG for an
override, else the source of the first broker synonym left (STATIC_BROKER_CONFIG when set in the
properties file, DEFAULT_CONFIG otherwise); ``synonyms`` (v1+, when asked) the override then the
broker properties in Kafka's order; ``config_type`` (v3+); ``documentation`` (v3+, when asked:
Kafka's doc text); never sensitive, never read-only. Asked-for names that are not configs are
left out. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, without a message. Broker resources: this node's
id lists its properties in effect, their source the first of DYNAMIC_BROKER_CONFIG (AlterConfigs on this
broker), DYNAMIC_DEFAULT_BROKER_CONFIG (on the cluster default, ""), STATIC_BROKER_CONFIG (the properties
file or --set) and DEFAULT_CONFIG, with Kafka's synonyms when asked; read-only unless Kafka marks the
property dynamic (config/dynamic_configs.py); "" lists the cluster-wide dynamic values only.
In a ZooKeeper cluster a cluster topic is described on every broker, replica or not, with the config ZooKeeper
holds (apis/configs.py, broker/cluster/config_sync.py).
Not implemented: documentation of broker properties (answered null).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError, InvalidRequest
from ..protocol.requests import DescribeConfigsRequest
from .configs import BROKER, TOPIC, check_describe_allowed, describe_broker, describe_topic
from .registry import RequestContext, api


@api(key=32, min=0, max=4)
async def handle(ctx: RequestContext, req: DescribeConfigsRequest) -> dict[str, Any]:
    include_synonyms = bool(getattr(req, "include_synonyms", False))
    include_documentation = bool(getattr(req, "include_documentation", False))
    results = []
    for res in req.resources:
        result: dict[str, Any] = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                                  "resource_name": res.resource_name, "configs": []}
        keys = list(res.configuration_keys) if res.configuration_keys else None
        try:
            check_describe_allowed(ctx, res.resource_type, res.resource_name)
            if res.resource_type == TOPIC:
                result["configs"] = describe_topic(ctx.cluster, res.resource_name, keys, include_synonyms,
                                                   include_documentation)
            elif res.resource_type == BROKER:
                result["configs"] = describe_broker(ctx.cluster, res.resource_name, keys, include_synonyms)
            else:
                raise InvalidRequest(f"unsupported resource type {res.resource_type}")
        except BrokerError as exc:  # Kafka answers an unknown topic with the code alone
            unknown = exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.update(error_code=exc.code, error_message=None if unknown else exc.message)
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
