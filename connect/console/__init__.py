"""The web console, served at ``/ui`` by every worker's REST listener: static files (HTML, CSS and
ES modules, no build step) that talk to the worker's REST API with ``fetch``."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

__all__ = ["STATIC", "add_console"]

STATIC = Path(__file__).resolve().parent / "static"
# The console loads nothing from elsewhere and runs no inline script: say so to the browser.
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                                       "frame-ancestors 'none'"}
_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}


async def _to_index(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound(request.path + "/")


async def _file(request: web.Request) -> web.StreamResponse:
    path = (STATIC / (request.match_info["path"] or "index.html")).resolve()
    if not path.is_relative_to(STATIC) or not path.is_file():
        raise web.HTTPNotFound(reason=f"No console file {request.path}")
    headers = dict(_HEADERS)
    if path.suffix in _TYPES:  # the platform's MIME table may not know them all (modules need a JS type)
        headers["Content-Type"] = _TYPES[path.suffix] + ("; charset=utf-8" if path.suffix != ".svg" else "")
    return web.FileResponse(path, headers=headers)


def add_console(app: web.Application) -> None:
    """Serve the console at ``/ui/`` (``/ui`` redirects there). Not JSON: not in the OpenAPI document."""
    app.router.add_get("/ui", _to_index)
    app.router.add_get("/ui/{path:.*}", _file)
