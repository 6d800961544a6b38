"""IncrementalAlterConfigs (key 44), v0-v1.

Behavior: per key SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) for
LIST-typed configs (``cleanup.policy``, the throttled-replica lists; on a BROKER resource e.g.
``log.cleanup.policy``), as Kafka's controller applies them: APPEND adds the values not yet listed to the
topic's (or broker level's) value, or to Kafka's default when it has none, SUBTRACT removes them, order
kept. BROKER resources (this node's id, or "" for the cluster default) change the dynamic broker
configs, with AlterConfigs' checks (k33_alter_configs.py). The result is validated as a whole before
anything changes; INVALID_CONFIG carries Kafka's text (``Unknown topic config name: x``,
``Invalid value ...``, ``Can't APPEND to key k because its type is not LIST.``). In a ZooKeeper cluster the
current values are ZooKeeper's and the result is written there, as AlterConfigs (k33_alter_configs.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.topic_configs import TopicConfigDef
from ..errors import InvalidConfig, InvalidRequest
from ..protocol.requests import IncrementalAlterConfigsRequest, IncrementalConfigResource
from .configs import alter_configs
from .registry import RequestContext, api

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _apply(current: dict[str, str], definitions: Mapping[str, TopicConfigDef], op: int, key: str,
           value: str | None) -> None:
    if op == SET:
        if value is None:
            raise InvalidConfig(f"{key}: SET needs a value")
        current[key] = value
    elif op == DELETE:
        current.pop(key, None)
    elif op in (APPEND, SUBTRACT):
        definition = definitions.get(key)
        if definition is None or definition.type != "LIST":
            raise InvalidConfig(f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.")
        old = current[key] if key in current else definition.default
        items = [v for v in old.split(",") if v]
        for v in (value or "").split(","):
            if op == APPEND and v not in items:
                items.append(v)
            elif op == SUBTRACT and v in items:
                items.remove(v)
        current[key] = ",".join(items)
    else:
        raise InvalidRequest(f"{key}: unknown operation {op}")


@api(key=44, min=0, max=1)
async def handle(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> dict[str, Any]:
    def new_values(res: IncrementalConfigResource, current: dict[str, str],
                   definitions: Mapping[str, TopicConfigDef]) -> dict[str, str]:
        for c in res.configs:
            _apply(current, definitions, c.config_operation, c.name, c.value)
        return current

    return await alter_configs(ctx, req.resources, req.validate_only, new_values)
