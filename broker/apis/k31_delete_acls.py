"""DeleteAcls (key 31), v0-v3.

Behavior: removes every stored binding each filter matches (the same matching as DescribeAcls) and
answers them per filter (in a cluster from ZooKeeper, for every broker; a binding ZooKeeper could not remove
is listed with UNKNOWN_SERVER_ERROR and the reason, as Kafka's AclAuthorizer answers it); an invalid filter
(UNKNOWN values) gets INVALID_REQUEST and removes nothing.
Needs ALTER on the cluster.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclBinding, AclFilter, AclOperation
from ..access.service import SharedStateUnavailable
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
    failed: dict[AclBinding, tuple[int, str]] = {}
    try:
        found, failed = await ctx.access.delete_acls(filters) if filters else ([], {})
    except SharedStateUnavailable as exc:
        found = [[] for _ in filters]
        unavailable = {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(exc), "matching_acls": []}
        results = [unavailable if r is None else r for r in results]
    removed = iter(found)
    answers = []
    for result in results:
        if result is None:
            matching = []
            for b in next(removed):
                code, message = failed.get(b, (0, None))
                matching.append({"error_code": code, "error_message": message, **binding_entry(b)})
            result = {"error_code": 0, "error_message": None, "matching_acls": matching}
        answers.append(result)
    return {"throttle_time_ms": 0, "filter_results": answers}
