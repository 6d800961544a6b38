"""ApiVersions (key 18), v0-v4.

Behavior: lists every API in the registry with the range served; min is 0 for all
(librdkafka probes exact versions to enable features). A request for
a version above 4 is answered by the server in the v0 layout before reaching here.
Not implemented: supported/finalized features (none exist on this broker).
"""

from __future__ import annotations

from typing import Any

from ..protocol.requests import ApiVersionsRequest
from .registry import REGISTRY, RequestContext, api


@api(key=18, min=0, max=4)
async def handle(ctx: RequestContext, req: ApiVersionsRequest) -> dict[str, Any]:
    keys = [
        {"api_key": spec.key, "min_version": spec.min_version, "max_version": spec.max_version}
        for spec in sorted(REGISTRY.values(), key=lambda s: s.key)
    ]
    return {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
