"""DescribeAcls (key 29), v0-v3.

Behavior: the stored ACL bindings the filter matches (ANY matches every value, MATCH every pattern that
names the resource), grouped by resource pattern as Kafka groups them. Needs DESCRIBE on the cluster.
Answered whether or not ``authorizer.enabled`` enforces them.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation
from ..protocol.requests import DescribeAclsRequest
from .acl_wire import denied, read_filter
from .registry import RequestContext, api


@api(key=29, min=0, max=3)
async def handle(ctx: RequestContext, req: DescribeAclsRequest) -> dict[str, Any]:
    answer: dict[str, Any] = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": []}
    refused = denied(ctx, AclOperation.DESCRIBE)
    if refused:
        answer["error_code"], answer["error_message"] = refused
        return answer
    acl_filter, problem = read_filter(req)
    if acl_filter is None:
        answer["error_code"], answer["error_message"] = ErrorCode.INVALID_REQUEST, problem
        return answer
    groups: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in ctx.access.acls.describe(acl_filter):
        groups.setdefault((int(b.resource_type), b.resource_name, int(b.pattern_type)), []).append(
            {"principal": b.principal, "host": b.host, "operation": int(b.operation),
             "permission_type": int(b.permission)})
    answer["resources"] = [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                           for (t, n, p), acls in groups.items()]
    return answer
