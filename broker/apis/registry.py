"""One registry of API handlers; both dispatch and ApiVersions read it.

Each handler module declares the versions it serves with ``@api(key, min, max)``.
A handler gets the request context and the decoded request and returns the response
body as plain dicts (built into the versioned message class here) or None for no
response (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol.codec import RequestHeader, build_response

if TYPE_CHECKING:
    from ..cluster import Cluster

__all__ = ["ApiSpec", "RequestContext", "REGISTRY", "api"]

Handler = Callable[["RequestContext", Any], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class ApiSpec:
    key: int
    min_version: int
    max_version: int
    handler: Handler


REGISTRY: dict[int, ApiSpec] = {}


def api(key: int, min: int = 0, max: int = 0) -> Callable[[Handler], Handler]:  # noqa: A002 - Kafka's words
    def register(handler: Handler) -> Handler:
        if key in REGISTRY:
            raise RuntimeError(f"API key {key} registered twice")
        REGISTRY[key] = ApiSpec(key, min, max, handler)
        return handler

    return register


@dataclass
class RequestContext:
    cluster: Cluster
    header: RequestHeader
    peer: str
    services: dict[str, Any]
    closing: Callable[[], bool] = lambda: False

    @property
    def version(self) -> int:
        return self.header.api_version

    def response(self, values: dict[str, Any]) -> Any:
        return build_response(self.header.api_key, self.header.api_version, values)
