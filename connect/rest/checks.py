"""Requests that are what they claim, checked before any handler or REST extension sees them.

- ``Host`` must be one of the worker's names (each listener's host, the advertised host name, localhost,
  127.0.0.1, ::1, and ``rest.allowed.hosts``; the port is not compared): a page on another site that
  resolves its own name to this worker (DNS rebinding) is answered 421.
- A state-changing request (POST, PUT, PATCH, DELETE) whose ``Origin`` is neither the worker's own nor one
  ``access.control.allow.origin`` allows, or that a browser marks ``Sec-Fetch-Site: cross-site``, is
  answered 403: a page elsewhere cannot restart, fence, delete or create through the operator's browser.
- CORS (Kafka's ``access.control.allow.origin`` / ``access.control.allow.methods``, as Jetty's
  CrossOriginFilter answers them) only when an origin is configured.
- KIP-495's ``admin.listeners``: ``/admin/*`` only on the listeners that serve it (404 elsewhere).

Errors are Kafka Connect's JSON body ``{"error_code", "message"}``.
"""

from __future__ import annotations

import fnmatch
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import web

from ..config import WorkerConfig
from .listeners import RestListener

__all__ = ["LISTENER", "STATE_CHANGING", "RequestChecks", "ServedListener", "error_response", "is_internal_request"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: ``request[LISTENER]``: the ServedListener the request came in on
LISTENER = "headwater.rest.listener"
# Kafka's InternalConnectResource: worker-to-worker calls, authenticated by their signature (KIP-507)
_INTERNAL = frozenset({("POST", "/connectors/{name}/tasks"), ("PUT", "/connectors/{name}/fence")})
_LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
_DEFAULT_METHODS = "GET,POST,HEAD"  # Jetty's CrossOriginFilter, when access.control.allow.methods is empty
_CORS_HEADERS = "X-Requested-With,Content-Type,Accept,Origin,Authorization"


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """An answer in Kafka Connect's error body."""
    return web.json_response({"error_code": status, "message": message}, status=status, headers=headers)


def is_internal_request(request: web.Request) -> bool:
    """A worker-to-worker request (a follower's task configs, a fence): exempt from the REST extensions'
    authentication as in Kafka, since these are authenticated by their signature instead."""
    resource = request.match_info.route.resource
    return resource is not None and (request.method, resource.canonical) in _INTERNAL


@dataclass
class ServedListener:
    """A listener as served: what it answers (the API, ``/admin/*``) and the port it got."""

    listener: RestListener
    api: bool = True  # everything but /admin/*
    admin: bool = True  # /admin/*
    port: int = 0  # once bound

    @property
    def scheme(self) -> str:
        return self.listener.scheme


def _host_name(host: str) -> str:
    """``name[:port]`` or ``[v6][:port]`` -> the name, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def _is_admin(path: str) -> bool:
    return path == "/admin" or path.startswith("/admin/")


class RequestChecks:
    """The checks as one aiohttp middleware (the outermost: before the REST extensions)."""

    def __init__(self, config: WorkerConfig, served: Iterable[ServedListener]) -> None:
        self.served = list(served)
        allowed = [h.strip().lower() for h in config.rest_allowed_hosts.split(",") if h.strip()]
        self.any_host = "*" in allowed
        names = {*_LOCAL_NAMES, *allowed}
        for s in self.served:
            if s.listener.wildcard:  # every interface: the machine's own names reach it too
                names.update({socket.gethostname().lower(), socket.getfqdn().lower()})
            elif s.listener.host:
                names.add(s.listener.host.lower())
        if config.rest_advertised_host_name:
            names.add(config.rest_advertised_host_name.lower())
        self.hosts = frozenset(_host_name(n) for n in names)
        self.origins = [o.strip() for o in config.access_control_allow_origin.split(",") if o.strip()]
        methods = config.access_control_allow_methods.strip() or _DEFAULT_METHODS
        self.methods = frozenset(m.strip().upper() for m in methods.split(",") if m.strip())

    def listener_of(self, request: web.Request) -> ServedListener:
        sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
        port = sockname[1] if isinstance(sockname, tuple) and len(sockname) > 1 else None
        for s in self.served:
            if s.port == port:
                return s
        return self.served[0]

    def host_allowed(self, host: str) -> bool:
        return self.any_host or _host_name(host) in self.hosts

    def cors_allows(self, origin: str, method: str) -> bool:
        """``origin`` may send ``method`` (``access.control.allow.origin``, ``*`` patterns as Jetty's)."""
        if method.upper() not in self.methods and method.upper() not in ("GET", "HEAD", "OPTIONS"):
            return False
        return any(o == "*" or o == origin or ("*" in o and fnmatch.fnmatchcase(origin, o)) for o in self.origins)

    def _preflight(self, request: web.Request, origin: str) -> web.StreamResponse | None:
        wanted = request.headers.get("Access-Control-Request-Method", "")
        if not self.origins or not self.cors_allows(origin, wanted) or wanted.upper() not in self.methods:
            return None  # no CORS answer: the browser refuses; the handler answers OPTIONS as it does (405)
        return web.Response(status=204, headers={
            "Access-Control-Allow-Origin": origin, "Access-Control-Allow-Methods": ",".join(sorted(self.methods)),
            "Access-Control-Allow-Headers": _CORS_HEADERS, "Access-Control-Allow-Credentials": "true",
            "Access-Control-Max-Age": "1800", "Vary": "Origin"})

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        served = self.listener_of(request)
        request[LISTENER] = served
        host = request.headers.get("Host")
        if host is not None and not self.host_allowed(host):
            return error_response(421, f"Host {host!r} is not a name of this worker (add it to rest.allowed.hosts)")
        if not (served.admin if _is_admin(request.path) else served.api):
            where = "admin.listeners" if _is_admin(request.path) else "listeners"
            return error_response(404, f"{request.path} is not served on this listener (see {where})")
        origin = request.headers.get("Origin")
        if origin is not None and request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            answer = self._preflight(request, origin)
            if answer is not None:
                return answer
        cors = origin is not None and bool(self.origins) and self.cors_allows(origin, request.method)
        if request.method in STATE_CHANGING and not cors:
            own = f"{request.scheme}://{host}".lower() if host is not None else None
            if origin is not None and origin.lower() != own:
                return error_response(403, f"Origin {origin!r} may not send {request.method} requests to this "
                                           "worker (access.control.allow.origin)")
            if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
                return error_response(403, f"A cross-site {request.method} request is refused "
                                           "(access.control.allow.origin)")
        response = await handler(request)
        if cors and origin is not None:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers.add("Vary", "Origin")
        return response
