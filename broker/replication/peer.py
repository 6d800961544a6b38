"""A connection from this broker to another one (Kafka's broker-side NetworkClient: the replica fetchers', and
every other broker-to-broker request's), on the other broker's inter-broker listener, speaking that listener's
security protocol as Kafka's broker does as a client (security/inter_broker.py says how): TLS with the
listener's ``ssl.*`` settings, then for SASL listeners SaslHandshake v1 and SaslAuthenticate with
``sasl.mechanism.inter.broker.protocol`` (PLAIN's one token, SCRAM's two exchanges) as the login of the
listener's JAAS entry. When the other broker limits the session (``connections.max.reauth.ms``, KIP-368) the
connection authenticates again on its own before the session ends, as Kafka's clients do.

One request at a time: ``call`` sends a request and waits for its answer; concurrent callers of one connection
take turns. A failed call leaves the connection unusable; the caller closes it and connects again.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from typing import TYPE_CHECKING, Any

from kafka.net.sasl.scram import ScramClient
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from headwater.kafka.errors import ErrorCode

from ..security.inter_broker import InterBrokerSecurity, inter_broker_security

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig

__all__ = ["PeerAuthenticationError", "PeerConnection", "PeerError", "connect_peer", "error_name"]

_SIZE = struct.Struct(">i")
REAUTH_AT = 0.85  # of the session's lifetime: authenticate again then (Kafka's clients pick 85-95 %)


class PeerError(Exception):
    """The other broker answered something this connection cannot use (a wrong correlation id, ...)."""


class PeerAuthenticationError(PeerError):
    """The TLS handshake or the SASL authentication with the other broker failed (Kafka's
    SslAuthenticationException / SaslAuthenticationException): the message says which, and why."""


def error_name(code: int) -> str:
    """A Kafka error code's name (``error N`` for a code this broker does not know)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


class PeerConnection:
    """One connection to another broker; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str,
                 security: InterBrokerSecurity, address: str) -> None:
        self.reader, self.writer, self.client_id = reader, writer, client_id
        self.security = security
        self.address = address  # host:port, for messages
        self._cid = 0
        self._reauth_at = 0.0  # time.monotonic() to authenticate again at; 0: never
        self._lock = asyncio.Lock()

    async def call(self, request: Any, response_cls: Any, timeout: float) -> Any:
        """Send ``request`` (a kafka-python protocol request of the version to send) and return its answer,
        decoded with ``response_cls``; TimeoutError after ``timeout`` seconds."""
        async with self._lock:  # callers sharing a connection take turns: answers come in request order
            if self._reauth_at and time.monotonic() >= self._reauth_at:
                async with asyncio.timeout(timeout):
                    await self.authenticate()
            return await self._call(request, response_cls, timeout)

    async def _call(self, request: Any, response_cls: Any, timeout: float) -> Any:
        self._cid += 1
        request.with_header(correlation_id=self._cid, client_id=self.client_id)
        try:
            self.writer.write(request.encode(header=True, framed=True))
            async with asyncio.timeout(timeout):
                await self.writer.drain()
                (size,) = _SIZE.unpack(await self.reader.readexactly(4))
                body = await self.reader.readexactly(size)
        except ssl.SSLError as exc:  # TLS 1.3: a refused client certificate shows at the first read
            raise PeerAuthenticationError(f"TLS with the broker at {self.address} (listener "
                                          f"{self.security.listener}) failed: {exc}") from None
        (cid,) = _SIZE.unpack_from(body)
        if cid != self._cid:
            raise PeerError(f"answer {cid} to request {self._cid}")
        return response_cls.decode(body, version=request.API_VERSION, header=True)

    async def authenticate(self) -> None:
        """The SASL exchange (again, for a re-authentication); PeerAuthenticationError when refused."""
        sec = self.security
        assert sec.mechanism is not None and sec.username is not None and sec.password is not None, \
            "a SASL listener's security has a mechanism and a login"
        mechanism = sec.mechanism
        what = f"SASL {mechanism} authentication as {sec.username!r} with the broker at {self.address} " \
               f"(listener {sec.listener})"
        shake = await self._call(SaslHandshakeRequest[1](mechanism=mechanism), SaslHandshakeResponse, 30)
        if shake.error_code:
            raise PeerAuthenticationError(f"{what} failed: {error_name(shake.error_code)} (it enables "
                                          f"{', '.join(shake.mechanisms) or 'none'})")
        if mechanism == "PLAIN":
            lifetime = (await self._token(what, f"\0{sec.username}\0{sec.password}".encode()))[1]
        else:
            scram = ScramClient(sec.username, sec.password, mechanism)
            scram.process_server_first_message((await self._token(what, scram.first_message()))[0])
            final, lifetime = await self._token(what, scram.final_message())
            try:
                scram.process_server_final_message(final)
            except ValueError as exc:  # the server's signature is not the one the password gives
                raise PeerAuthenticationError(f"{what} failed: {exc}") from None
        self._reauth_at = time.monotonic() + lifetime * REAUTH_AT / 1000 if lifetime > 0 else 0.0

    async def _token(self, what: str, token: bytes) -> tuple[bytes, int]:
        """One SaslAuthenticate round: the server's token and the session lifetime it gave (ms, 0: none)."""
        answer = await self._call(SaslAuthenticateRequest[1](auth_bytes=token), SaslAuthenticateResponse, 30)
        if answer.error_code:
            raise PeerAuthenticationError(f"{what} failed: {error_name(answer.error_code)}: "
                                          f"{answer.error_message or 'no reason given'}")
        return bytes(answer.auth_bytes), answer.session_lifetime_ms

    def close(self) -> None:
        self.writer.close()


async def connect_peer(config: BrokerConfig, host: str, port: int, client_id: str,
                       timeout: float) -> PeerConnection:
    """A connection to the broker listening at ``host``:``port`` on its inter-broker listener, opened (and for
    TLS and SASL listeners, authenticated) within ``timeout`` seconds. OSError / TimeoutError when it cannot
    be reached, PeerAuthenticationError when the TLS handshake or the SASL authentication fails, ConfigError
    when this broker's settings for the listener cannot be used."""
    security = inter_broker_security(config)
    address = f"{host}:{port}"
    async with asyncio.timeout(timeout):
        try:
            reader, writer = await asyncio.open_connection(
                host, port, limit=1 << 20, ssl=security.ssl_context,
                server_hostname=host if security.ssl_context is not None else None)
        except ssl.SSLError as exc:  # a certificate not trusted, a host it was not issued for, ...
            raise PeerAuthenticationError(f"TLS handshake with the broker at {address} (listener "
                                          f"{security.listener}) failed: {exc}") from None
        connection = PeerConnection(reader, writer, client_id, security, address)
        if security.mechanism is not None:
            try:
                await connection.authenticate()
            except BaseException:
                connection.close()
                raise
    return connection
