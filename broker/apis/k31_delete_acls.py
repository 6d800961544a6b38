"""DeleteAcls (key 31), v0-v3.

Behavior: removes every stored binding each filter matches (the same matching as DescribeAcls) and
answers them per filter; an invalid filter (UNKNOWN values) gets INVALID_REQUEST and removes nothing.
Needs ALTER on the cluster.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclFilter, AclOperation
from ..protocol.requests import DeleteAclsRequest
from .acl_wire import binding_entry, denied, read_filter
from .registry import RequestContext, api


@api(key=31, min=0, max=3)
async def handle(ctx: RequestContext, req: DeleteAclsRequest) -> dict[str, Any]:
    refused = denied(ctx, AclOperation.ALTER)
    results: list[dict[str, Any] | None] = []
    filters: list[AclFilter] = []
    for f in req.filters:
        if refused:
            results.append({"error_code": refused[0], "error_message": refused[1], "matching_acls": []})
            continue
        acl_filter, problem = read_filter(f)
        if acl_filter is None:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": problem, "matching_acls": []})
        else:
            filters.append(acl_filter)
            results.append(None)  # filled in below, in request order
    removed = iter(ctx.access.acls.delete(filters) if filters else [])
    answers = []
    for result in results:
        if result is None:
            result = {"error_code": 0, "error_message": None,
                      "matching_acls": [{"error_code": 0, "error_message": None, **binding_entry(b)}
                                        for b in next(removed)]}
        answers.append(result)
    return {"throttle_time_ms": 0, "filter_results": answers}
