"""DescribeUserScramCredentials (key 50), v0 (KIP-554).

Behavior: the mechanisms and iteration counts of the SCRAM credentials of the users asked for (null or
empty: every user that has one), never the credentials themselves. Per user as Kafka answers:
RESOURCE_NOT_FOUND for a user without a credential, DUPLICATE_RESOURCE for a user asked for twice. Needs
DESCRIBE on the cluster: otherwise CLUSTER_AUTHORIZATION_FAILED at the top and for each user asked for.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation
from ..protocol.requests import DescribeUserScramCredentialsRequest
from ..security.scram import MECHANISMS
from .acl_wire import denied
from .registry import RequestContext, api


def _result(user: str, code: int = 0, message: str | None = None,
            infos: list[dict[str, int]] | None = None) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": infos or []}


@api(key=50, min=0, max=0)
async def handle(ctx: RequestContext, req: DescribeUserScramCredentialsRequest) -> dict[str, Any]:
    asked = [u.name for u in req.users or []]
    refused = denied(ctx, AclOperation.DESCRIBE)
    if refused:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1],
                "results": [_result(u, *refused) for u in dict.fromkeys(asked)]}
    store = ctx.access.scram
    results = []
    for user in dict.fromkeys(asked) if asked else store.users():
        if asked.count(user) > 1:
            results.append(_result(user, ErrorCode.DUPLICATE_RESOURCE,
                                   f"Cannot describe SCRAM credentials for the same user twice in a single request: "
                                   f"{user}"))
            continue
        iterations = store.iterations(user)
        if not iterations:
            results.append(_result(user, ErrorCode.RESOURCE_NOT_FOUND,
                                   f"Attempt to describe a user credential that does not exist: {user}"))
            continue
        results.append(_result(user, infos=[{"mechanism": MECHANISMS[name].code, "iterations": i}
                                            for name, i in iterations.items()]))
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}
