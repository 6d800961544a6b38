"""IncrementalAlterConfigs (key 44), v0-v1.

Behavior: per key SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT
(3) for list-valued properties (``cleanup.policy``). The result is validated as a
whole before anything changes; INVALID_CONFIG names the key.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode, KafkaError

from .configs import alter_topic_configs
from .registry import RequestContext, api

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_KEYS = {"cleanup.policy"}


def _apply(current: dict[str, str], effective: dict[str, str], op: int, key: str, value: str | None) -> None:
    if op == SET:
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key}: SET needs a value")
        current[key] = value
    elif op == DELETE:
        current.pop(key, None)
    elif op in (APPEND, SUBTRACT):
        if key not in LIST_KEYS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key}: APPEND/SUBTRACT only apply to list properties")
        items = [v for v in current.get(key, effective[key]).split(",") if v]
        given = [v.strip() for v in (value or "").split(",") if v.strip()]
        if op == APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        current[key] = ",".join(items)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{key}: unknown operation {op}")


@api(key=44, min=0, max=1)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def new_overrides(res: Any) -> dict[str, str]:
        topic = ctx.cluster.get_topic(res.resource_name)
        overrides = dict(topic.overrides)
        effective = topic.config.to_properties()
        for c in res.configs:
            _apply(overrides, effective, c.config_operation, c.name, c.value)
        return overrides

    return alter_topic_configs(ctx.cluster, req, new_overrides)
