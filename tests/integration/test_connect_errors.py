"""Errors through ``headwater up``: bad REST requests get Kafka Connect's error body and change nothing;
bad records go to the dead letter queue (errors.tolerance=all) or fail the task (errors.tolerance=none),
and errors.log.enable logs them (as Kafka Connect's REST API and error handling do).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.connectproc import (
    JSON_CONVERTER,
    ConnectProcess,
    Response,
    consume,
    module_connect,
    produce,
    sink_config,
    source_config,
    unique,
    wait_for,
)

pytestmark = pytest.mark.timeout(120)


connect = module_connect("connect-errors")


def assert_error(resp: Response, status: int, *mentions: str) -> str:
    """Kafka Connect's error body ``{"error_code": status, "message": ...}``, the message naming ``mentions``."""
    assert resp.status == status, resp
    assert resp.headers.get("content-type", "").startswith("application/json"), resp.headers
    body = resp.json
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == status, body
    message = body["message"]
    assert isinstance(message, str) and message
    for word in mentions:
        assert word in message, (word, message)
    return message


class Unchanged:
    """Asserts that the connectors (names and configs) are the same after a bad request."""

    def __init__(self, connect: ConnectProcess) -> None:
        self.connect = connect

    def snapshot(self) -> dict[str, dict]:
        return self.connect.ok("GET", "/connectors", expect=200, expand="info")

    def __enter__(self) -> Unchanged:
        self.before = self.snapshot()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            assert self.snapshot() == self.before


@pytest.fixture
def existing(connect: ConnectProcess, tmp_path: Path):
    """A running connector, so that 'nothing changed' is checked against something."""
    name = unique("err-existing")
    src = tmp_path / "existing.txt"
    src.write_text("")
    connect.create(name, source_config(src, unique("t-existing")))
    connect.wait_state(name, "RUNNING", tasks=1)
    yield name
    connect.call("DELETE", f"/connectors/{name}")


# -- bad requests -----------------------------------------------------------------------------------------------


def test_invalid_json_body_is_400(connect: ConnectProcess, existing: str) -> None:
    with Unchanged(connect):
        assert_error(connect.call("POST", "/connectors", raw=b'{"name": "x", "config": {'), 400)
        assert_error(connect.call("POST", "/connectors", raw=b""), 400)
        assert_error(connect.call("PUT", f"/connectors/{existing}/config", raw=b"{nope"), 400)
        assert_error(connect.call("PATCH", f"/connectors/{existing}/config", raw=b"[1,"), 400)
        assert_error(connect.call("PUT", "/connector-plugins/FileStreamSinkConnector/config/validate", raw=b"{"), 400)


def test_missing_config_is_400(connect: ConnectProcess, existing: str) -> None:
    with Unchanged(connect):
        assert_error(connect.call("POST", "/connectors", {"name": unique("err-noconfig")}), 400)
        assert_error(connect.call("POST", "/connectors", {"name": unique("err-noconfig"), "config": None}), 400)
        assert_error(connect.call("POST", "/connectors", ["not", "an", "object"]), 400)
        assert_error(connect.call("PUT", f"/connectors/{unique('err-list')}/config", ["a"]), 400)


def test_unknown_connector_class_is_400(connect: ConnectProcess, tmp_path: Path, existing: str) -> None:
    name = unique("err-class")
    with Unchanged(connect):
        resp = connect.call("POST", "/connectors", {"name": name, "config": {
            "connector.class": "com.example.NoSuchConnector", "topics": "x"}})
        assert_error(resp, 400, "connector.class", "com.example.NoSuchConnector")
        resp = connect.call("POST", "/connectors", {"name": name, "config": {"topics": "x"}})
        assert_error(resp, 400, "connector.class")
        resp = connect.call("PUT", f"/connectors/{existing}/config", {"connector.class": "NoSuchConnector"})
        assert_error(resp, 400, "connector.class")
    assert connect.get(f"/connectors/{name}").status == 404


def test_missing_required_key_is_400_naming_it(connect: ConnectProcess, tmp_path: Path, existing: str) -> None:
    name = unique("err-required")
    with Unchanged(connect):
        config = {"connector.class": "FileStreamSourceConnector", "file": str(tmp_path / "in.txt")}
        message = assert_error(connect.call("POST", "/connectors", {"name": name, "config": config}), 400, "topic")
        assert "1 error" in message, message
        sink = {"connector.class": "FileStreamSinkConnector", "file": str(tmp_path / "out.txt")}
        assert_error(connect.call("PUT", f"/connectors/{name}/config", sink), 400, "topics")
    assert connect.get(f"/connectors/{name}").status == 404


def test_mistyped_value_is_400_naming_the_key(connect: ConnectProcess, tmp_path: Path, existing: str) -> None:
    name = unique("err-type")
    with Unchanged(connect):
        config = source_config(tmp_path / "in.txt", "t", **{"tasks.max": "abc"})
        assert_error(connect.call("POST", "/connectors", {"name": name, "config": config}), 400, "tasks.max", "abc")
        config = source_config(tmp_path / "in.txt", "t", **{"batch.size": "lots"})
        assert_error(connect.call("POST", "/connectors", {"name": name, "config": config}), 400, "batch.size")
        config = source_config(tmp_path / "in.txt", "t", **{"errors.tolerance": "some"})
        assert_error(connect.call("POST", "/connectors", {"name": name, "config": config}), 400, "errors.tolerance")
        resp = connect.call("PATCH", f"/connectors/{existing}/config", {"tasks.max": "-1"})
        assert_error(resp, 400, "tasks.max")
        config = source_config(tmp_path / "in.txt", "t", **{"transforms": "x", "transforms.x.type": "NoSuchSMT"})
        assert_error(connect.call("POST", "/connectors", {"name": name, "config": config}), 400, "transforms.x.type")
        assert_error(connect.call("POST", "/connectors", {"name": name, "config": source_config(tmp_path / "i", "t"),
                                                          "initial_state": "SLEEPING"}), 400)
    assert connect.get(f"/connectors/{name}").status == 404


def test_duplicate_name_is_409(connect: ConnectProcess, tmp_path: Path, existing: str) -> None:
    with Unchanged(connect):
        other = source_config(tmp_path / "other.txt", "other-topic")
        assert_error(connect.call("POST", "/connectors", {"name": existing, "config": other}), 409, existing)


def test_unknown_connector_is_404(connect: ConnectProcess, existing: str) -> None:
    name = unique("err-nope")
    with Unchanged(connect):
        for method, path in (("GET", ""), ("GET", "/status"), ("GET", "/config"), ("GET", "/tasks"),
                             ("GET", "/tasks/0/status"), ("GET", "/offsets"), ("DELETE", ""), ("PUT", "/pause"),
                             ("PUT", "/resume"), ("PUT", "/stop"), ("POST", "/restart"),
                             ("POST", "/tasks/0/restart"), ("DELETE", "/offsets")):
            assert_error(connect.call(method, f"/connectors/{name}{path}"), 404, name)
        assert_error(connect.call("PATCH", f"/connectors/{name}/config", {"tasks.max": "2"}), 404, name)


def test_put_with_other_name_in_body_is_400(connect: ConnectProcess, tmp_path: Path, existing: str) -> None:
    url_name, body_name = unique("err-url"), unique("err-body")
    with Unchanged(connect):
        config = {**source_config(tmp_path / "in.txt", "t"), "name": body_name}
        assert_error(connect.call("PUT", f"/connectors/{url_name}/config", config), 400, url_name)
        renamed = {**connect.ok("GET", f"/connectors/{existing}/config", expect=200), "name": body_name}
        assert_error(connect.call("PUT", f"/connectors/{existing}/config", renamed), 400)
    for name in (url_name, body_name):
        assert connect.get(f"/connectors/{name}").status == 404


# -- dead letter queue ------------------------------------------------------------------------------------------

CONTEXT_HEADERS = ["__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset",
                   "__connect.errors.connector.name", "__connect.errors.task.id", "__connect.errors.stage",
                   "__connect.errors.class.name", "__connect.errors.exception.class.name",
                   "__connect.errors.exception.message", "__connect.errors.exception.stacktrace"]


def _mixed_records() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], bool]]:
    """(key, value, headers, valid) with valid JSON strings and bytes that are not JSON."""
    out: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], bool]] = []
    for i in range(30):
        if i % 4 == 3:
            bad = [b"not json {", b"\xff\xfe\x00binary", b'{"unterminated": ', b"nul\x00l"][i // 4 % 4]
            out.append((f"bad-{i}".encode(), bad, [("origin", f"o-{i}".encode())], False))
        else:
            out.append((f"k-{i}".encode(), json.dumps(f"valid-{i}").encode(), [("origin", f"o-{i}".encode())], True))
    return out


def test_dead_letter_queue_gets_exactly_the_bad_records(connect: ConnectProcess, tmp_path: Path) -> None:
    topic, dlq, name = unique("dlq-in"), unique("dlq"), unique("dlq-sink")
    out = tmp_path / "good.out"
    records = _mixed_records()
    produce(connect.bootstrap, topic, [(k, v, h) for k, v, h, _ in records])
    sent = consume(connect.bootstrap, topic, count=len(records))
    assert len(sent) == len(records)
    connect.create(name, sink_config(out, topic, **{
        "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.log.enable": "true", "errors.log.include.messages": "true"}))

    bad = [(m, r) for m, r in zip(sent, records, strict=True) if not r[3]]
    got = consume(connect.bootstrap, dlq, count=len(bad), timeout=30, settle=0.5)
    assert len(got) == len(bad), (len(got), len(bad), connect.log_text()[-3000:])
    for dead, (orig, (key, value, headers, _)) in zip(got, bad, strict=True):
        assert dead.key == key and dead.value == value
        assert dead.timestamp == orig.timestamp
        names = [h[0] for h in dead.headers]
        assert names[0] == "origin" and dead.headers[0][1] == headers[0][1]
        assert sorted(names[1:]) == sorted(CONTEXT_HEADERS), names
        ctx = {k: v.decode() for k, v in dead.headers[1:]}
        assert ctx["__connect.errors.topic"] == topic
        assert ctx["__connect.errors.partition"] == "0"
        assert ctx["__connect.errors.offset"] == str(orig.offset)
        assert ctx["__connect.errors.connector.name"] == name
        assert ctx["__connect.errors.task.id"] == "0"
        assert ctx["__connect.errors.stage"] == "VALUE_CONVERTER"
        assert ctx["__connect.errors.class.name"].endswith("JsonConverter"), ctx
        assert ctx["__connect.errors.exception.stacktrace"].strip(), ctx
        assert ctx["__connect.errors.exception.message"], ctx

    # the sink wrote exactly the valid records, in order (stopping the connector flushes its file)
    connect.wait_state(name, "RUNNING", tasks=1)
    assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
    connect.wait_state(name, "STOPPED", tasks=0)
    assert out.read_text().splitlines() == [f"valid-{i}" for i, r in enumerate(records) if r[3]]

    # errors.log.enable: one error line per bad record, naming the task, stage, class and record
    line = re.compile(rf"Error encountered in task {re.escape(name)}-0\. Executing stage 'VALUE_CONVERTER' "
                      rf"with class '[\w.$]*JsonConverter', where consumed record is \{{topic='{re.escape(topic)}', "
                      rf"partition=0, offset=(\d+)")
    logged = sorted(int(m.group(1)) for m in line.finditer(connect.log_text()))
    assert logged == [m.offset for m, _ in bad]
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_dead_letter_queue_headers_carry_the_connect_exception(connect: ConnectProcess, tmp_path: Path) -> None:
    """Kafka's DeadLetterQueueReporter writes the error itself (a DataException from the converter, whose
    message starts "Converting byte[] to Kafka Connect data failed..."), not its cause."""
    topic, dlq, name = unique("dlqx-in"), unique("dlqx"), unique("dlqx-sink")
    produce(connect.bootstrap, topic, [(b"k", b"not json {", [])])
    connect.create(name, sink_config(tmp_path / "x.out", topic, **{
        "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}))
    got = consume(connect.bootstrap, dlq, count=1, timeout=30)
    assert len(got) == 1
    ctx = {k: v.decode() for k, v in got[0].headers}
    assert ctx["__connect.errors.exception.class.name"].endswith("DataException"), ctx
    assert ctx["__connect.errors.exception.message"].startswith(
        "Converting byte[] to Kafka Connect data failed due to serialization error"), ctx
    assert "DataException" in ctx["__connect.errors.exception.stacktrace"], ctx
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_tolerance_none_fails_the_task_at_the_bad_record(connect: ConnectProcess, tmp_path: Path) -> None:
    topic, name = unique("strict-in"), unique("strict-sink")
    out = tmp_path / "strict.out"
    produce(connect.bootstrap, topic, [(None, b'"a"', []), (None, b'"b"', []), (None, b"oops {", []),
                                       (None, b'"c"', []), (None, b'"d"', [])])
    connect.create(name, sink_config(out, topic, **{
        "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false",
        "errors.log.enable": "true"}))
    st = connect.wait_state(name, "RUNNING", tasks=1, task_state="FAILED")
    trace = st["tasks"][0].get("trace", "")
    assert "Tolerance exceeded" in trace and "VALUE_CONVERTER" in trace, trace
    assert "DataException" in trace, trace
    assert connect.ok("GET", f"/connectors/{name}/tasks/0/status", expect=200)["state"] == "FAILED"

    # nothing at or after the bad record is written, and no offset past it is committed
    lines = out.read_text().splitlines() if out.exists() else []
    assert lines in ([], ["a"], ["a", "b"]), lines
    offsets = connect.ok("GET", f"/connectors/{name}/offsets", expect=200)["offsets"]
    assert all(o["offset"]["kafka_offset"] <= 2 for o in offsets), offsets
    assert re.search(rf"Error encountered in task {re.escape(name)}-0\. Executing stage 'VALUE_CONVERTER'",
                     connect.log_text())

    # restarting only the failed task: it is reported RESTARTING, then fails again on the same record
    resp = connect.call("POST", f"/connectors/{name}/restart", includeTasks="true", onlyFailed="true")
    assert resp.status == 202, resp
    assert resp.json["connector"]["state"] == "RUNNING"
    assert [t["state"] for t in resp.json["tasks"]] == ["RESTARTING"]
    failures = re.compile(rf"Error encountered in task {re.escape(name)}-0\.")
    wait_for(lambda: len(failures.findall(connect.log_text())) >= 2 and connect.status(name)["tasks"][0]["state"]
             == "FAILED", 20, 0.1, "the restarted task to fail again", connect.log_text)
    assert not (out.exists() and "c" in out.read_text().splitlines())
    connect.ok("DELETE", f"/connectors/{name}", expect=204)
