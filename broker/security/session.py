"""One SASL connection's authentication state, as Kafka's SaslServerAuthenticator keeps it: the
handshake that picks a mechanism, the exchange it feeds, the principal once authenticated, and when the
session expires (KIP-368, ``connections.max.reauth.ms``). No I/O here: the connection loop and the
SaslHandshake / SaslAuthenticate handlers drive it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from headwater.kafka.errors import ErrorCode

from .mechanism import AuthenticationFailed, Mechanisms, SaslServer

__all__ = ["AuthenticateResult", "SaslSession"]


@dataclass(frozen=True)
class AuthenticateResult:
    error: ErrorCode
    message: str | None
    token: bytes
    session_lifetime_ms: int
    completed: bool = False  # this token finished a successful exchange


class SaslSession:
    def __init__(self, listener: str, mechanisms: Mechanisms, reauth_ms: Callable[[str], int]) -> None:
        self.listener = listener
        self.mechanisms = mechanisms
        self._reauth_ms = reauth_ms
        self._exchange: SaslServer | None = None
        self.principal: str | None = None  # set once authenticated (and kept through re-authentications)
        self.mechanism: str | None = None
        self.raw = False  # a v0 handshake: the next frames are bare SASL tokens
        self.failed: str | None = None  # why the connection must close (after the answer)
        self.expires = 0.0  # time.monotonic() past which only a re-authentication is served; 0: never

    @property
    def expired(self) -> bool:
        return bool(self.expires) and time.monotonic() > self.expires

    def handshake(self, version: int, mechanism: str) -> ErrorCode:
        """SaslHandshake: pick ``mechanism`` for the exchange that follows."""
        if self._exchange is not None or (self.principal is not None and version == 0):
            self.failed = "SaslHandshake out of turn"
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms.names():
            self.failed = f"mechanism {mechanism!r} is not enabled"
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self._exchange = self.mechanisms.server(mechanism)
        self.raw = version == 0
        return ErrorCode.NONE

    def authenticate(self, token: bytes) -> AuthenticateResult:
        """One client token (SaslAuthenticate's auth_bytes, or a raw frame after a v0 handshake)."""
        exchange = self._exchange
        if exchange is None:
            self.failed = "SaslAuthenticate without a SaslHandshake"
            return AuthenticateResult(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake", b"", 0)
        try:
            answer = exchange.step(token)
            if exchange.complete and self.principal is not None and (
                    exchange.principal != self.principal or exchange.mechanism != self.mechanism):
                raise AuthenticationFailed("Re-authentication must keep the principal and the mechanism")
        except AuthenticationFailed as exc:
            self._exchange = None
            self.failed = str(exc)
            return AuthenticateResult(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b"", 0)
        if not exchange.complete:
            return AuthenticateResult(ErrorCode.NONE, None, answer, 0)
        self._exchange = None
        self.principal, self.mechanism = exchange.principal, exchange.mechanism
        lifetime = self._reauth_ms(exchange.mechanism)
        self.expires = time.monotonic() + lifetime / 1000 if lifetime else 0.0
        return AuthenticateResult(ErrorCode.NONE, None, answer, lifetime, completed=True)
