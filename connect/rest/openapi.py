"""An OpenAPI 3 description of the REST API, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

__all__ = ["openapi_document"]

_ERROR = {"type": "object", "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}}}
_CONFIG = {"type": "object", "additionalProperties": {"type": "string"}}
_INFO = {"type": "object", "properties": {
    "name": {"type": "string"}, "config": _CONFIG, "type": {"type": "string", "enum": ["source", "sink", "unknown"]},
    "tasks": {"type": "array", "items": {"type": "object", "properties": {
        "connector": {"type": "string"}, "task": {"type": "integer"}}}}}}
_STATE = {"type": "object", "properties": {"state": {"type": "string"}, "worker_id": {"type": "string"},
                                           "trace": {"type": "string"}}}
_STATUS = {"type": "object", "properties": {
    "name": {"type": "string"}, "connector": _STATE, "type": {"type": "string"},
    "tasks": {"type": "array", "items": {"allOf": [_STATE, {"type": "object", "properties": {
        "id": {"type": "integer"}}}]}}}}
_OFFSETS = {"type": "object", "properties": {"offsets": {"type": "array", "items": {"type": "object", "properties": {
    "partition": {"type": "object"}, "offset": {"type": "object", "nullable": True}}}}}}

_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_TASK = {"name": "task", "in": "path", "required": True, "schema": {"type": "integer"}}
_PLUGIN = {"name": "plugin", "in": "path", "required": True, "schema": {"type": "string"}}


def _op(summary: str, status: str, schema: dict[str, Any] | None = None, body: dict[str, Any] | None = None,
        params: list[dict[str, Any]] | None = None, errors: tuple[str, ...] = ()) -> dict[str, Any]:
    responses: dict[str, Any] = {status: {"description": summary}}
    if schema is not None:
        responses[status]["content"] = {"application/json": {"schema": schema}}
    for code in errors:
        responses[code] = {"description": "error", "content": {"application/json": {"schema": _ERROR}}}
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def openapi_document(version: str) -> dict[str, Any]:
    create = {"type": "object", "required": ["name", "config"], "properties": {
        "name": {"type": "string"}, "config": _CONFIG,
        "initial_state": {"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"]}}}
    paths = {
        "/": {"get": _op("Worker version", "200", {"type": "object"})},
        "/health": {"get": _op("Worker health", "200", {"type": "object"}, errors=("503",))},
        "/connectors": {
            "get": _op("List connectors", "200", {"oneOf": [{"type": "array", "items": {"type": "string"}},
                                                             {"type": "object"}]},
                       params=[{"name": "expand", "in": "query", "schema": {"type": "string",
                                                                           "enum": ["status", "info"]}}]),
            "post": _op("Create a connector", "201", _INFO, body=create, errors=("400", "409")),
        },
        "/connectors/{name}": {"get": _op("Connector info", "200", _INFO, params=[_NAME], errors=("404",)),
                               "delete": _op("Delete a connector", "204", params=[_NAME], errors=("404",))},
        "/connectors/{name}/config": {
            "get": _op("Connector config", "200", _CONFIG, params=[_NAME], errors=("404",)),
            "put": _op("Create or replace a config", "200", _INFO, body=_CONFIG, params=[_NAME], errors=("400",)),
            "patch": _op("Patch a config (null removes a key)", "200", _INFO, body=_CONFIG, params=[_NAME],
                         errors=("400", "404")),
        },
        "/connectors/{name}/status": {"get": _op("Connector status", "200", _STATUS, params=[_NAME], errors=("404",))},
        "/connectors/{name}/tasks": {"get": _op("Task configs", "200", {"type": "array"}, params=[_NAME])},
        "/connectors/{name}/tasks/{task}/status": {"get": _op("Task status", "200", _STATE, params=[_NAME, _TASK],
                                                              errors=("404",))},
        "/connectors/{name}/tasks/{task}/restart": {"post": _op("Restart a task", "204", params=[_NAME, _TASK],
                                                                errors=("404",))},
        "/connectors/{name}/restart": {"post": _op("Restart a connector (and tasks)", "204", params=[
            _NAME, {"name": "includeTasks", "in": "query", "schema": {"type": "boolean"}},
            {"name": "onlyFailed", "in": "query", "schema": {"type": "boolean"}}], errors=("404",))},
        "/connectors/{name}/pause": {"put": _op("Pause", "202", params=[_NAME], errors=("404",))},
        "/connectors/{name}/resume": {"put": _op("Resume", "202", params=[_NAME], errors=("404",))},
        "/connectors/{name}/stop": {"put": _op("Stop", "204", params=[_NAME], errors=("404",))},
        "/connectors/{name}/topics": {"get": _op("Active topics", "200", {"type": "object"}, params=[_NAME])},
        "/connectors/{name}/topics/reset": {"put": _op("Reset active topics", "202", params=[_NAME])},
        "/connectors/{name}/offsets": {
            "get": _op("Offsets", "200", _OFFSETS, params=[_NAME], errors=("404",)),
            "patch": _op("Alter offsets of a stopped connector", "200", {"type": "object"}, body=_OFFSETS,
                         params=[_NAME], errors=("400", "404")),
            "delete": _op("Reset offsets of a stopped connector", "200", {"type": "object"}, params=[_NAME],
                          errors=("400", "404")),
        },
        "/connector-plugins": {"get": _op("Installed plugins", "200", {"type": "array"}, params=[
            {"name": "connectorsOnly", "in": "query", "schema": {"type": "boolean"}}])},
        "/connector-plugins/{plugin}/config": {"get": _op("Config definitions", "200", {"type": "array"},
                                                          params=[_PLUGIN], errors=("400",))},
        "/connector-plugins/{plugin}/config/validate": {"put": _op("Validate a config", "200", {"type": "object"},
                                                                   body=_CONFIG, params=[_PLUGIN], errors=("400",))},
        "/admin/loggers": {"get": _op("Logger levels", "200", {"type": "object"})},
        "/admin/loggers/{logger}": {
            "get": _op("One logger", "200", {"type": "object"}, params=[
                {"name": "logger", "in": "path", "required": True, "schema": {"type": "string"}}], errors=("404",)),
            "put": _op("Set a level", "200", {"type": "array"}, body={"type": "object", "properties": {
                "level": {"type": "string"}}}, params=[
                {"name": "logger", "in": "path", "required": True, "schema": {"type": "string"}}], errors=("400",)),
        },
    }
    return {"openapi": "3.0.3", "info": {"title": "Headwater Connect REST API", "version": version}, "paths": paths}
