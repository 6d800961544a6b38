"""SaslHandshake (key 17), v0-v1.

Behavior: on a SASL listener, picks the mechanism of the exchange that follows (security/session.py):
v1 is followed by SaslAuthenticate requests, v0 by bare SASL tokens. The answer lists the listener's
enabled mechanisms, also with an error. An unknown mechanism is UNSUPPORTED_SASL_MECHANISM and the
connection closes; on a listener without SASL, or out of turn, ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode

from ..protocol.requests import SaslHandshakeRequest
from .registry import RequestContext, api


@api(key=17, min=0, max=1)
async def handle(ctx: RequestContext, req: SaslHandshakeRequest) -> dict[str, Any]:
    session = ctx.sasl
    if session is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    return {"error_code": session.handshake(ctx.version, req.mechanism), "mechanisms": session.mechanisms.names()}
