"""AlterConfigs (key 33), v0-v1.

Behavior: replaces a topic's whole set of overrides (keys left out return to their
defaults), as the legacy API does; every value is validated first and nothing changes
on error (INVALID_CONFIG naming the key, in Kafka's words). ``validate_only`` changes nothing.
Not implemented: broker resources (INVALID_REQUEST: broker properties are static).
"""

from __future__ import annotations

from typing import Any

from .configs import alter_topic_configs
from .registry import RequestContext, api


def _new_overrides(res: Any) -> dict[str, str]:
    """The resource's values are the whole new set of overrides (a key left out returns to its default)."""
    return {c.name: c.value for c in res.configs if c.value is not None}


@api(key=33, min=0, max=1)
async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return alter_topic_configs(ctx, req, _new_overrides)
