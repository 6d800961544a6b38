"""SASL/OAUTHBEARER tokens by KIP-768's client-credentials flow, as Kafka's ``OAuthBearerLoginCallbackHandler``
gets them: ``grant_type=client_credentials`` (and ``scope``) POSTed to ``sasl.oauthbearer.token.endpoint.url``
with the client id and secret as HTTP basic authentication; the access token is kept and fetched anew once
``sasl.login.refresh.window.factor`` of its lifetime has passed (no later than ``sasl.login.refresh.buffer.seconds``
before it expires), so every connection aiokafka opens sends an unexpired token.

The JAAS options are Kafka's: ``clientId``, ``clientSecret``, ``scope`` and ``extension_<name>`` (SASL extensions,
such as Confluent Cloud's ``extension_logicalCluster`` and ``extension_identityPoolId``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiokafka.abc import AbstractTokenProvider

from headwater.kafka.client_security import OAUTH_KEYS

__all__ = ["ClientCredentialsTokenProvider", "TokenEndpointError"]

log = logging.getLogger(__name__)

HANDLERS = frozenset({  # Kafka 3.4+ and its 3.1-3.3 name
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
})
# Kafka's client-side OAUTHBEARER keys (OAUTH_KEYS), with their defaults (None: required or no default)
_DEFAULTS: dict[str, str | None] = {
    "sasl.oauthbearer.token.endpoint.url": None,
    "sasl.login.callback.handler.class": None,
    "sasl.oauthbearer.scope.claim.name": "scope",  # the token's claims are the broker's to check
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.login.connect.timeout.ms": "10000",
    "sasl.login.read.timeout.ms": "10000",
    "sasl.login.retry.backoff.ms": "100",
    "sasl.login.retry.backoff.max.ms": "10000",
    "sasl.login.refresh.window.factor": "0.8",
    "sasl.login.refresh.window.jitter": "0.05",
    "sasl.login.refresh.buffer.seconds": "300",
    "sasl.login.refresh.min.period.seconds": "60",
}
assert OAUTH_KEYS == frozenset(_DEFAULTS)


class TokenEndpointError(Exception):
    """The token endpoint refused the client or could not be reached; the message names it."""


def _number(props: Mapping[str, str], key: str) -> float:
    value = props.get(key, _DEFAULTS[key])
    try:
        out = float(value or "")
    except ValueError:
        raise ValueError(f"{key}={value}: expected a number") from None
    if out < 0:
        raise ValueError(f"{key}={value}: must not be negative")
    return out


def _jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (seconds since the epoch), read without checking the signature: the broker
    checks it; the client only needs to know when to fetch the next one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return float(claims["exp"])
    except (ValueError, KeyError, TypeError):
        return None


class ClientCredentialsTokenProvider(AbstractTokenProvider):
    """aiokafka's token provider for one client id at one token endpoint."""

    def __init__(self, endpoint: str, client_id: str, client_secret: str, scope: str | None = None,
                 extensions: Mapping[str, str] | None = None, *, connect_timeout_s: float = 10.0,
                 read_timeout_s: float = 10.0, retry_backoff_s: float = 0.1, retry_backoff_max_s: float = 10.0,
                 window_factor: float = 0.8, buffer_s: float = 300.0, min_period_s: float = 60.0) -> None:
        self.endpoint = endpoint
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        self._extensions = dict(extensions or {})
        self._timeout = aiohttp.ClientTimeout(sock_connect=connect_timeout_s, sock_read=read_timeout_s)
        self._backoff = (retry_backoff_s, retry_backoff_max_s)
        self._window = (window_factor, buffer_s, min_period_s)
        self._token: str | None = None
        self._refresh_at = 0.0  # time.monotonic() from which the next call fetches a new token
        self.fetches = 0  # tokens fetched so far
        self._lock: asyncio.Lock | None = None

    @classmethod
    def from_config(cls, props: Mapping[str, str], options: Mapping[str, str]) -> ClientCredentialsTokenProvider:
        """From Kafka's client properties and the OAuthBearerLoginModule's JAAS options."""
        endpoint = props.get("sasl.oauthbearer.token.endpoint.url", "").strip()
        if not endpoint:
            raise ValueError("sasl.oauthbearer.token.endpoint.url: required for sasl.mechanism=OAUTHBEARER (the "
                             "client-credentials flow; unsecured tokens made by the client are not supported)")
        if not endpoint.startswith(("https://", "http://")):
            raise ValueError(f"sasl.oauthbearer.token.endpoint.url={endpoint}: expected an http(s) URL")
        handler = props.get("sasl.login.callback.handler.class")
        if handler is not None and handler not in HANDLERS:
            raise ValueError(f"sasl.login.callback.handler.class={handler}: only Kafka's "
                             "OAuthBearerLoginCallbackHandler (the client-credentials flow) is supported")
        missing = [k for k in ("clientId", "clientSecret") if not options.get(k)]
        if missing:
            raise ValueError(f"sasl.jaas.config: {' and '.join(missing)} missing for the OAuthBearerLoginModule")
        unknown = sorted(k for k in options if k not in ("clientId", "clientSecret", "scope")
                         and not k.startswith("extension_"))
        if unknown:
            raise ValueError(f"sasl.jaas.config: option {unknown[0]} is not one of the OAuthBearerLoginModule's "
                             "(clientId, clientSecret, scope, extension_<name>)")
        factor = _number(props, "sasl.login.refresh.window.factor")
        if not 0.5 <= factor <= 1.0:
            raise ValueError(f"sasl.login.refresh.window.factor={factor}: expected 0.5 to 1.0, as Kafka's")
        for key in ("sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
                    "sasl.login.refresh.window.jitter"):
            if key in props and not props[key].strip():
                raise ValueError(f"{key}: must not be empty")
        return cls(endpoint, options["clientId"], options["clientSecret"], options.get("scope") or None,
                   {k[len("extension_"):]: v for k, v in options.items() if k.startswith("extension_")},
                   connect_timeout_s=_number(props, "sasl.login.connect.timeout.ms") / 1000,
                   read_timeout_s=_number(props, "sasl.login.read.timeout.ms") / 1000,
                   retry_backoff_s=_number(props, "sasl.login.retry.backoff.ms") / 1000,
                   retry_backoff_max_s=_number(props, "sasl.login.retry.backoff.max.ms") / 1000,
                   window_factor=factor, buffer_s=_number(props, "sasl.login.refresh.buffer.seconds"),
                   min_period_s=_number(props, "sasl.login.refresh.min.period.seconds"))

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    def refresh_delay(self, lifetime_s: float) -> float:
        """Seconds after a token's fetch when the next is fetched: at the window factor of its lifetime, earlier
        if that leaves less than the buffer before it expires, never sooner than the minimum period unless the
        token lives shorter than that (Kafka's ExpiringCredentialRefreshingLogin)."""
        factor, buffer_s, min_period_s = self._window
        at_factor = lifetime_s * factor
        return max(min(at_factor, lifetime_s - buffer_s), min(min_period_s, at_factor))

    async def token(self) -> str:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one fetch for the connections opened together
            if self._token is None or time.monotonic() >= self._refresh_at:
                fetched_at = time.monotonic()
                token, lifetime = await self._fetch()
                self._token, self._refresh_at = token, fetched_at + self.refresh_delay(lifetime)
                self.fetches += 1
                log.debug("OAUTHBEARER token for %s from %s: valid %.0f s, next fetch in %.0f s", self.client_id,
                          self.endpoint, lifetime, self._refresh_at - fetched_at)
            return self._token

    async def _fetch(self) -> tuple[str, float]:
        """(the access token, seconds it lives); 5xx answers and network errors are retried with growing
        backoff up to ``sasl.login.retry.backoff.max.ms``, a 4xx answer (wrong credentials) is not."""
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        basic = "Basic " + base64.b64encode(f"{self.client_id}:{self._secret}".encode()).decode()
        backoff, backoff_max = self._backoff
        while True:
            try:
                async with aiohttp.ClientSession(timeout=self._timeout) as session, session.post(
                        self.endpoint, data=form, headers={"Accept": "application/json", "Authorization": basic}
                ) as response:
                    body = await response.text()
                    if response.status < 500:
                        return self._parse(response.status, body)
                    reason = f"HTTP {response.status}: {body[:200]}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if backoff > backoff_max:
                raise TokenEndpointError(f"OAUTHBEARER token endpoint {self.endpoint} (client {self.client_id}): "
                                         f"{reason}")
            log.warning("OAUTHBEARER token endpoint %s: %s; retrying in %.1f s", self.endpoint, reason, backoff)
            await asyncio.sleep(backoff)
            backoff *= 2

    def _parse(self, status: int, body: str) -> tuple[str, float]:
        where = f"OAUTHBEARER token endpoint {self.endpoint} (client {self.client_id})"
        try:
            answer: Any = json.loads(body)
        except ValueError:
            answer = None
        if status != 200:
            detail = (f"{answer.get('error', '')} {answer.get('error_description', '')}".strip()
                      if isinstance(answer, dict) else body[:200])
            raise TokenEndpointError(f"{where} refused the client credentials: HTTP {status} {detail}".rstrip())
        if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
            raise TokenEndpointError(f"{where}: the answer has no access_token: {body[:200]}")
        token = answer["access_token"]
        if "expires_in" in answer:
            lifetime = float(answer["expires_in"])
        else:
            expiry = _jwt_expiry(token)
            if expiry is None:
                raise TokenEndpointError(f"{where}: the answer gives no expires_in and the token no exp claim")
            lifetime = expiry - time.time()
        if lifetime <= 0:
            raise TokenEndpointError(f"{where}: the token has already expired")
        return token, lifetime
