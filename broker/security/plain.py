"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: ``[authzid] NUL user NUL password``; the users and
their passwords are the ``user_<name>="<password>"`` options of the listener's PlainLoginModule JAAS entry
(``listener.name.<l>.plain.sasl.jaas.config``)."""

from __future__ import annotations

import hmac

from .mechanism import AuthenticationFailed
from .settings import BadSetting, ListenerSettings, login_module

__all__ = ["PLAIN_LOGIN_MODULE", "PlainServer", "plain_users"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# Kafka's own text: the same whether the user is unknown or the password wrong
_FAILED = "Authentication failed: Invalid username or password"
_UNKNOWN_USER = b"\0" * 32  # compared against when the user is unknown, so both cases take the same time


def plain_users(settings: ListenerSettings) -> dict[str, bytes]:
    """The users the listener's PlainLoginModule accepts; BadSetting naming the JAAS key when missing or bad."""
    module = login_module(settings, "PLAIN", PLAIN_LOGIN_MODULE,
                          f'PLAIN: {PLAIN_LOGIN_MODULE} required user_<name>="<password>" ...;')
    users = {name.removeprefix("user_"): value.encode() for name, value in module.options.items()
             if name.startswith("user_") and len(name) > 5}
    if not users:
        raise BadSetting(settings.source("sasl.jaas.config", "PLAIN"),
                         'no user_<name>="<password>" option: no client could authenticate')
    return users


class PlainServer:
    """One PLAIN exchange: a single client token, no server challenge."""

    mechanism = "PLAIN"

    def __init__(self, users: dict[str, bytes]) -> None:
        self._users = users
        self._principal: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user_bytes, password = parts
        try:
            user, authorization = user_bytes.decode(), authzid.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed(_FAILED) from None
        if not user or not password:
            raise AuthenticationFailed(_FAILED)
        if authorization and authorization != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        expected = self._users.get(user)
        matches = hmac.compare_digest(password, expected if expected is not None else _UNKNOWN_USER)
        if expected is None or not matches:
            raise AuthenticationFailed(_FAILED)
        self._principal = "User:" + user
        return b""

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> str:
        assert self._principal is not None, "PLAIN exchange not complete"
        return self._principal
