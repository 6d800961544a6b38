"""The response builder's field names: a key no version of the response schema has is an error when the
response is built (it used to be dropped, so a misspelt ``"error_code"`` went out as the default), and every
handler's answer builds and encodes at every version it serves."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.broker import apis
from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.protocol.codec import (
    RequestHeader,
    UnknownResponseField,
    build_response,
    encode_response,
    request_class,
)
from headwater.broker.server.broker_server import BrokerServer

TOPIC = "t"  # every string of a filled request names this topic (and group, member, ...)


def test_a_misspelt_key_names_the_api_version_and_where_it_is() -> None:
    body = {"throttle_time_ms": 0,
            "responses": [{"name": TOPIC, "partition_responses": [{"index": 0, "eror_code": 0, "base_offset": 5}]}]}
    with pytest.raises(UnknownResponseField, match=r"ProduceResponse v9 responses\[\] partition_responses\[\]: "
                                                   r"no field 'eror_code'"):
        build_response(0, 9, body)


def test_a_misspelt_top_level_key_is_an_error_too() -> None:
    with pytest.raises(UnknownResponseField, match=r"HeartbeatResponse v2: no field 'errorcode'"):
        build_response(12, 2, {"throttle_time_ms": 0, "errorcode": 0})


def test_a_field_of_another_version_is_accepted_and_not_sent() -> None:
    # handlers name fields of later versions freely (record_errors is v8+): v7 leaves it out
    body = {"throttle_time_ms": 0, "responses": [{"name": TOPIC, "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 5, "record_errors": [], "error_message": None}]}]}
    v7 = encode_response(build_response(0, 7, body), 1)
    v8 = encode_response(build_response(0, 8, body), 1)
    assert len(v8) > len(v7)


def _filled(cls: Any, version: int) -> Any:
    """A request of ``cls`` at ``version`` with one element in every array and the topic's name in every
    string, so that handlers walk their per-topic, per-partition and per-group paths."""
    values: dict[str, Any] = {}
    for name, f in cls._struct.fields.items():
        if not f.for_version_q(version):
            continue
        type_str = f.type_str
        if f.is_struct_array():
            values[name] = [_filled(getattr(cls, type_str.removeprefix("[]")), version)]
        elif f.is_struct():
            values[name] = _filled(getattr(cls, type_str), version)
        elif type_str == "string":
            values[name] = TOPIC
        elif type_str == "[]string":
            values[name] = [TOPIC]
        elif type_str.startswith("[]int"):
            values[name] = [0]
        elif type_str in ("bytes", "records"):
            values[name] = b""
    return cls(version=version, **values) if hasattr(cls, "API_KEY") else cls(**values)


def _every_version() -> Iterator[tuple[int, int]]:
    for key, spec in sorted(apis.REGISTRY.items()):
        for version in range(spec.min_version, spec.max_version + 1):
            yield key, version


@pytest.mark.parametrize("authorizer", [False, True], ids=["allowed", "denied"])
def test_every_handler_answers_every_version_it_serves(tmp_path: Path, authorizer: bool) -> None:
    """Each API at each version, with an empty request and with a filled one, on a broker with one topic;
    "denied" turns the authorizer on with no ACL, so every handler also answers its authorization errors."""
    config = BrokerConfig.model_validate({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
                                          "group.initial.rebalance.delay.ms": "0",
                                          "authorizer.enabled": str(authorizer).lower()})

    async def run() -> list[str]:
        server = BrokerServer(config)
        await server.start()
        failures = []
        try:
            server.cluster.create_topic(TOPIC, 1)
            for key, version in _every_version():
                cls = request_class(key)
                assert cls is not None
                for request in (cls(version=version), _filled(cls, version)):
                    header = RequestHeader(key, version, 7, "test", 0)
                    ctx = apis.RequestContext(server.cluster, header, "127.0.0.1:1", server.services)
                    try:
                        body = await asyncio.wait_for(apis.REGISTRY[key].handler(ctx, request), 10)
                        if body is not None:
                            encode_response(ctx.response(body), 7)
                    except Exception as exc:  # collected: the assertion below lists every API that fails
                        failures.append(f"{cls.name} v{version}: {type(exc).__name__}: {exc}")
        finally:
            await server.stop()
        return failures

    assert asyncio.run(run()) == []
