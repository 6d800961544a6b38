"""The Kafka Connect REST API over a herder: same paths, JSON shapes and status codes.

Handlers are thin: they parse, call the herder, and shape the answer. Errors use
Kafka Connect's body ``{"error_code": <status>, "message": ...}``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..herder.base import BadRequest, Conflict, Herder, NotFound, NotLeader
from ..loggers import LEVELS, set_level
from ..loggers import levels as logger_levels
from ..plugins import UnknownPlugin
from ..runtime.worker import ConfigErrors
from ..status import TargetState
from .openapi import openapi_document
from .validate import validation_result

__all__ = ["build_app"]

log = logging.getLogger(__name__)

VERSION = "0.1.0"
HERDER: web.AppKey[Herder] = web.AppKey("herder", Herder)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error_code": status, "message": message}, status=status)


async def _forward(request: web.Request, url: str | None) -> web.StreamResponse:
    """Replay a leader-only request at the leader (Kafka's HerderRequestHandler)."""
    forward = request.query.get("forward")
    if url is None or forward == "false":
        return _error(409, "Cannot complete request because of a conflicting operation (e.g. worker rebalance)")
    import aiohttp

    query = [(k, v) for k, v in request.query.items() if k != "forward"]
    query.append(("forward", "false" if forward == "true" else "true"))
    body = await request.read()
    headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
    async with aiohttp.ClientSession() as session, session.request(
            request.method, url.rstrip("/") + request.path, params=query, data=body or None, headers=headers,
            timeout=aiohttp.ClientTimeout(total=90)) as resp:
        payload = await resp.read()
        out_headers = {k: v for k, v in resp.headers.items() if k in ("Content-Type", "Location")}
        return web.Response(status=resp.status, body=payload, headers=out_headers)


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except NotLeader as exc:
        return await _forward(request, exc.url)
    except web.HTTPException as exc:
        if exc.status >= 400:
            return _error(exc.status, exc.reason or exc.text or "")
        raise
    except NotFound as exc:
        return _error(404, str(exc))
    except Conflict as exc:
        return _error(409, str(exc))
    except (BadRequest, ConfigErrors) as exc:
        return _error(400, str(exc))
    except UnknownPlugin as exc:
        return _error(400, str(exc))
    except Exception as exc:
        log.exception("REST request %s %s failed", request.method, request.path)
        return _error(500, f"{type(exc).__name__}: {exc}")


async def _json(request: web.Request) -> Any:
    text = await request.text()
    if not text.strip():
        raise BadRequest("Request body is empty")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}") from None


def _herder(request: web.Request) -> Herder:
    return request.app[HERDER]


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").strip().lower() == "true"


routes = web.RouteTableDef()


@routes.get("/")
async def root(request: web.Request) -> web.Response:
    return web.json_response({"version": VERSION, "commit": "headwater", "kafka_cluster_id": "headwater-cluster"})


@routes.get("/health")
async def health(request: web.Request) -> web.Response:
    if _herder(request).ready():
        return web.json_response({"status": "healthy", "message": "Worker has completed startup and is ready to "
                                                                  "handle requests."})
    return web.json_response({"status": "starting", "message": "Worker is still starting up."}, status=503)


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document(VERSION))


@routes.get("/connectors")
async def list_connectors(request: web.Request) -> web.Response:
    herder = _herder(request)
    expand = set(request.query.getall("expand", []))
    names = herder.connector_names()
    if not expand & {"status", "info"}:
        return web.json_response(names)
    out: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {}
        if "status" in expand:
            entry["status"] = herder.connector_status(name)
        if "info" in expand:
            entry["info"] = herder.connector_info(name)
        out[name] = entry
    return web.json_response(out)


@routes.post("/connectors")
async def create_connector(request: web.Request) -> web.Response:
    body = await _json(request)
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object with \"name\" and \"config\"")
    name = body.get("name")
    config = body.get("config")
    if not isinstance(config, dict):
        raise BadRequest("Connector config is missing: the body needs a \"config\" object")
    if not name:
        name = config.get("name")
    if not isinstance(name, str) or not name.strip():
        raise BadRequest("Connector name is missing: set \"name\"")
    name = name.strip()
    if "/" in name:
        raise BadRequest(f"Connector name {name!r} must not contain '/'")
    initial = body.get("initial_state")
    state = None
    if initial is not None:
        try:
            state = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED,
                     "STOPPED": TargetState.STOPPED}[str(initial).upper()]
        except KeyError:
            raise BadRequest(f"Invalid initial_state {initial!r}: use RUNNING, PAUSED or STOPPED") from None
    herder = _herder(request)
    await herder.put_connector_config(name, config, allow_replace=False, initial_state=state)
    return web.json_response(herder.connector_info(name), status=201, headers={"Location": f"/connectors/{name}"})


@routes.get("/connectors/{name}")
async def get_connector(request: web.Request) -> web.Response:
    return web.json_response(_herder(request).connector_info(request.match_info["name"]))


@routes.delete("/connectors/{name}")
async def delete_connector(request: web.Request) -> web.Response:
    await _herder(request).delete_connector(request.match_info["name"])
    return web.Response(status=204)


@routes.get("/connectors/{name}/config")
async def get_config(request: web.Request) -> web.Response:
    herder = _herder(request)
    return web.json_response(herder.connector_info(request.match_info["name"])["config"])


@routes.put("/connectors/{name}/config")
async def put_config(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    config = await _json(request)
    if not isinstance(config, dict):
        raise BadRequest("The connector config must be a JSON object")
    herder = _herder(request)
    created = await herder.put_connector_config(name, config, allow_replace=True)
    status = 201 if created else 200
    headers = {"Location": f"/connectors/{name}"} if created else None
    return web.json_response(herder.connector_info(name), status=status, headers=headers)


@routes.patch("/connectors/{name}/config")
async def patch_config(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    patch = await _json(request)
    if not isinstance(patch, dict):
        raise BadRequest("The config patch must be a JSON object")
    herder = _herder(request)
    config = dict(herder.connector_info(name)["config"])
    for key, value in patch.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    await herder.put_connector_config(name, config, allow_replace=True)
    return web.json_response(herder.connector_info(name))


@routes.get("/connectors/{name}/status")
async def connector_status(request: web.Request) -> web.Response:
    return web.json_response(_herder(request).connector_status(request.match_info["name"]))


@routes.get("/connectors/{name}/tasks")
async def tasks(request: web.Request) -> web.Response:
    return web.json_response(_herder(request).tasks(request.match_info["name"]))


@routes.post("/connectors/{name}/tasks")
async def put_task_configs(request: web.Request) -> web.Response:
    """Internal: a follower running the connector hands its task configs to the leader."""
    herder = _herder(request)
    configs = await _json(request)
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        raise BadRequest("Task configs must be a JSON array of objects")
    await herder.put_task_configs(request.match_info["name"],
                                  [{str(k): str(v) for k, v in c.items()} for c in configs])
    return web.Response(status=204)


@routes.get("/connectors/{name}/tasks-config")
async def tasks_config(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return web.json_response({f"{name}-{t['id']['task']}": t["config"] for t in _herder(request).tasks(name)})


def _task_number(request: web.Request) -> int:
    try:
        return int(request.match_info["task"])
    except ValueError:
        raise NotFound(f"Task {request.match_info['task']} not found") from None


@routes.get("/connectors/{name}/tasks/{task}/status")
async def task_status(request: web.Request) -> web.Response:
    return web.json_response(_herder(request).task_status(request.match_info["name"], _task_number(request)))


@routes.post("/connectors/{name}/tasks/{task}/restart")
async def restart_task(request: web.Request) -> web.Response:
    await _herder(request).restart_task(request.match_info["name"], _task_number(request))
    return web.Response(status=204)


@routes.post("/connectors/{name}/restart")
async def restart_connector(request: web.Request) -> web.Response:
    result = await _herder(request).restart_connector(request.match_info["name"], _flag(request, "includeTasks"),
                                                      _flag(request, "onlyFailed"))
    if result is None:
        return web.Response(status=204)
    return web.json_response(result, status=202)


@routes.put("/connectors/{name}/pause")
async def pause(request: web.Request) -> web.Response:
    await _herder(request).set_target_state(request.match_info["name"], TargetState.PAUSED)
    return web.Response(status=202)


@routes.put("/connectors/{name}/resume")
async def resume(request: web.Request) -> web.Response:
    await _herder(request).set_target_state(request.match_info["name"], TargetState.STARTED)
    return web.Response(status=202)


@routes.put("/connectors/{name}/stop")
async def stop(request: web.Request) -> web.Response:
    await _herder(request).set_target_state(request.match_info["name"], TargetState.STOPPED)
    return web.Response(status=204)


@routes.get("/connectors/{name}/topics")
async def active_topics(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    herder = _herder(request)
    return web.json_response({name: {"topics": herder.active_topics(name)}})


@routes.put("/connectors/{name}/topics/reset")
async def reset_topics(request: web.Request) -> web.Response:
    _herder(request).reset_active_topics(request.match_info["name"])
    return web.Response(status=202)


@routes.get("/connectors/{name}/offsets")
async def get_offsets(request: web.Request) -> web.Response:
    offsets = await _herder(request).connector_offsets(request.match_info["name"])
    return web.json_response({"offsets": offsets})


@routes.patch("/connectors/{name}/offsets")
async def patch_offsets(request: web.Request) -> web.Response:
    body = await _json(request)
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), list) or not body["offsets"]:
        raise BadRequest("The request body must be {\"offsets\": [{\"partition\": {...}, \"offset\": {...}}, ...]}")
    await _herder(request).alter_offsets(request.match_info["name"], body["offsets"])
    return web.json_response({"message": "The offsets for this connector have been altered successfully"})


@routes.delete("/connectors/{name}/offsets")
async def delete_offsets(request: web.Request) -> web.Response:
    await _herder(request).alter_offsets(request.match_info["name"], None)
    return web.json_response({"message": "The offsets for this connector have been reset successfully"})


@routes.get("/connector-plugins")
async def plugins(request: web.Request) -> web.Response:
    only = request.query.get("connectorsOnly", "true").strip().lower() != "false"
    kinds = {"source", "sink"} if only else None
    seen = set()
    out = []
    for info in _herder(request).registry.plugins(kinds):
        key = (info.class_name, info.kind)
        if key not in seen:
            seen.add(key)
            out.append(info.to_json())
    return web.json_response(sorted(out, key=lambda p: (p["type"], p["class"])))


@routes.get("/connector-plugins/{plugin}/config")
async def plugin_config(request: web.Request) -> web.Response:
    from .validate import config_definitions

    cls = _herder(request).registry.connector(request.match_info["plugin"])
    return web.json_response(config_definitions(cls))


@routes.put("/connector-plugins/{plugin}/config/validate")
async def validate(request: web.Request) -> web.Response:
    props = await _json(request)
    if not isinstance(props, dict):
        raise BadRequest("The config to validate must be a JSON object")
    herder = _herder(request)
    plugin = request.match_info["plugin"]
    requested = herder.registry.connector(plugin)
    given = props.get("connector.class")
    if given is not None:
        try:
            actual = herder.registry.connector(str(given))
        except UnknownPlugin:
            actual = None
        if actual is not requested:
            raise BadRequest("Included connector type " + str(given) + " does not match request type " + plugin)
    props = {**props, "connector.class": props.get("connector.class") or plugin}
    cls, errors = herder.validate(props)
    return web.json_response(validation_result(cls, props, errors))


@routes.get("/admin/loggers")
async def loggers(request: web.Request) -> web.Response:
    return web.json_response(logger_levels())


@routes.get("/admin/loggers/{logger}")
async def logger(request: web.Request) -> web.Response:
    name = request.match_info["logger"]
    levels = logger_levels()
    if name not in levels:
        raise NotFound(f"Logger {name} not found.")
    return web.json_response(levels[name])


@routes.put("/admin/loggers/{logger}")
async def set_logger(request: web.Request) -> web.Response:
    name = request.match_info["logger"]
    body = await _json(request)
    level = str((body or {}).get("level", "")).upper() if isinstance(body, dict) else ""
    if level not in LEVELS:
        raise BadRequest(f"Invalid log level '{level}'.")
    scope = request.query.get("scope", "worker").lower()
    if scope not in ("worker", "cluster"):
        raise BadRequest(f"Invalid scope '{scope}': use worker or cluster")
    if scope == "cluster":
        await _herder(request).set_cluster_logger_level(name, level)
        return web.Response(status=204)
    return web.json_response(set_level(name, level))


def build_app(herder: Herder) -> web.Application:
    app = web.Application(middlewares=[errors_middleware])
    app[HERDER] = herder
    app.add_routes(routes)
    return app
