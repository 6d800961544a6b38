"""The route table of the REST API and the OpenAPI document generated from it.

Each route is declared once, with its request body model, its success status and response
model, its query parameters and the error statuses it can answer; ``Api.document`` turns that
table and the pydantic models of ``models.py`` into the OpenAPI 3.1 document served at
``/openapi.json``, and ``Api.add_to`` registers the same table with aiohttp. Nothing is written
twice, so the document cannot drift from what the server does.

What a schema can say, the document says; a refusal that depends on the server's state (the
connector is not STOPPED, is a sink, has a lower ``tasks.max``) or on the plugin a config names
(its own keys) is declared with the route (``refusals``) and documented as such: the response
carries its reason and ``x-state-dependent: true``, so a client or a fuzzer can tell it from a
refusal of a request the document calls invalid.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from .models import NAME_PATTERN, ErrorMessage

__all__ = ["Api", "Operation", "Query"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Model = type[BaseModel]

_PATH_PARAM = re.compile(r"\{(\w+)\}")
# The path parameters and their schemas; a name that does not resolve answers 404.
_PATH_SCHEMAS: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "pattern": NAME_PATTERN},
    "task": {"type": "integer", "minimum": 0},
    "plugin": {"type": "string", "minLength": 1},
    "logger": {"type": "string", "minLength": 1},
    "topic": {"type": "string", "minLength": 1},
    "group": {"type": "string", "minLength": 1},
}
# aiohttp's default pattern for a path parameter refuses "{" and "}", which a group name may hold (and a
# topic name looked up may): these take any segment, so that such a name reaches the handler (and a 404).
_ROUTE_PATTERNS = {"topic": "[^/]+", "group": "[^/]+"}
_REASONS = {400: "Bad request: malformed JSON, a body that is not UTF-8, or an invalid value (named)",
            404: "Not found", 409: "Conflict: the name exists, or the cluster is rebalancing",
            413: "Request body too large", 415: "Unsupported media type: send application/json in UTF-8",
            500: "Internal server error", 503: "The worker is still starting, or Kafka cannot be reached"}


_INTEGER = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class Query:
    """A query parameter: a boolean (``true``/``false``), one of ``values``, an integer in
    [``minimum``, ``maximum``] (``integer``), or a free string."""

    name: str
    description: str
    values: tuple[str, ...] = ()
    boolean: bool = False
    repeated: bool = False
    integer: bool = False
    minimum: int | None = None
    maximum: int | None = None

    def schema(self) -> dict[str, Any]:
        one: dict[str, Any]
        if self.integer:
            one = {"type": "integer"}
            if self.minimum is not None:
                one["minimum"] = self.minimum
            if self.maximum is not None:
                one["maximum"] = self.maximum
        else:
            one = ({"type": "string", "enum": ["true", "false"]} if self.boolean
                   else {"type": "string", "enum": list(self.values)} if self.values
                   else {"type": "string"})
        return {"type": "array", "items": one} if self.repeated else one

    def problem(self, value: str) -> str | None:
        """Why ``value`` is not what the document says this parameter holds (None when it is)."""
        if self.integer:
            low, high = self.minimum, self.maximum
            if not _INTEGER.fullmatch(value) or (low is not None and int(value) < low) or (
                    high is not None and int(value) > high):
                return (f"Invalid value {value!r} for query parameter {self.name}: use an integer"
                        f"{f' from {low}' if low is not None else ''}{f' to {high}' if high is not None else ''}")
            return None
        allowed = ("true", "false") if self.boolean else self.values
        if allowed and value not in allowed:
            return f"Invalid value {value!r} for query parameter {self.name}: use one of {', '.join(allowed)}"
        return None


@dataclass
class Operation:
    method: str
    path: str
    handler: Handler
    summary: str
    status: int
    response: tuple[Model, ...]
    body: Model | None
    query: tuple[Query, ...]
    errors: tuple[int, ...]
    also: dict[int, Model | None]
    refusals: dict[int, str]


@dataclass
class Api:
    operations: list[Operation] = field(default_factory=list)

    def route(self, method: str, path: str, summary: str, *, status: int = 200,
              response: Model | tuple[Model, ...] = (), body: Model | None = None, query: tuple[Query, ...] = (),
              errors: tuple[int, ...] = (), also: dict[int, Model | None] | None = None,
              refusals: dict[int, str] | None = None) -> Callable[[Handler], Handler]:
        """Declare an operation: its success ``status`` and ``response`` model(s), other success
        statuses it may answer (``also``: status -> model, None for no body), its error statuses, and
        the error statuses a request the document calls valid may still get (``refusals``: status ->
        why, naming the state or plugin rule the schema cannot say). 404 is added for paths with
        parameters, 400 for bodies and query parameters, 413 and 415 for bodies, 500 for all."""
        implied = {500} | set(refusals or {})
        if _PATH_PARAM.search(path):
            implied.add(404)
        if body is not None:
            implied |= {400, 413, 415}
        if query:
            implied.add(400)
        codes = tuple(sorted(implied | set(errors)))
        models = response if isinstance(response, tuple) else (response,)

        def register(handler: Handler) -> Handler:
            self.operations.append(Operation(method, path, handler, summary, status, models, body, query, codes,
                                             dict(also or {}), dict(refusals or {})))
            return handler

        return register

    def include(self, other: Api) -> None:
        """Add the operations another module declared in a table of its own (after those here)."""
        self.operations.extend(other.operations)

    def allowed(self, path: str) -> list[str]:
        """The methods declared for the route pattern ``path`` (the ``Allow`` header of a 405)."""
        return sorted({op.method for op in self.operations if op.path == path})

    def add_to(self, app: web.Application) -> None:
        for op in self.operations:
            path = _PATH_PARAM.sub(lambda m: f"{{{m[1]}:{_ROUTE_PATTERNS[m[1]]}}}" if m[1] in _ROUTE_PATTERNS
                                   else m[0], op.path)
            app.router.add_route(op.method, path, op.handler)

    def query_of(self, method: str, path: str) -> tuple[Query, ...]:
        for op in self.operations:
            if op.method == method and op.path == path:
                return op.query
        return ()

    def document(self, version: str, schemas: dict[str, Any] | None = None) -> dict[str, Any]:
        """The OpenAPI document; ``schemas`` are components only the running server knows (the
        installed plugins' names), which the models refer to by name."""
        components: dict[str, Any] = dict(schemas or {})
        paths: dict[str, dict[str, Any]] = {}
        for op in self.operations:
            paths.setdefault(op.path, {})[op.method.lower()] = self._operation(op, components)
        return {"openapi": "3.1.0",
                "info": {"title": "Headwater Connect REST API (Kafka Connect compatible)", "version": version},
                "paths": paths, "components": {"schemas": components}}

    def _operation(self, op: Operation, components: dict[str, Any]) -> dict[str, Any]:
        ok: dict[str, Any] = {"description": op.summary}
        if op.response:
            schemas = [_schema(m, components) for m in op.response]
            ok["content"] = {"application/json": {"schema": schemas[0] if len(schemas) == 1 else {"anyOf": schemas}}}
        responses: dict[str, Any] = {str(op.status): ok}
        for code, model in op.also.items():
            responses[str(code)] = {"description": op.summary}
            if model is not None:
                responses[str(code)]["content"] = {"application/json": {"schema": _schema(model, components)}}
        error = _schema(ErrorMessage, components)
        for code in op.errors:
            responses[str(code)] = {"description": _REASONS.get(code, "Error"),
                                    "content": {"application/json": {"schema": error}}}
        for code, why in op.refusals.items():
            responses[str(code)].update({"description": f"{_REASONS.get(code, 'Error')}; also {why}",
                                         "x-state-dependent": True})
        out: dict[str, Any] = {"summary": op.summary, "operationId": op.handler.__name__, "responses": responses}
        params = [{"name": name, "in": "path", "required": True, "schema": _PATH_SCHEMAS[name]}
                  for name in _PATH_PARAM.findall(op.path)]
        params += [{"name": q.name, "in": "query", "required": False, "description": q.description,
                    "schema": q.schema(), **({"style": "form", "explode": True} if q.repeated else {})}
                   for q in op.query]
        if params:
            out["parameters"] = params
        if op.body is not None:
            out["requestBody"] = {"required": True,
                                  "content": {"application/json": {"schema": _schema(op.body, components)}}}
        return out


def _schema(model: Model, components: dict[str, Any]) -> dict[str, Any]:
    """A reference to ``model``'s JSON schema, added (with the models it uses) to ``components``."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in schema.pop("$defs", {}).items():
        components.setdefault(name, sub)
    components.setdefault(model.__name__, schema)
    return {"$ref": f"#/components/schemas/{model.__name__}"}
