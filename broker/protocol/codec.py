"""Request/response codec: our framing and header parsing, kafka-python's message classes.

Bodies are encoded and decoded by the classes kafka-python generates from Kafka's own
JSON schemas; this module is the only place that knows that, so the codec could be
replaced without touching the API handlers.
"""

from __future__ import annotations

import inspect
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol import admin, consumer, metadata, producer, sasl
from kafka.protocol.api_message import ApiMessage

from headwater.kafka.types import DecodeError, read_uvarint

from . import schemas

__all__ = [
    "MalformedRequest",
    "RequestHeader",
    "UnknownResponseField",
    "build_response",
    "decode_request",
    "encode_response",
    "encode_unsupported_api_versions",
    "parse_request_header",
    "request_class",
    "response_class",
]

_I16 = struct.Struct(">h")
_HEADER_FIXED = struct.Struct(">hhi")  # api key, api version, correlation id


class MalformedRequest(ValueError):
    """The frame cannot be parsed: the connection it came on is closed."""


def _collect() -> tuple[dict[int, type[ApiMessage]], dict[int, type[ApiMessage]]]:
    requests: dict[int, type[ApiMessage]] = {}
    responses: dict[int, type[ApiMessage]] = {}
    for module in (admin, consumer, metadata, producer, sasl, schemas):  # schemas: those kafka-python lacks
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
                message: Any = obj
                target = requests if message.is_request() else responses
                target[message.API_KEY] = message
    return requests, responses


_REQUESTS, _RESPONSES = _collect()


def request_class(api_key: int) -> type[ApiMessage] | None:
    return _REQUESTS.get(api_key)


def response_class(api_key: int) -> type[ApiMessage] | None:
    return _RESPONSES.get(api_key)


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos, max_bytes=5)
    except DecodeError as exc:
        raise MalformedRequest(f"bad unsigned varint in request header: {exc}") from None


def _flexible_header(api_key: int, api_version: int) -> bool:
    cls = _REQUESTS.get(api_key)
    return bool(cls is not None and 0 <= api_version <= (cls.max_version or 0) and cls.flexible_version_q(api_version))


# (api key, version) -> whether its request header has tagged fields, for every version the schemas define
_FLEXIBLE: dict[tuple[int, int], bool] = {
    (key, version): _flexible_header(key, version)
    for key, cls in _REQUESTS.items() for version in range((cls.max_version or 0) + 1)
}


def parse_request_header(frame: memoryview, flexible: bool | None = None) -> RequestHeader:
    """Parse the request header at the start of ``frame`` (size prefix already removed).

    ``flexible`` says whether the header carries tagged fields (header v2); when None it
    is worked out from the API's schema, and unknown APIs are taken as non-flexible.
    """
    if len(frame) < 10:
        raise MalformedRequest(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(frame, 0)
    (client_len,) = _I16.unpack_from(frame, 8)
    pos = 10
    client_id = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise MalformedRequest("client id runs past the end of the request")
        client_id = str(frame[pos : pos + client_len], "utf-8", "replace")
        pos += client_len
    elif client_len != -1:
        raise MalformedRequest(f"negative client id length {client_len}")
    if flexible is None:
        flexible = _FLEXIBLE.get((api_key, api_version))
        if flexible is None:
            flexible = _flexible_header(api_key, api_version)
    if flexible:
        if pos < len(frame) and frame[pos] == 0:  # no tagged fields: what clients send
            return RequestHeader(api_key, api_version, correlation_id, client_id, pos + 1)
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise MalformedRequest("tagged fields run past the end of the request header")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_request(header: RequestHeader, frame: memoryview) -> Any:
    """Decode the body of a request whose header was parsed by parse_request_header."""
    cls = _REQUESTS[header.api_key]
    version = header.api_version
    body = frame[header.body_offset :]
    flexible = cls.flexible_version_q(version)
    try:
        decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls[None])
        request, end = decode(body, 0)
    except Exception as exc:  # the generated decoders raise struct.error, ValueError, IndexError...
        raise MalformedRequest(f"{cls.name} v{version} body does not decode: {exc!r}") from None
    if end > len(body):
        # A string or bytes field claimed more than the frame holds: slicing would silently shorten it.
        raise MalformedRequest(f"{cls.name} v{version} body does not decode: its fields need {end} bytes but the "
                               f"request has {len(body)}")
    problem = _null_violation(cls._struct, request, version)
    if problem:
        raise MalformedRequest(f"{cls.name} v{version} body does not decode: {problem} is null but not nullable")
    return request


def _null_violation(struct_field: Any, value: Any, version: int, path: str = "") -> str | None:
    """The first array or string that is null where the schema does not allow it (Kafka's parser
    rejects these; the generated decoder lets them through)."""
    for name, f in struct_field.fields.items():
        if not f.for_version_q(version):
            continue
        item = getattr(value, name, None)
        where = f"{path}{name}"
        if item is None:
            if (f.is_array() or f.type_str == "string") and not f.nullable_for_version_q(version):
                return where
            continue
        if f.is_struct_array():
            for element in item:
                problem = _null_violation(f, element, version, f"{where}[].")
                if problem:
                    return problem
        elif f.is_struct():
            problem = _null_violation(f, item, version, f"{where}.")
            if problem:
                return problem
    return None


def encode_response(response: Any, correlation_id: int) -> bytes | bytearray:
    """Encode a response message (built with its version) with header and size prefix."""
    response.with_header(correlation_id=correlation_id)
    return response.encode(header=True, framed=True)


def encode_unsupported_api_versions(correlation_id: int, api_versions_range: tuple[int, int]) -> bytes:
    """ApiVersions answer to a version we do not serve: always the v0 layout (as Kafka does).

    Header = correlation id only; body = error 35, then [api_key, min, max] for ApiVersions
    itself, with no throttle field, so any client can read it and retry lower.
    """
    body = struct.pack(">ihi hhh", correlation_id, 35, 1, 18, *api_versions_range)
    return struct.pack(">i", len(body)) + body


_NESTED_CACHE: dict[type, dict[str, type | None]] = {}


def _nested_classes(cls: Any) -> dict[str, type | None]:
    """snake_case field name -> generated class of its struct (or None for plain fields)."""
    cached = _NESTED_CACHE.get(cls)
    if cached is None:
        cached = {}
        for name, f in cls._struct.fields.items():
            nested = f.is_struct() or f.is_struct_array()
            cached[name] = getattr(cls, f.type_str.removeprefix("[]"), None) if nested else None
        _NESTED_CACHE[cls] = cached
    return cached


class UnknownResponseField(ValueError):
    """A handler named a field that no version of the response's schema has (a misspelt key would
    otherwise be dropped silently and the field sent as its default)."""

    def __init__(self, key: str, fields: list[str]) -> None:
        super().__init__(key)
        self.key, self.fields = key, fields
        self.path: list[str] = []  # the nested structs it is in, outermost first (filled on the way out)


def _build(cls: type, values: dict[str, Any], **extra: Any) -> Any:
    nested = _nested_classes(cls)
    kwargs = dict(extra)
    for key, value in values.items():
        if key not in nested:
            raise UnknownResponseField(key, list(nested))
        sub = nested[key]
        if sub is not None:
            try:
                if isinstance(value, list):
                    value = [_build(sub, v) if isinstance(v, dict) else v for v in value]
                elif isinstance(value, dict):
                    value = _build(sub, value)
            except UnknownResponseField as exc:
                exc.path.insert(0, f"{key}[]" if isinstance(value, list) else key)
                raise
        kwargs[key] = value
    return cls(**kwargs)


def build_response(api_key: int, version: int, values: dict[str, Any]) -> Any:
    """Build a response message from plain dicts and lists (nested structs included).

    A key may name a field of another version (it is then not sent), but not a field the schema does not
    have at all: that raises UnknownResponseField naming the API, the version and where the key is."""
    cls = _RESPONSES[api_key]
    try:
        return _build(cls, values, version=version)
    except UnknownResponseField as exc:
        where = " ".join([f"{cls.name} v{version}", *exc.path])
        exc.args = (f"{where}: no field {exc.key!r} in any version of the schema (fields: {', '.join(exc.fields)})",)
        raise
