"""The Kafka Connect REST API over a herder: same paths, JSON shapes and status codes.

Handlers are thin: they parse, call the herder, and shape the answer. Each is declared in
the route table (``API``) with its body and response models, from which ``/openapi.json`` is
generated. Every error uses Kafka Connect's body ``{"error_code": <status>, "message": ...}``:
400 for malformed JSON (NaN and Infinity included, or nested too deeply), a body that is not
UTF-8 or an invalid value (named), 404, 405 (with ``Allow``), 409 during a rebalance, 413 past
``MAX_BODY_BYTES``, 415 for a body that is not ``application/json`` in UTF-8.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from ..console import add_console
from ..herder.errors import BadRequest, Conflict, NotFound, NotLeader
from ..herder.interface import Herder
from ..loggers import LEVELS, set_level
from ..loggers import levels as logger_levels
from ..plugins import UnknownPlugin
from ..runtime.worker import ConfigErrors
from ..status import TargetState
from . import admin_api
from . import models as m
from .openapi import Api, Query
from .redact import keep_hidden, redact, redact_info, redact_tasks
from .signature import SIGNED_HEADERS, RequestRefused
from .validate import config_definitions, validation_result

__all__ = ["build_app"]

log = logging.getLogger(__name__)

VERSION = "0.1.0"
HERDER: web.AppKey[Herder] = web.AppKey("herder")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Larger request bodies are answered 413 (a connector config is a few KiB).
MAX_BODY_BYTES = 1 << 20
API = Api()


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error_code": status, "message": message}, status=status)


async def _forward(request: web.Request, url: str | None) -> web.StreamResponse:
    """Replay a leader-only request at the leader (Kafka's HerderRequestHandler)."""
    forward = request.query.get("forward")
    if url is None or forward == "false":
        return _error(409, "Cannot complete request because of a conflicting operation (e.g. worker rebalance)")
    import aiohttp

    from .internal_client import internal_session

    query = [(k, v) for k, v in request.query.items() if k != "forward"]
    query.append(("forward", "false" if forward == "true" else "true"))
    body = await request.read()
    headers = {"Content-Type": request.headers.get("Content-Type", "application/json"),
               **{h: request.headers[h] for h in SIGNED_HEADERS if h in request.headers}}  # KIP-507: kept
    if "Authorization" in request.headers:  # the caller's credentials, as Kafka's RestClient forwards them
        headers["Authorization"] = request.headers["Authorization"]
    try:
        async with internal_session(_herder(request).config, aiohttp.ClientTimeout(total=90)) as session, \
                session.request(request.method, url.rstrip("/") + request.path, params=query, data=body or None,
                                headers=headers) as resp:
            payload = await resp.read()
            out_headers = {k: v for k, v in resp.headers.items() if k in ("Content-Type", "Location")}
            return web.Response(status=resp.status, body=payload, headers=out_headers)
    except aiohttp.ClientError as exc:  # the leader out of reach, or its TLS refused ours (Kafka's answer: 500)
        log.error("forwarding %s %s to the leader at %s failed: %s", request.method, request.path, url, exc)
        return _error(500, f"IO Error trying to forward REST request: {type(exc).__name__}: {exc}")


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        _check_query(request)
        return await handler(request)
    except NotLeader as exc:
        return await _forward(request, exc.url)
    except web.HTTPException as exc:
        if exc.status >= 400:
            resp = _error(exc.status, exc.text if exc.status == 413 and exc.text else exc.reason or "")
            if "Allow" in exc.headers:  # a 405 names the methods the resource has
                resp.headers["Allow"] = exc.headers["Allow"]
            return resp
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


def _check_query(request: web.Request) -> None:
    """Declared query parameters must hold what the document says they hold."""
    route = request.match_info.route
    resource = route.resource
    if resource is None:
        return
    for q in API.query_of(route.method, resource.canonical):
        for value in request.query.getall(q.name, []):
            problem = q.problem(value)
            if problem is not None:
                raise BadRequest(problem)


B = TypeVar("B", bound=BaseModel)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


async def _body(request: web.Request, model: type[B]) -> B:
    """The request body as ``model``: JSON (RFC 8259: no NaN or Infinity) in UTF-8, sent as
    application/json."""
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(
            reason=f"Unsupported Content-Type {request.content_type!r}: send application/json")
    if (request.charset or "utf-8").lower().replace("-", "") != "utf8":
        raise web.HTTPUnsupportedMediaType(
            reason=f"Unsupported charset {request.charset!r}: send application/json in UTF-8")
    raw = await request.read()  # 413 past client_max_size
    if not raw.strip():
        raise BadRequest("Request body is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Request body is not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadRequest("Request body is nested too deeply") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(_problems(exc)) from None


def _problems(exc: ValidationError) -> str:
    """One line naming each bad field of a request body and what is wrong with it."""
    out = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"] if p not in ("str", "int", "float", "bool")) or "body"
        out.append(f"{where}: {err['msg']}")
    return "Invalid request body: " + "; ".join(dict.fromkeys(out))


def _name(request: web.Request) -> str:
    return request.match_info["name"]


_VALID_NAME = re.compile(m.NAME_PATTERN)


def _new_name(request: web.Request) -> str:
    """The connector name of a path that may create the connector: as the document's pattern says."""
    name = _name(request)
    if not _VALID_NAME.fullmatch(name):  # not match: Python's $ also matches before a final newline
        raise BadRequest(f"Invalid connector name {name!r}: {m.NAME_RULE}")
    return name


def _location(name: str) -> dict[str, str]:
    return {"Location": "/connectors/" + urllib.parse.quote(name, safe="")}


def _herder(request: web.Request) -> Herder:
    return request.app[HERDER]


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").strip().lower() == "true"


# Kafka Connect ignores expand values it does not know, so the document does not restrict them.
_EXPAND = Query("expand", "Add each connector's status and/or info (status, info; others are ignored)",
                repeated=True)
_WRITE = (409,)  # a write may meet a rebalance (or, on create, an existing name)
# A config of the right shape whose connector.class is installed may still be refused: which keys it
# needs, and how they combine, is the plugin's (and the transforms' and converters' it names).
_PLUGIN_RULES = {400: "a config the plugin refuses (a key it needs, a value it cannot take, both or none of "
                      "topics and topics.regex, a transform, predicate or converter that is not installed or "
                      "not configured), each error naming its key"}
_STOPPED = "the connector is not STOPPED (Kafka Connect's answer: stop it first)"


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(data, status=status, headers=headers)


@API.route("GET", "/", "Worker version", response=m.ServerInfo)
async def root(request: web.Request) -> web.Response:
    return _json({"version": VERSION, "commit": "headwater", "kafka_cluster_id": "headwater-cluster"})


@API.route("GET", "/health", "Worker health", response=m.Health, errors=(503,))
async def health(request: web.Request) -> web.Response:
    if _herder(request).ready():
        return _json({"status": "healthy", "message": "Worker has completed startup and is ready to handle "
                                                      "requests."})
    return _json({"status": "starting", "message": "Worker is still starting up."}, status=503)


@API.route("GET", "/openapi.json", "This document")
async def openapi(request: web.Request) -> web.Response:
    names = _herder(request).registry.connector_names()  # as installed now: plugin.path may be watched
    return _json(API.document(VERSION, {m.CONNECTOR_CLASS: m.connector_class_schema(names)}))


@API.route("GET", "/connectors", "List connectors", response=(m.ConnectorNames, m.ConnectorsExpanded),
           query=(_EXPAND,))
async def list_connectors(request: web.Request) -> web.Response:
    herder = _herder(request)
    expand = set(request.query.getall("expand", [])) & {"status", "info"}
    names = herder.connector_names()
    if not expand:
        return _json(names)
    out: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {}
        if "status" in expand:
            entry["status"] = herder.connector_status(name)
        if "info" in expand:
            entry["info"] = redact_info(herder.registry, herder.connector_info(name))
        out[name] = entry
    return _json(out)


@API.route("POST", "/connectors", "Create a connector", status=201, response=m.ConnectorInfo,
           body=m.CreateConnector, errors=_WRITE, refusals=_PLUGIN_RULES)
async def create_connector(request: web.Request) -> web.Response:
    body = await _body(request, m.CreateConnector)
    name = body.name.strip()  # as Kafka Connect trims it; the pattern makes sure something is left
    state = None
    if body.initial_state is not None:
        state = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED,
                 "STOPPED": TargetState.STOPPED}[body.initial_state]
    herder = _herder(request)
    config = keep_hidden(herder.registry, name, body.config.as_strings(), None)
    await herder.put_connector_config(name, config, allow_replace=False, initial_state=state)
    return _json(redact_info(herder.registry, herder.connector_info(name)), status=201, headers=_location(name))


@API.route("GET", "/connectors/{name}", "Connector info", response=m.ConnectorInfo)
async def get_connector(request: web.Request) -> web.Response:
    herder = _herder(request)
    return _json(redact_info(herder.registry, herder.connector_info(_name(request))))


@API.route("DELETE", "/connectors/{name}", "Delete a connector", status=204, errors=_WRITE)
async def delete_connector(request: web.Request) -> web.Response:
    await _herder(request).delete_connector(_name(request))
    return web.Response(status=204)


@API.route("GET", "/connectors/{name}/config", "Connector config", response=m.ConnectorConfig)
async def get_config(request: web.Request) -> web.Response:
    herder = _herder(request)
    return _json(redact(herder.registry, herder.connector_info(_name(request))["config"]))


@API.route("PUT", "/connectors/{name}/config", "Create or replace a connector's config (201 when created)",
           response=m.ConnectorInfo, body=m.ConnectorConfig, errors=_WRITE, also={201: m.ConnectorInfo},
           refusals=_PLUGIN_RULES)
async def put_config(request: web.Request) -> web.Response:
    name = _new_name(request)
    config = await _body(request, m.ConnectorConfig)
    herder = _herder(request)
    given = keep_hidden(herder.registry, name, config.as_strings(), herder.connector_config(name))
    created = await herder.put_connector_config(name, given, allow_replace=True)
    info = redact_info(herder.registry, herder.connector_info(name))
    if created:
        return _json(info, status=201, headers=_location(name))
    return _json(info)


@API.route("PATCH", "/connectors/{name}/config", "Change some keys of a connector's config (null removes one)",
           response=m.ConnectorInfo, body=m.ConfigChanges, errors=_WRITE, refusals=_PLUGIN_RULES)
async def patch_config(request: web.Request) -> web.Response:
    name = _name(request)
    patch = await _body(request, m.ConfigChanges)
    herder = _herder(request)
    stored = dict(herder.connector_info(name)["config"])
    config = dict(stored)
    for key, value in patch.root.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = m.config_strings({key: value})[key]
    await herder.put_connector_config(name, keep_hidden(herder.registry, name, config, stored), allow_replace=True)
    return _json(redact_info(herder.registry, herder.connector_info(name)))


@API.route("GET", "/connectors/{name}/status", "Connector and task states", response=m.ConnectorStatus)
async def connector_status(request: web.Request) -> web.Response:
    return _json(_herder(request).connector_status(_name(request)))


@API.route("GET", "/connectors/{name}/tasks", "Task configs", response=m.TaskInfos)
async def tasks(request: web.Request) -> web.Response:
    herder, name = _herder(request), _name(request)
    return _json(redact_tasks(herder.registry, herder.connector_config(name), herder.tasks(name)))


_UNSIGNED = ("a request not signed with the session key (X-Connect-Authorization, "
             "X-Connect-Request-Signature-Algorithm, X-Connect-Request-Timestamp), signed too long ago, or replayed")


async def _unsigned(request: web.Request) -> web.Response | None:
    """The refusal of an internal request without a valid session-key signature (KIP-507), None when it has one:
    checked first, so nothing of an unsigned request is looked at."""
    try:
        _herder(request).verify_internal_request(await request.read(), request.headers)
    except RequestRefused as exc:
        return _error(exc.status, str(exc))
    return None


@API.route("POST", "/connectors/{name}/tasks", "Internal: a follower hands the task configs it made to the leader, "
           "signed with the cluster's session key (KIP-507)", status=204, body=m.TaskConfigs, errors=(*_WRITE, 503),
           refusals={400: "more task configs than the connector's tasks.max, or a task.class that is not the "
                          "connector's task class",
                     403: _UNSIGNED})
async def put_task_configs(request: web.Request) -> web.Response:
    name = _name(request)
    herder = _herder(request)
    if (refused := await _unsigned(request)) is not None:
        return refused
    configs = await _body(request, m.TaskConfigs)
    try:  # KIP-1004: never more tasks than tasks.max (a config that is here was validated: it is a number)
        limit = int((herder.connector_config(name) or {}).get("tasks.max", "1"))
    except ValueError:
        limit = None
    if limit is not None and len(configs.root) > limit:
        raise BadRequest(f"{len(configs.root)} task configs for connector {name}, whose tasks.max is {limit}")
    await herder.put_task_configs(name, [m.config_strings(c) for c in configs.root])
    return web.Response(status=204)


@API.route("PUT", "/connectors/{name}/fence", "Internal: a worker about to start exactly-once source tasks asks the "
           "leader to fence the transactional producers of the connector's older task generations (KIP-618); "
           "answered once the new task count is recorded, signed with the cluster's session key (KIP-507)",
           status=204, errors=(*_WRITE, 503),
           refusals={400: "a connector that is not a source connector, or a standalone worker",
                     403: _UNSIGNED})
async def fence_zombies(request: web.Request) -> web.Response:
    name = _name(request)
    if (refused := await _unsigned(request)) is not None:
        return refused
    await _herder(request).fence_zombies(name)
    return web.Response(status=204)


@API.route("GET", "/connectors/{name}/tasks-config", "Task configs by task name (deprecated in Kafka)",
           response=m.TasksConfig)
async def tasks_config(request: web.Request) -> web.Response:
    herder, name = _herder(request), _name(request)
    tasks = redact_tasks(herder.registry, herder.connector_config(name), herder.tasks(name))
    return _json({f"{name}-{t['id']['task']}": t["config"] for t in tasks})


def _task_number(request: web.Request) -> int:
    text = request.match_info["task"]
    if not text.isascii() or not text.isdigit():
        raise NotFound(f"Task {text} not found")
    return int(text)


@API.route("GET", "/connectors/{name}/tasks/{task}/status", "One task's state", response=m.TaskState)
async def task_status(request: web.Request) -> web.Response:
    return _json(_herder(request).task_status(_name(request), _task_number(request)))


@API.route("GET", "/connectors/{name}/tasks/{task}/metrics", "A running task's own figures (a CDC snapshot's "
           "progress, a replication slot's retained WAL, ...), answered by the worker that runs it",
           response=m.TaskMetrics)
async def task_metrics(request: web.Request) -> web.Response:
    return _json(_herder(request).task_metrics(_name(request), _task_number(request)))


@API.route("POST", "/connectors/{name}/tasks/{task}/restart", "Restart one task", status=204, errors=_WRITE)
async def restart_task(request: web.Request) -> web.Response:
    await _herder(request).restart_task(_name(request), _task_number(request))
    return web.Response(status=204)


@API.route("POST", "/connectors/{name}/restart", "Restart a connector (and, with includeTasks, its tasks); 202 "
           "with the states when tasks are included", status=204,
           query=(Query("includeTasks", "Restart the tasks too", boolean=True),
                  Query("onlyFailed", "Only what is FAILED", boolean=True)), errors=_WRITE,
           also={202: m.ConnectorStatus})
async def restart_connector(request: web.Request) -> web.Response:
    result = await _herder(request).restart_connector(_name(request), _flag(request, "includeTasks"),
                                                      _flag(request, "onlyFailed"))
    if result is None:
        return web.Response(status=204)
    return _json(result, status=202)


@API.route("PUT", "/connectors/{name}/pause", "Pause a connector and its tasks", status=202, errors=_WRITE)
async def pause(request: web.Request) -> web.Response:
    await _herder(request).set_target_state(_name(request), TargetState.PAUSED)
    return web.Response(status=202)


@API.route("PUT", "/connectors/{name}/resume", "Resume a paused or stopped connector", status=202, errors=_WRITE)
async def resume(request: web.Request) -> web.Response:
    await _herder(request).set_target_state(_name(request), TargetState.STARTED)
    return web.Response(status=202)


@API.route("PUT", "/connectors/{name}/stop", "Stop a connector (its tasks are shut down)", status=204,
           errors=_WRITE)
async def stop(request: web.Request) -> web.Response:
    await _herder(request).set_target_state(_name(request), TargetState.STOPPED)
    return web.Response(status=204)


@API.route("GET", "/connectors/{name}/topics", "Topics the connector used", response=m.ActiveTopics)
async def active_topics(request: web.Request) -> web.Response:
    name = _name(request)
    return _json({name: {"topics": _herder(request).active_topics(name)}})


@API.route("PUT", "/connectors/{name}/topics/reset", "Forget the connector's topics", status=202)
async def reset_topics(request: web.Request) -> web.Response:
    _herder(request).reset_active_topics(_name(request))
    return web.Response(status=202)


@API.route("GET", "/connectors/{name}/offsets", "The connector's committed offsets", response=m.ConnectorOffsets)
async def get_offsets(request: web.Request) -> web.Response:
    return _json({"offsets": await _herder(request).connector_offsets(_name(request))})


@API.route("PATCH", "/connectors/{name}/offsets", "Alter offsets of a STOPPED connector", response=m.Message,
           body=m.OffsetsAlter, errors=_WRITE,
           refusals={400: f"{_STOPPED}; or it is a sink connector and an entry is not in the sink form, or names "
                          f"a topic partition that does not exist"})
async def patch_offsets(request: web.Request) -> web.Response:
    body = await _body(request, m.OffsetsAlter)
    await _herder(request).alter_offsets(_name(request), body.entries())
    return _json({"message": "The offsets for this connector have been altered successfully"})


@API.route("DELETE", "/connectors/{name}/offsets", "Reset the offsets of a STOPPED connector", response=m.Message,
           errors=_WRITE, refusals={400: _STOPPED})
async def delete_offsets(request: web.Request) -> web.Response:
    await _herder(request).alter_offsets(_name(request), None)
    return _json({"message": "The offsets for this connector have been reset successfully"})


@API.route("GET", "/connector-plugins", "Installed plugins", response=m.PluginInfos,
           query=(Query("connectorsOnly", "false: converters, transforms and predicates too", boolean=True),))
async def plugins(request: web.Request) -> web.Response:
    only = request.query.get("connectorsOnly", "true") != "false"
    # Kafka lists connectors, converters, transforms and predicates; not REST extensions or config providers
    kinds = {"source", "sink"} if only else {"source", "sink", "converter", "header_converter", "transformation",
                                             "predicate"}
    seen = set()
    out = []
    for info in _herder(request).registry.plugins(kinds):
        key = (info.class_name, info.kind)
        if key not in seen:
            seen.add(key)
            out.append(info.to_json())
    return _json(sorted(out, key=lambda p: (p["type"], p["class"])))


def _connector_class(request: web.Request) -> type:
    plugin = request.match_info["plugin"]
    try:
        return _herder(request).registry.connector(plugin)
    except UnknownPlugin as exc:
        raise NotFound(str(exc)) from None


@API.route("GET", "/connector-plugins/{plugin}/config", "A connector plugin's config keys",
           response=m.PluginConfigDefs)
async def plugin_config(request: web.Request) -> web.Response:
    return _json(config_definitions(_connector_class(request)))


@API.route("PUT", "/connector-plugins/{plugin}/config/validate", "Validate a config for a connector plugin",
           response=m.ConfigInfos, body=m.ConfigPatch,
           refusals={400: "a connector.class that is not the plugin of the path"})
async def validate(request: web.Request) -> web.Response:
    requested = _connector_class(request)
    props = {k: v for k, v in (await _body(request, m.ConfigPatch)).root.items() if v is not None}
    herder = _herder(request)
    plugin = request.match_info["plugin"]
    given = props.get("connector.class")
    if given is not None:
        try:
            actual = herder.registry.connector(str(given))
        except UnknownPlugin:
            actual = None
        if actual is not requested:
            raise BadRequest("Included connector type " + str(given) + " does not match request type " + plugin)
    config = m.config_strings({**props, "connector.class": props.get("connector.class") or plugin})
    cls, errors = herder.validate(config)
    return _json(validation_result(cls, config, errors))


@API.route("GET", "/admin/loggers", "Log levels", response=m.LoggerLevels)
async def loggers(request: web.Request) -> web.Response:
    return _json(logger_levels())


@API.route("GET", "/admin/loggers/{logger}", "One logger's level", response=m.LoggerState)
async def logger(request: web.Request) -> web.Response:
    name = request.match_info["logger"]
    levels = logger_levels()
    if name not in levels:
        raise NotFound(f"Logger {name} not found.")
    return _json(levels[name])


@API.route("PUT", "/admin/loggers/{logger}", "Set a log level on this worker (204 with scope=cluster: on all)",
           response=m.LoggerNames, body=m.LoggerLevel, errors=_WRITE, also={204: None},
           query=(Query("scope", "worker (default) or cluster", ("worker", "cluster")),))
async def set_logger(request: web.Request) -> web.Response:
    name = request.match_info["logger"]
    level = (await _body(request, m.LoggerLevel)).level
    if level not in LEVELS:
        raise BadRequest(f"Invalid log level '{level}'.")
    if request.query.get("scope", "worker") == "cluster":
        await _herder(request).set_cluster_logger_level(name, level)
        return web.Response(status=204)
    return _json(set_level(name, level))


# Headwater's own: topics and consumer groups (/admin/topics, /admin/groups)
API.include(admin_api.ADMIN)


async def prometheus_metrics(request: web.Request) -> web.Response:
    """Prometheus' text format (not JSON, so not in the OpenAPI document)."""
    from .metrics import CONTENT_TYPE, scrape

    return web.Response(body=scrape(_herder(request)), headers={"Content-Type": CONTENT_TYPE})


def build_app(herder: Herder) -> web.Application:
    app = web.Application(middlewares=[errors_middleware], client_max_size=MAX_BODY_BYTES)
    app[HERDER] = herder
    API.add_to(app)
    config = herder.config
    admin_api.install(app, config.bootstrap_servers, {config.config_storage_topic, config.offset_storage_topic,
                                                      config.status_storage_topic}, config.client("admin"))
    app.router.add_get("/metrics", prometheus_metrics)
    add_console(app)
    return app
