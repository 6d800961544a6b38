"""CreateAcls (key 30), v0-v3.

Behavior: stores each valid binding (persisted in the log directory, or in a cluster in ZooKeeper for every
broker; one already stored is not stored twice); each creation is answered in request order, INVALID_REQUEST
naming the problem for an invalid one (ANY or UNKNOWN values, MATCH/ANY pattern types, an empty resource name,
a CLUSTER resource not named ``kafka-cluster``, a principal without ``Type:``; in a cluster a resource name with
a ``/``, as Kafka's AclAuthorizer). A binding ZooKeeper could not take is answered UNKNOWN_SERVER_ERROR with the
reason. Needs ALTER on the cluster.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclBinding, AclOperation, AclPermission, PatternType, ResourceType, invalid_binding
from ..access.service import SharedStateUnavailable
from ..protocol.requests import CreateAclsRequest
from .acl_wire import denied, wire_enum
from .registry import RequestContext, api


@api(key=30, min=0, max=3)
async def handle(ctx: RequestContext, req: CreateAclsRequest) -> dict[str, Any]:
    refused = denied(ctx, AclOperation.ALTER)
    results: list[dict[str, Any]] = []
    valid: dict[int, AclBinding] = {}  # result index -> binding
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
            valid[len(results)] = binding
            results.append({"error_code": 0, "error_message": None})
    if valid:
        try:
            failed = await ctx.access.create_acls(list(valid.values()))
        except SharedStateUnavailable as exc:
            failed = {b: (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) for b in valid.values()}
        for index, binding in valid.items():
            if binding in failed:
                results[index]["error_code"], results[index]["error_message"] = failed[binding]
    return {"throttle_time_ms": 0, "results": results}
