"""What a REST extension (``rest.extension.classes``) is given to register with: :class:`RestContext`.

An extension adds aiohttp middlewares, which run after the worker's own request checks (Host, Origin,
CORS) and before the handlers, in the order the extensions are listed; and routes of its own. An
authentication extension lets worker-to-worker requests through (``is_internal_request``: they are
authenticated by their signature) and answers a refusal with ``error`` (Kafka Connect's JSON body).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..api.errors import ConfigException
from ..api.rest_extension import RestExtension
from ..config import WorkerConfig, WorkerConfigError
from ..plugins import PluginRegistry, UnknownPlugin
from .checks import error_response, is_internal_request

__all__ = ["Middleware", "RestContext", "close_extensions", "load_extensions", "worker_properties"]

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


class RestContext:
    """The worker's REST server as an extension sees it while registering."""

    #: True for a worker-to-worker request (exempt from authentication, as in Kafka)
    is_internal_request = staticmethod(is_internal_request)
    #: an answer in Kafka Connect's error body: ``error(401, "...", {"WWW-Authenticate": ...})``
    error = staticmethod(error_response)

    def __init__(self, app: web.Application, config: WorkerConfig) -> None:
        self._app = app
        self.config = config
        self.configs = worker_properties(config)
        self.middlewares: list[Middleware] = []

    def add_middleware(self, middleware: Middleware) -> None:
        """An aiohttp middleware (``async def mw(request, handler)``, decorated with ``@web.middleware``)."""
        self.middlewares.append(middleware)

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """A resource of the extension's own (``/my-extension/...``), behind the same checks and middlewares."""
        self._app.router.add_route(method, path, handler)


def worker_properties(config: WorkerConfig) -> dict[str, str]:
    """The worker's properties as strings, by Kafka's names (what ``configure`` is given)."""
    return {k: str(v) for k, v in config.model_dump(by_alias=True).items() if v is not None}


def load_extensions(config: WorkerConfig, registry: PluginRegistry) -> list[RestExtension]:
    """``rest.extension.classes`` built and configured; a WorkerConfigError naming the key when a class is not
    installed or refuses its configuration (the worker does not start)."""
    out: list[RestExtension] = []
    configs = worker_properties(config)
    try:
        for name in (n.strip() for n in config.rest_extension_classes.split(",")):
            if not name:
                continue
            try:
                cls = registry.rest_extension(name)
            except UnknownPlugin as exc:
                raise WorkerConfigError(f"rest.extension.classes: {exc}") from None
            extension: Any = cls()
            out.append(extension)
            try:
                extension.configure(configs)
            except ConfigException as exc:  # its message names the key
                raise WorkerConfigError(str(exc)) from None
            except Exception as exc:
                raise WorkerConfigError(f"rest.extension.classes: {name} refused its configuration: "
                                        f"{type(exc).__name__}: {exc}") from exc
    except BaseException:
        close_extensions(out)
        raise
    return out


def close_extensions(extensions: list[RestExtension]) -> None:
    for extension in extensions:
        try:
            extension.close()
        except Exception:
            log.exception("closing REST extension %s failed", type(extension).__name__)
