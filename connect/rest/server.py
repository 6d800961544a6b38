"""The worker's REST server: one site per listener (``listeners``, KIP-495's ``admin.listeners``), HTTPS with
Kafka's ``ssl.*`` keys, the request checks (``checks.py``) and the REST extensions (``rest.extension.classes``).

Everything a key can get wrong (a keystore that cannot be read, an unknown extension class, an extension
that refuses its configuration) is found by :meth:`RestServer.prepare`, before the worker joins its group.
TLS contexts come from the floor's ``headwater.kafka.server_tls``, the same reader as the broker's listeners.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field

from aiohttp import web
from pydantic import ValidationError

from headwater.kafka.server_tls import SSL_KEYS, BadSetting, SslConfig, server_context

from ..api.rest_extension import RestExtension
from ..config import WorkerConfig, WorkerConfigError
from ..herder.interface import Herder
from ..plugins import PluginRegistry
from .app import build_app
from .checks import RequestChecks, ServedListener
from .extensions import RestContext, close_extensions, load_extensions
from .internal_client import client_ssl
from .listeners import RestListener

__all__ = ["RestServer", "listener_ssl_context", "served_listeners"]

log = logging.getLogger(__name__)

_PREFIXES = {"listeners": "listeners.https.", "admin.listeners": "admin.listeners.https."}


def listener_ssl_context(config: WorkerConfig, key: str = "listeners") -> ssl.SSLContext:
    """The server context of ``key``'s https listeners; WorkerConfigError naming the property otherwise."""
    props, prefix = config.rest_ssl(_PREFIXES[key])
    if prefix == "":  # the worker's ssl.*: its client-only keys are the Kafka clients' business
        props = {k: v for k, v in props.items() if k in SSL_KEYS}
    if not any(k in props for k in ("ssl.keystore.location", "ssl.keystore.key")):
        raise WorkerConfigError(f"{key}: an https:// listener needs a keystore: set {_PREFIXES[key]}ssl.keystore."
                                "location (or the worker's ssl.keystore.location)")
    try:
        return server_context(SslConfig.model_validate(props))
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "ssl"
        problem = "unknown property" if err["type"] == "extra_forbidden" else err["msg"]
        raise WorkerConfigError(f"{prefix}{name}: {problem}") from None
    except BadSetting as exc:
        raise WorkerConfigError(f"{prefix}{exc.key}: {exc.problem}") from None


def served_listeners(config: WorkerConfig) -> list[ServedListener]:
    """``listeners`` and ``admin.listeners`` as sites: unset ``admin.listeners`` puts ``/admin/*`` on the
    main listeners, empty turns it off, a list serves it there only (a listener in both lists serves both)."""
    admin = config.rest_admin_listeners()
    served = [ServedListener(listener, api=True, admin=admin is None) for listener in config.rest_listeners()]
    for listener in admin or []:
        same = next((s for s in served if s.listener == listener and listener.port != 0), None)
        if same is not None:
            same.admin = True
        else:
            served.append(ServedListener(listener, api=False, admin=True))
    ports = [s.listener.port for s in served if s.listener.port != 0]
    twice = sorted({p for p in ports if ports.count(p) > 1})
    if twice:
        raise WorkerConfigError(f"listeners: port {twice[0]} is given to two listeners (admin.listeners included)")
    return served


@dataclass
class RestServer:
    config: WorkerConfig
    served: list[ServedListener]
    contexts: dict[RestListener, ssl.SSLContext]
    extensions: list[RestExtension]
    runner: web.AppRunner | None = field(default=None)

    @classmethod
    def prepare(cls, config: WorkerConfig, registry: PluginRegistry) -> RestServer:
        """Listeners planned, keystores read, extensions built and configured; WorkerConfigError naming the key."""
        served = served_listeners(config)
        contexts: dict[RestListener, ssl.SSLContext] = {}
        for key, listeners in (("listeners", config.rest_listeners()),
                               ("admin.listeners", config.rest_admin_listeners() or [])):
            https = [x for x in listeners if x.scheme == "https"]
            if https:
                context = listener_ssl_context(config, key)
                contexts.update({x: context for x in https if x not in contexts})
        client_ssl(config)  # the trust of worker-to-worker calls, read now rather than at the first forward
        return cls(config, served, contexts, load_extensions(config, registry))

    async def start(self, herder: Herder) -> None:
        app = build_app(herder)
        checks = RequestChecks(self.config, self.served)
        context = RestContext(app, self.config)
        for extension in self.extensions:
            extension.register(context)
            log.info("REST extension %s registered", type(extension).__name__)
        for i, middleware in enumerate([checks.middleware, *context.middlewares]):
            app.middlewares.insert(i, middleware)  # type: ignore[arg-type]  # before the API's own error handling
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        for s in self.served:
            site = web.TCPSite(self.runner, s.listener.bind_host, s.listener.port, reuse_address=True,
                               ssl_context=self.contexts.get(s.listener))
            await site.start()
            sockets = getattr(site._server, "sockets", None) or []  # the bound port, when port 0 was asked
            s.port = sockets[0].getsockname()[1] if sockets else s.listener.port
            log.info("REST listener %s on port %d serves %s", s.listener, s.port,
                     " and ".join(w for w, on in (("the API", s.api), ("/admin", s.admin)) if on))

    async def stop(self) -> None:
        try:
            if self.runner is not None:
                await self.runner.cleanup()
        finally:
            close_extensions(self.extensions)
