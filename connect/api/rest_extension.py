"""REST extensions (Kafka's ``ConnectRestExtension``, KIP-285): a plugin that wraps the worker's REST API,
for authentication (basic auth ships built in; an author can add OIDC) or extra resources.

Listed in the worker's ``rest.extension.classes``, each is built once per worker, configured with the
worker's properties, and registers with the REST server before it starts listening.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RestExtension"]


class RestExtension:
    """Subclass and return the class from the ``headwater_rest_extensions`` hook."""

    def configure(self, configs: dict[str, str]) -> None:
        """The worker's properties (all of them, as strings). Raise ``ConfigException`` naming the key
        when one is wrong: the worker refuses to start."""

    def register(self, context: Any) -> None:
        """Add middlewares or routes through ``context`` (``headwater.connect.rest.extensions.RestContext``:
        ``add_middleware``, ``add_route``, ``is_internal_request(request)`` for worker-to-worker requests, which
        an authentication lets through, and ``error(status, message, headers)`` for Kafka's error body).
        The middlewares run after the worker's own Host and Origin checks, in the order of
        ``rest.extension.classes``."""
        raise NotImplementedError

    def close(self) -> None:
        """The worker stops."""
