"""SASL/OAUTHBEARER with KIP-768's client-credentials flow, against a token endpoint served by aiohttp in the test
(Headwater's broker does not serve OAUTHBEARER): Kafka's client properties map to aiokafka's OAUTHBEARER
settings; the token is fetched with the client id and secret (HTTP basic) and the scope, kept, and fetched
anew before it expires; SASL extensions go with it into aiokafka's first SASL message; a refused secret is an
error naming the endpoint and the reason; what cannot be honoured is refused naming the key."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiokafka.conn import OAuthAuthenticator

from headwater.connect.kafka import clients
from headwater.connect.kafka.oauth import ClientCredentialsTokenProvider, TokenEndpointError
from headwater.connect.kafka.security import security_settings

pytestmark = pytest.mark.timeout(60)

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


@dataclass
class TokenEndpoint:
    """An OAuth token endpoint for client ``headwater`` with secret ``s3cret``; every request is recorded."""

    url: str = ""
    lifetime_s: float = 3600
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        auth = request.headers.get("Authorization", "")
        client = base64.b64decode(auth.removeprefix("Basic ")).decode() if auth.startswith("Basic ") else ""
        self.requests.append({"form": form, "client": client, "at": time.monotonic()})
        if client != "headwater:s3cret" or form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "invalid_client", "error_description": "bad client credentials"},
                                     status=401)
        return web.json_response({"access_token": f"token-{len(self.requests)}", "token_type": "Bearer",
                                  "expires_in": self.lifetime_s})


@asynccontextmanager
async def serving(lifetime_s: float = 3600) -> AsyncIterator[TokenEndpoint]:
    server = TokenEndpoint(lifetime_s=lifetime_s)
    app = web.Application()
    app.router.add_post("/oauth2/token", server.token)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}/oauth2/token"
    try:
        yield server
    finally:
        await runner.cleanup()


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


def oauth_props(url: str, secret: str = "s3cret", **more: str) -> dict[str, str]:
    """A client's OAUTHBEARER properties as Kafka's (and Confluent Cloud's) documentation writes them."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": HANDLER, "sasl.oauthbearer.token.endpoint.url": url,
            "sasl.jaas.config": f'{MODULE} required clientId="headwater" clientSecret="{secret}" scope="kafka" '
                                'extension_logicalCluster="lkc-1";', **more}


def test_token_fetched_with_client_credentials_kept_and_sent_with_extensions() -> None:
    run(_fetched_kept_and_sent)


async def _fetched_kept_and_sent() -> None:
    async with serving() as endpoint:
        settings = security_settings(oauth_props(endpoint.url))
        provider = settings["sasl_oauth_token_provider"]
        assert settings["sasl_mechanism"] == "OAUTHBEARER" and settings["security_protocol"] == "SASL_SSL"
        assert isinstance(provider, ClientCredentialsTokenProvider)
        assert await provider.token() == "token-1"
        assert await asyncio.gather(provider.token(), provider.token()) == ["token-1", "token-1"]  # kept, not refetched
        assert [(r["client"], r["form"]) for r in endpoint.requests] == \
            [("headwater:s3cret", {"grant_type": "client_credentials", "scope": "kafka"})]
        # aiokafka's first OAUTHBEARER message carries the token and the SASL extension
        message, _ = await OAuthAuthenticator(sasl_oauth_token_provider=provider).step(None)
        assert message == b"n,,\x01auth=Bearer token-1\x01logicalCluster=lkc-1\x01\x01"
        # and aiokafka's clients take the settings as mapped (a producer built from Kafka's properties)
        producer = clients.producer("127.0.0.1:9", oauth_props(endpoint.url))
        assert producer.client._sasl_mechanism == "OAUTHBEARER"
        assert isinstance(producer.client._sasl_oauth_token_provider, ClientCredentialsTokenProvider)


def test_token_refreshed_before_it_expires() -> None:
    run(_refreshed)


async def _refreshed() -> None:
    async with serving(lifetime_s=2) as endpoint:
        provider = security_settings(oauth_props(endpoint.url))["sasl_oauth_token_provider"]
        assert await provider.token() == "token-1"
        # Kafka's window: 80% of the lifetime, no later than sasl.login.refresh.buffer.seconds before expiry
        assert provider.refresh_delay(2) == pytest.approx(1.6)
        assert provider.refresh_delay(3600) == pytest.approx(2880) and provider.refresh_delay(600) == pytest.approx(300)
        assert await provider.token() == "token-1"
        await asyncio.sleep(1.7)  # past the refresh point, before the 2 s expiry
        assert await provider.token() == "token-2"
        assert len(endpoint.requests) == 2


def test_refused_credentials_name_the_endpoint() -> None:
    run(_refused)


async def _refused() -> None:
    async with serving() as endpoint:
        provider = security_settings(oauth_props(endpoint.url, secret="wrong"))["sasl_oauth_token_provider"]
        started = time.monotonic()
        with pytest.raises(TokenEndpointError) as info:
            await provider.token()
        assert endpoint.url in str(info.value) and "HTTP 401" in str(info.value) and "invalid_client" in str(info.value)
        assert time.monotonic() - started < 5 and len(endpoint.requests) == 1  # a 4xx is not retried


@pytest.mark.parametrize(("change", "named"), [
    (lambda p: p.pop("sasl.oauthbearer.token.endpoint.url"), "sasl.oauthbearer.token.endpoint.url: required"),
    (lambda p: p.update({"sasl.login.callback.handler.class": "com.example.Handler"}),
     "sasl.login.callback.handler.class=com.example.Handler"),
    (lambda p: p.update({"sasl.jaas.config": f'{MODULE} required clientId="x";'}), "clientSecret missing"),
    (lambda p: p.update({"sasl.mechanism": "GSSAPI"}), "sasl.mechanism=GSSAPI"),
    (lambda p: p.update({"sasl.mechanism": "SCRAM-SHA-512"}),
     "an OAUTHBEARER setting, but sasl.mechanism=SCRAM-SHA-512"),
    (lambda p: p.update({"sasl.login.refresh.window.factor": "0.2"}), "sasl.login.refresh.window.factor=0.2"),
])
def test_what_cannot_be_honoured_is_refused_by_key(change: Callable[[dict[str, str]], Any], named: str) -> None:
    props = oauth_props("https://idp.example.com/oauth2/token")
    change(props)
    with pytest.raises(ValueError) as info:
        security_settings(props)
    assert named in str(info.value)
