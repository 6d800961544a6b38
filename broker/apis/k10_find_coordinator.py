"""FindCoordinator (key 10), v0-v2.

Behavior: this node coordinates every group (key type 0; DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED) and every transactional id (key type 1; DESCRIBE on the TRANSACTIONAL_ID, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Other key types are INVALID_REQUEST.
Not implemented: v4's batched keys (KIP-699).
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation as Op
from ..protocol.requests import FindCoordinatorRequest
from .k03_metadata import brokers
from .registry import RequestContext, api

GROUP, TRANSACTION = 0, 1


def _error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "node_id": -1, "host": "",
            "port": -1}


@api(key=10, min=0, max=2)
async def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> dict[str, Any]:
    key_type = getattr(req, "key_type", GROUP)
    if key_type == GROUP and not ctx.allowed_group(Op.DESCRIBE, req.key):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    if key_type == TRANSACTION and not ctx.allowed_transactional_id(Op.DESCRIBE, req.key):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.")
    if key_type not in (GROUP, TRANSACTION):
        return _error(ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}")
    me = brokers(ctx.cluster, ctx.advertised)[0]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": me["node_id"],
            "host": me["host"], "port": me["port"]}
