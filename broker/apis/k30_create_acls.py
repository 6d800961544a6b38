"""CreateAcls (key 30), v0-v3.

Behavior: stores each valid binding (persisted in the log directory; one already stored is not stored
twice); each creation is answered in request order, INVALID_REQUEST naming the problem for an invalid
one (ANY or UNKNOWN values, MATCH/ANY pattern types, an empty resource name, a CLUSTER resource not named
``kafka-cluster``, a principal without ``Type:``). Needs ALTER on the cluster.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclBinding, AclOperation, AclPermission, PatternType, ResourceType, invalid_binding
from ..protocol.requests import CreateAclsRequest
from .acl_wire import denied, wire_enum
from .registry import RequestContext, api


@api(key=30, min=0, max=3)
async def handle(ctx: RequestContext, req: CreateAclsRequest) -> dict[str, Any]:
    refused = denied(ctx, AclOperation.ALTER)
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for c in req.creations:
        if refused:
            results.append({"error_code": refused[0], "error_message": refused[1]})
            continue
        binding = AclBinding(wire_enum(ResourceType, c.resource_type), c.resource_name or "",
                             wire_enum(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL)),
                             c.principal or "", c.host or "", wire_enum(AclOperation, c.operation),
                             wire_enum(AclPermission, c.permission_type))
        problem = invalid_binding(binding)
        if problem:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": problem})
        else:
            valid.append(binding)
            results.append({"error_code": 0, "error_message": None})
    if valid:
        ctx.access.acls.create(valid)
    return {"throttle_time_ms": 0, "results": results}
