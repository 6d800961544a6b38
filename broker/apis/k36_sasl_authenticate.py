"""SaslAuthenticate (key 36), v0-v2.

Behavior: feeds the client's token to the exchange its SaslHandshake chose (security/session.py) and
answers the server's token; the last answer carries session_lifetime_ms (v1+) when
``connections.max.reauth.ms`` is set (KIP-368). A refused authentication is SASL_AUTHENTICATION_FAILED,
answered after ``connection.failed.authentication.delay.ms``, counted in the metrics, and the connection
then closes. On a listener without SASL, ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..protocol.requests import SaslAuthenticateRequest
from .registry import RequestContext, api

log = logging.getLogger(__name__)


@api(key=36, min=0, max=2)
async def handle(ctx: RequestContext, req: SaslAuthenticateRequest) -> dict[str, Any]:
    session = ctx.sasl
    if session is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "this listener does not use SASL",
                "auth_bytes": b"", "session_lifetime_ms": 0}
    result = session.authenticate(bytes(req.auth_bytes))
    stats = ctx.cluster.stats
    if result.error == ErrorCode.SASL_AUTHENTICATION_FAILED:
        stats.authentication_done(session.listener, ok=False)
        log.info("authentication failed on listener %s from %s: %s", session.listener, ctx.peer, result.message)
        await asyncio.sleep(ctx.cluster.config.connection_failed_authentication_delay_ms / 1000)
    elif result.completed:
        stats.authentication_done(session.listener, ok=True)
    return {"error_code": result.error, "error_message": result.message, "auth_bytes": result.token,
            "session_lifetime_ms": result.session_lifetime_ms}
