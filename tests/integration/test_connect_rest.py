"""The Connect REST API of ``headwater up`` against Kafka Connect's paths, shapes and status codes
(those of Kafka Connect's REST resources), and the ``kc`` CLI of PyPI's kafka-connect-py against it.

One ``headwater up`` process serves the module; each test uses connectors and topics of its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from support.connectproc import ConnectProcess, Response, consume, module_connect, produce, unique, values, wait_for
from support.signing import session_keys, signed_headers

from headwater.testing import rest

pytestmark = pytest.mark.timeout(120)


connect = module_connect("connect-rest")


def sink_config(tmp: Path, topic: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "FileStreamSinkConnector", "file": str(tmp / f"{topic}.out"), "topics": topic,
            **extra}


def source_config(path: Path, topic: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "FileStreamSourceConnector", "file": str(path), "topic": topic, **extra}


def assert_error(resp, status: int) -> dict:
    assert resp.status == status, resp
    body = resp.json
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == status
    assert isinstance(body["message"], str) and body["message"]
    return body


def assert_info_shape(info: dict, name: str, config: dict[str, str], type_: str, tasks: int | tuple[int, ...]) -> None:
    """ConnectorInfo. ``tasks``: the task count, or the counts allowed (a distributed worker answers a
    create or update before the connector has generated its task configs, as Kafka Connect does)."""
    assert set(info) == {"name", "config", "tasks", "type"}, info
    assert info["name"] == name
    assert info["config"] == {**config, "name": name}
    allowed = (tasks,) if isinstance(tasks, int) else tasks
    assert info["tasks"] in [[{"connector": name, "task": i} for i in range(n)] for n in allowed], info
    assert info["type"] == type_


def wait_info_tasks(connect: ConnectProcess, name: str, tasks: int) -> dict:
    want = [{"connector": name, "task": i} for i in range(tasks)]
    return wait_for(lambda: (info := connect.ok("GET", f"/connectors/{name}", expect=200))["tasks"] == want and info,
                    20, 0.05, f"{name} to list {tasks} tasks", connect.log_text)


def assert_status_shape(status: dict, name: str, type_: str, state: str, tasks: int) -> None:
    assert set(status) == {"name", "connector", "tasks", "type"}, status
    assert status["name"] == name and status["type"] == type_
    assert set(status["connector"]) == {"state", "worker_id"}, status
    assert status["connector"]["state"] == state and status["connector"]["worker_id"], status
    assert [(t["id"], t["state"]) for t in status["tasks"]] == [(i, state) for i in range(tasks)], status
    assert all(set(t) == {"id", "state", "worker_id"} and t["worker_id"] for t in status["tasks"]), status


def worker_id(connect: ConnectProcess) -> str:
    # Kafka Connect names a worker by its advertised REST host:port: the bound port, not the 0 asked for.
    return f"127.0.0.1:{connect.rest_port}"


# -- root, health, openapi -----------------------------------------------------------------------------


def test_root_and_health(connect: ConnectProcess) -> None:
    root = connect.ok("GET", "/", expect=200)
    assert set(root) == {"version", "commit", "kafka_cluster_id"}
    assert all(isinstance(v, str) and v for v in root.values()), root
    health = connect.ok("GET", "/health", expect=200)
    assert health["status"] == "healthy"
    assert isinstance(health["message"], str) and health["message"]


def test_ready_line_means_the_worker_takes_requests(tmp_path: Path) -> None:
    """Once `headwater up` prints "Headwater is up", the REST API serves writes: no 503 from /health and
    no 409 "rebalance" for the first POST /connectors."""
    proc = ConnectProcess(tmp_path / "proc")
    try:
        proc.start(wait_healthy=False)
        health = proc.get("/health")
        created = proc.call("POST", "/connectors", {"name": "first", "config": sink_config(tmp_path, "t-first")})
        assert (health.status, created.status) == (200, 201), (health, created)
    finally:
        proc.stop()


def test_openapi_document(connect: ConnectProcess) -> None:
    resp = connect.get("/openapi.json")
    assert resp.status == 200
    doc = json.loads(resp.body)
    assert str(doc["openapi"]).startswith("3.")
    paths = doc["paths"]
    for path in ("/connectors", "/connectors/{name}", "/connectors/{name}/config", "/connectors/{name}/status",
                 "/connectors/{name}/offsets", "/connector-plugins"):
        assert path in paths, sorted(paths)
    assert "post" in paths["/connectors"] and "get" in paths["/connectors"]


def test_openapi_document_says_what_the_server_enforces(connect: ConnectProcess) -> None:
    """connector.class is one of the installed connectors' names, each of which the server takes; the
    offsets body is the sink form or the source form; a 400 that depends on the server's state (a
    connector not STOPPED, a sink given the source form, tasks.max) is marked as such, and only there."""
    doc = connect.ok("GET", "/openapi.json", expect=200)
    schemas = doc["components"]["schemas"]
    ref = {"$ref": "#/components/schemas/ConnectorClass"}
    assert schemas["ConnectorConfig"]["properties"]["connector.class"] == ref
    assert "connector.class" in schemas["ConnectorConfig"]["required"]
    assert schemas["ConfigChanges"]["properties"]["connector.class"] == ref  # may change, not be removed (null)
    names = schemas["ConnectorClass"]["enum"]
    plugins = connect.ok("GET", "/connector-plugins", expect=200)
    assert {p["class"] for p in plugins} <= set(names)
    assert {"FileStreamSource", "FileStreamSinkConnector", "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "io.debezium.connector.postgresql.PostgresConnector"} <= set(names)
    for name in names:  # every name the document offers is one the server takes
        result = connect.ok("PUT", f"/connector-plugins/{urllib.parse.quote(name)}/config/validate",
                            {"connector.class": name}, expect=200)
        errors = {c["value"]["name"]: c["value"]["errors"] for c in result["configs"]}
        assert errors["connector.class"] == [], (name, errors)
    # and a name it does not offer, the server refuses
    refused = connect.call("POST", "/connectors", {"name": unique("no-such-class"),
                                                   "config": {"connector.class": "NoSuchConnector", "topics": "t"}})
    assert "connector.class" in assert_error(refused, 400)["message"]

    forms = [s["$ref"].rsplit("/", 1)[1] for s in schemas["OffsetsAlter"]["anyOf"]]
    assert sorted(forms) == ["SinkOffsets", "SourceOffsets"]
    entry = schemas[schemas["SinkOffsets"]["properties"]["offsets"]["items"]["$ref"].rsplit("/", 1)[1]]
    assert set(entry["required"]) == {"partition", "offset"}
    partition, offset = schemas["SinkPartition"], schemas["SinkOffset"]
    assert set(partition["required"]) == {"kafka_topic", "kafka_partition"}
    assert partition["properties"]["kafka_partition"] == {"type": "integer", "minimum": 0, "exclusiveMaximum": 1 << 31,
                                                          "title": "Kafka Partition"}
    assert offset["required"] == ["kafka_offset"] and offset["properties"]["kafka_offset"]["minimum"] == 0

    marked: dict[tuple[str, str], list[str]] = {}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for code, response in op["responses"].items():
                if response.get("x-state-dependent"):
                    marked.setdefault((method.upper(), path), []).append(code)
    assert marked == {("POST", "/connectors"): ["400"], ("PUT", "/connectors/{name}/config"): ["400"],
                      ("PATCH", "/connectors/{name}/config"): ["400"],
                      ("POST", "/connectors/{name}/tasks"): ["400", "403"],  # 403: not signed (KIP-507)
                      ("PUT", "/connectors/{name}/fence"): ["400", "403"],  # 400: standalone, or a sink
                      ("PATCH", "/connectors/{name}/offsets"): ["400"],
                      ("DELETE", "/connectors/{name}/offsets"): ["400"],
                      ("PUT", "/connector-plugins/{plugin}/config/validate"): ["400"],
                      ("GET", "/admin/topics/{topic}/records"): ["403"]}  # an internal topic's
    offsets = doc["paths"]["/connectors/{name}/offsets"]
    assert all("STOPPED" in offsets[m]["responses"]["400"]["description"] for m in ("patch", "delete"))
    assert "sink form" in offsets["patch"]["responses"]["400"]["description"]
    assert "tasks.max" in doc["paths"]["/connectors/{name}/tasks"]["post"]["responses"]["400"]["description"]


def send(connect: ConnectProcess, method: str, path: str, data: bytes | None,
         content_type: str | None = "application/json") -> Response:
    """A request with exactly these bytes and this Content-Type (none: no header)."""
    return rest.send(method, connect.rest + path, data, {} if content_type is None else {"Content-Type": content_type})


def test_every_documented_operation_is_served_and_nothing_else(connect: ConnectProcess) -> None:
    """The document is generated from the route table: each documented method answers something
    other than 405, and an undocumented one answers 405 naming the documented ones in Allow."""
    doc = connect.ok("GET", "/openapi.json", expect=200)
    assert len(doc["paths"]) >= 20
    for path, ops in doc["paths"].items():
        concrete = path.replace("{name}", "nope").replace("{task}", "0").replace("{plugin}", "FileStreamSource") \
            .replace("{logger}", "root")
        documented = {m.upper() for m in ops}
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            resp = send(connect, method, concrete, b"{}" if method in ("POST", "PUT", "PATCH") else None)
            if method in documented:
                assert resp.status != 405, (method, path, resp)
            else:
                assert_error(resp, 405)
                assert set(resp.headers["allow"].replace(" ", "").split(",")) == documented, (path, resp.headers)
        for op in ops.values():
            assert "500" in op["responses"] and op["operationId"], op


def test_bodies_that_are_not_json_in_utf8_are_400_naming_the_problem(connect: ConnectProcess) -> None:
    not_utf8 = b'{"name": "caf\xe9", "config": {"connector.class": "FileStreamSink"}}'
    for method, path in (("POST", "/connectors"), ("PUT", "/connectors/x/config"),
                         ("PATCH", "/connectors/x/config")):
        assert "UTF-8" in assert_error(send(connect, method, path, not_utf8), 400)["message"]
        assert "JSON" in assert_error(send(connect, method, path, b'{"name": '), 400)["message"]
    bad_value = json.dumps({"name": "x", "config": {"connector.class": "FileStreamSink", "tasks.max": {"n": 1}}})
    message = assert_error(send(connect, "POST", "/connectors", bad_value.encode()), 400)["message"]
    assert "config.tasks.max" in message, message
    assert "x" not in connect.ok("GET", "/connectors", expect=200)


def test_wrong_content_type_is_415_and_a_huge_body_413(connect: ConnectProcess, tmp_path: Path) -> None:
    body = json.dumps({"name": unique("ct"), "config": source_config(tmp_path / "in.txt", "t")}).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        assert_error(send(connect, "POST", "/connectors", body, content_type), 415)
    huge = json.dumps({"name": "huge", "config": {"connector.class": "FileStreamSink", "pad": "x" * (2 << 20)}})
    assert_error(send(connect, "POST", "/connectors", huge.encode()), 413)
    assert "huge" not in connect.ok("GET", "/connectors", expect=200)
    assert send(connect, "POST", "/connectors", body, "application/json; charset=utf-8").status == 201


def test_unknown_path_is_404_in_kafka_connects_shape(connect: ConnectProcess) -> None:
    assert_error(connect.get("/no/such/path"), 404)
    assert_error(connect.get("/connector-plugins/NoSuchPlugin/config"), 404)


def test_405_names_the_methods_of_the_resource_in_allow(connect: ConnectProcess) -> None:
    for method, path, allowed in (("DELETE", "/", {"GET"}), ("PUT", "/connectors", {"GET", "POST"}),
                                  ("POST", "/connectors/x/config", {"GET", "PUT", "PATCH"}),
                                  ("GET", "/connectors/x/stop", {"PUT"})):
        resp = send(connect, method, path, b"{}" if method != "GET" else None)
        assert_error(resp, 405)
        assert set(resp.headers["allow"].replace(" ", "").split(",")) == allowed, (method, path, resp.headers)


def test_what_python_parses_but_json_is_not_is_400(connect: ConnectProcess) -> None:
    """NaN and Infinity are not JSON (RFC 8259) though Python's parser takes them; a body nested
    deeper than the parser can go is 400 too, not a RecursionError and a 500."""
    for constant in ("NaN", "Infinity", "-Infinity"):
        body = '{"name": "nan", "config": {"connector.class": "FileStreamSink", "tasks.max": ' + constant + "}}"
        message = assert_error(send(connect, "POST", "/connectors", body.encode()), 400)["message"]
        assert "not valid JSON" in message and constant.lstrip("-") in message, message
    deep = b"[" * 100_000 + b"]" * 100_000
    for method, path in (("POST", "/connectors"), ("PUT", "/connectors/deep/config")):
        assert "nested too deeply" in assert_error(send(connect, method, path, deep), 400)["message"]
    assert not {"nan", "deep"} & set(connect.connector_names())
    assert "REST request" not in connect.log_text()  # what the REST layer logs with a 500


def test_a_charset_other_than_utf8_is_415(connect: ConnectProcess, tmp_path: Path) -> None:
    name = unique("latin")
    body = json.dumps({"name": name, "config": source_config(tmp_path / "in.txt", "t")}).encode()
    message = assert_error(send(connect, "POST", "/connectors", body, "application/json; charset=latin-1"),
                           415)["message"]
    assert "UTF-8" in message, message
    assert name not in connect.connector_names()


def test_put_config_refuses_a_name_the_document_forbids(connect: ConnectProcess, tmp_path: Path) -> None:
    """The path's name follows the document's pattern, as POST's name does: not blank, no '/', no
    control characters (they would break the Location header and the paths of the connector)."""
    config = sink_config(tmp_path, unique("t-names"))
    for quoted in ("a%2Fb", "a%01b", "%20%20", "%C2%85x", "x%0A"):
        message = assert_error(connect.call("PUT", f"/connectors/{quoted}/config", config), 400)["message"]
        assert "connector name" in message, (quoted, message)
    assert not [n for n in connect.connector_names() if "/" in n or not n.strip() or not n.isprintable()]
    name = unique("with space") + " é"
    resp = connect.call("PUT", f"/connectors/{urllib.parse.quote(name)}/config", config)
    assert resp.status == 201, resp
    assert resp.headers["location"] == "/connectors/" + urllib.parse.quote(name, safe=""), resp.headers
    assert connect.ok("GET", resp.headers["location"], expect=200)["name"] == name
    connect.ok("DELETE", resp.headers["location"], expect=204)


def test_task_configs_past_tasks_max_are_400(connect: ConnectProcess, tmp_path: Path) -> None:
    """The internal task-config endpoint takes no more task configs than the connector's tasks.max
    (KIP-1004), so a stray request cannot start a task per entry of a list."""
    name = unique("rest-tasks-max")
    connect.create(name, sink_config(tmp_path, unique("t-tasks-max"), **{"tasks.max": "2"}))
    connect.wait_state(name, "RUNNING", tasks=2)
    # signed as a worker signs (KIP-507), with the session key the worker wrote to its config topic
    (key, *_) = reversed(session_keys(connect.bootstrap, "connect-configs"))
    body = json.dumps([{"topics": "x"}] * 3).encode()
    message = assert_error(rest.send("POST", f"{connect.rest}/connectors/{name}/tasks", body,
                                     signed_headers(key["key"], body)), 400)["message"]
    assert "tasks.max is 2" in message, message
    connect.wait_state(name, "RUNNING", tasks=2)
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_worker_id_is_the_bound_rest_address(connect: ConnectProcess, tmp_path: Path) -> None:
    name = unique("rest-worker-id")
    connect.create(name, sink_config(tmp_path, unique("t-worker-id")))
    st = connect.wait_state(name, "RUNNING", tasks=1)
    assert st["connector"]["worker_id"] == worker_id(connect), st
    assert st["tasks"][0]["worker_id"] == worker_id(connect), st
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


# -- create, read, list ----------------------------------------------------------------------------------


def test_create_connector_201_with_location_and_info(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-create"), unique("t-create")
    config = sink_config(tmp_path, topic)
    resp = connect.call("POST", "/connectors", {"name": name, "config": config})
    assert resp.status == 201, resp
    assert resp.headers["location"].endswith(f"/connectors/{name}"), resp.headers
    assert_info_shape(resp.json, name, config, "sink", (0, 1))
    assert_info_shape(wait_info_tasks(connect, name, 1), name, config, "sink", 1)
    assert name in connect.connector_names()
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_list_connectors_with_expand(connect: ConnectProcess, tmp_path: Path) -> None:
    sink, source, topic = unique("rest-list-sink"), unique("rest-list-src"), unique("t-list")
    src_file = tmp_path / "in.txt"
    src_file.write_text("")
    sink_cfg, source_cfg = sink_config(tmp_path, topic), source_config(src_file, topic)
    connect.create(sink, sink_cfg)
    connect.create(source, source_cfg)
    connect.wait_state(sink, "RUNNING", tasks=1)
    connect.wait_state(source, "RUNNING", tasks=1)

    names = connect.ok("GET", "/connectors", expect=200)
    assert isinstance(names, list) and {sink, source} <= set(names)
    # an unknown expand value is ignored: still the plain list
    assert connect.ok("GET", "/connectors", expect=200, expand="bogus") == names

    by_status = connect.ok("GET", "/connectors", expect=200, expand="status")
    assert set(by_status) == set(names)
    assert set(by_status[sink]) == {"status"}
    assert_status_shape(by_status[sink]["status"], sink, "sink", "RUNNING", 1)
    assert_status_shape(by_status[source]["status"], source, "source", "RUNNING", 1)

    by_info = connect.ok("GET", "/connectors", expect=200, expand="info")
    assert set(by_info[source]) == {"info"}
    assert_info_shape(by_info[source]["info"], source, source_cfg, "source", 1)

    both = connect.ok("GET", "/connectors", expect=200, expand=["status", "info"])
    assert set(both[sink]) == {"status", "info"}
    assert_info_shape(both[sink]["info"], sink, sink_cfg, "sink", 1)
    assert both[sink]["status"]["connector"]["state"] == "RUNNING"
    for name in (sink, source):
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_config_status_and_tasks_endpoints(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-read"), unique("t-read")
    config = sink_config(tmp_path, topic, **{"tasks.max": "2"})
    connect.create(name, config)
    connect.wait_state(name, "RUNNING", tasks=2)

    assert connect.ok("GET", f"/connectors/{name}/config", expect=200) == {**config, "name": name}
    assert_status_shape(connect.status(name), name, "sink", "RUNNING", 2)

    tasks = connect.ok("GET", f"/connectors/{name}/tasks", expect=200)
    assert [t["id"] for t in tasks] == [{"connector": name, "task": 0}, {"connector": name, "task": 1}]
    for t in tasks:
        assert set(t) == {"id", "config"}
        assert t["config"]["file"] == config["file"]
        assert all(isinstance(v, str) for v in t["config"].values())

    for t in (0, 1):
        st = connect.ok("GET", f"/connectors/{name}/tasks/{t}/status", expect=200)
        assert set(st) == {"id", "state", "worker_id"} and (st["id"], st["state"]) == (t, "RUNNING"), st
    assert_error(connect.get(f"/connectors/{name}/tasks/7/status"), 404)
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


# -- updates ---------------------------------------------------------------------------------------------


def test_put_config_201_on_create_200_on_update(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-put"), unique("t-put")
    config = sink_config(tmp_path, topic)
    resp = connect.call("PUT", f"/connectors/{name}/config", config)
    assert resp.status == 201, resp
    assert resp.headers["location"].endswith(f"/connectors/{name}"), resp.headers
    assert_info_shape(resp.json, name, config, "sink", (0, 1))
    wait_info_tasks(connect, name, 1)

    updated = {**config, "tasks.max": "3"}
    resp = connect.call("PUT", f"/connectors/{name}/config", updated)
    assert resp.status == 200, resp
    assert_info_shape(resp.json, name, updated, "sink", (1, 3))
    assert connect.ok("GET", f"/connectors/{name}/config", expect=200) == {**updated, "name": name}
    connect.wait_state(name, "RUNNING", tasks=3)
    assert_info_shape(wait_info_tasks(connect, name, 3), name, updated, "sink", 3)
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_patch_config_null_removes_a_key(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-patch"), unique("t-patch")
    config = sink_config(tmp_path, topic, **{"tasks.max": "2", "errors.log.enable": "true"})
    connect.create(name, config)
    connect.wait_state(name, "RUNNING", tasks=2)
    resp = connect.call("PATCH", f"/connectors/{name}/config", {"errors.log.enable": None, "tasks.max": "1"})
    assert resp.status == 200, resp
    expected = {**config, "tasks.max": "1", "name": name}
    del expected["errors.log.enable"]
    assert resp.json["config"] == expected
    assert connect.ok("GET", f"/connectors/{name}/config", expect=200) == expected
    connect.wait_state(name, "RUNNING", tasks=1)
    assert_error(connect.call("PATCH", f"/connectors/{unique('nope')}/config", {"tasks.max": "1"}), 404)
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_config_update_right_after_create_wins(connect: ConnectProcess, tmp_path: Path) -> None:
    """An update that lands while a new connector is still being started must not be lost: the tasks
    end up generated from the latest config. (Three connectors, as the window is short.)"""
    names = [unique("rest-race") for _ in range(3)]
    for name in names:
        connect.create(name, sink_config(tmp_path, unique("t-race"), **{"tasks.max": "2"}))
        assert connect.call("PATCH", f"/connectors/{name}/config", {"tasks.max": "1"}).status == 200
    for name in names:
        connect.wait_state(name, "RUNNING", tasks=1, timeout=30)
        wait_info_tasks(connect, name, 1)
    for name in names:
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


# -- state changes -----------------------------------------------------------------------------------------


def test_pause_and_resume_202(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-pause"), unique("t-pause")
    src = tmp_path / "in.txt"
    src.write_text("a\nb\n")
    connect.create(name, source_config(src, topic))
    wait_for(lambda: len(consume(connect.bootstrap, topic, count=2, timeout=5)) == 2, 20, what="first lines")

    assert connect.call("PUT", f"/connectors/{name}/pause").status == 202
    connect.wait_state(name, "PAUSED", tasks=1)
    with src.open("a") as f:
        f.write("c\n")
    # paused: the new line must not be read (give the watchdog wake-up ample time)
    assert values(consume(connect.bootstrap, topic, count=3, timeout=1.5)) == ["a", "b"]

    assert connect.call("PUT", f"/connectors/{name}/resume").status == 202
    connect.wait_state(name, "RUNNING", tasks=1)
    got = wait_for(lambda: values(consume(connect.bootstrap, topic, count=3, timeout=5)) == ["a", "b", "c"], 20,
                   what="the line appended while paused")
    assert got
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_stop_204_stopped_without_tasks_then_resume(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-stop"), unique("t-stop")
    connect.create(name, sink_config(tmp_path, topic, **{"tasks.max": "2"}))
    connect.wait_state(name, "RUNNING", tasks=2)

    assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
    st = connect.wait_state(name, "STOPPED", tasks=0)
    assert st["tasks"] == []
    assert connect.ok("GET", f"/connectors/{name}", expect=200)["tasks"] == []
    assert connect.ok("GET", f"/connectors/{name}/tasks", expect=200) == []
    assert connect.call("PUT", f"/connectors/{name}/stop").status == 204  # idempotent

    assert connect.call("PUT", f"/connectors/{name}/resume").status == 202
    connect.wait_state(name, "RUNNING", tasks=2)
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_restart_connector_and_tasks(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-restart"), unique("t-restart")
    connect.create(name, sink_config(tmp_path, topic, **{"tasks.max": "2"}))
    connect.wait_state(name, "RUNNING", tasks=2)

    resp = connect.call("POST", f"/connectors/{name}/restart")
    assert resp.status == 204, resp
    assert resp.body == b""
    connect.wait_state(name, "RUNNING", tasks=2)

    resp = connect.call("POST", f"/connectors/{name}/restart", includeTasks="true", onlyFailed="false")
    assert resp.status == 202, resp
    body = resp.json
    assert body["name"] == name and body["type"] == "sink"
    assert body["connector"]["state"] == "RESTARTING"
    assert [(t["id"], t["state"]) for t in body["tasks"]] == [(0, "RESTARTING"), (1, "RESTARTING")]
    connect.wait_state(name, "RUNNING", tasks=2)

    # onlyFailed=true with nothing failed: 202, and nothing is restarting
    resp = connect.call("POST", f"/connectors/{name}/restart", includeTasks="true", onlyFailed="true")
    assert resp.status == 202, resp
    assert resp.json["connector"]["state"] == "RUNNING"
    assert {t["state"] for t in resp.json["tasks"]} == {"RUNNING"}

    resp = connect.call("POST", f"/connectors/{name}/tasks/1/restart")
    assert resp.status == 204, resp
    connect.wait_state(name, "RUNNING", tasks=2)
    assert_error(connect.call("POST", f"/connectors/{name}/tasks/9/restart"), 404)
    assert_error(connect.call("POST", f"/connectors/{unique('nope')}/restart"), 404)
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_delete_204_then_404(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-delete"), unique("t-delete")
    connect.create(name, sink_config(tmp_path, topic))
    resp = connect.call("DELETE", f"/connectors/{name}")
    assert resp.status == 204 and resp.body == b"", resp
    assert name not in connect.connector_names()
    body = assert_error(connect.get(f"/connectors/{name}"), 404)
    assert name in body["message"]
    assert_error(connect.get(f"/connectors/{name}/status"), 404)
    assert_error(connect.call("DELETE", f"/connectors/{name}"), 404)


# -- offsets (KIP-875) ------------------------------------------------------------------------------------


def test_source_offsets_get_alter_reset(connect: ConnectProcess, tmp_path: Path) -> None:
    name, topic = unique("rest-offsets"), unique("t-offsets")
    src = tmp_path / "in.txt"
    lines = [f"line-{i}" for i in range(10)]
    src.write_text("".join(line + "\n" for line in lines))
    size = src.stat().st_size
    connect.create(name, source_config(src, topic))
    wait_for(lambda: len(consume(connect.bootstrap, topic, count=10, timeout=5)) == 10, 20, what="10 records")

    # altering or resetting needs a STOPPED connector
    patch = {"offsets": [{"partition": {"filename": str(src)}, "offset": {"position": len("line-0\n") * 7}}]}
    for method, body in (("PATCH", patch), ("DELETE", None)):
        err = assert_error(connect.call(method, f"/connectors/{name}/offsets", body), 400)
        assert "STOPPED" in err["message"]

    # stopping commits the offset of everything read (the worker's periodic flush is 5 s apart)
    assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
    connect.wait_state(name, "STOPPED", tasks=0)
    expected = {"offsets": [{"partition": {"filename": str(src)}, "offset": {"position": size}}]}
    assert connect.ok("GET", f"/connectors/{name}/offsets", expect=200) == expected
    assert_error(connect.call("PATCH", f"/connectors/{name}/offsets", {"offsets": []}), 400)
    resp = connect.call("PATCH", f"/connectors/{name}/offsets", patch)
    assert resp.status == 200, resp
    assert "altered" in resp.json["message"]
    assert connect.ok("GET", f"/connectors/{name}/offsets", expect=200) == patch

    # resumed at the altered position: the last three lines are read again
    assert connect.call("PUT", f"/connectors/{name}/resume").status == 202
    want = lines + lines[7:]
    wait_for(lambda: values(consume(connect.bootstrap, topic, count=len(want), timeout=5)) == want, 20,
             what="lines 7..9 again after PATCH offsets", log=connect.log_text)

    assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
    connect.wait_state(name, "STOPPED", tasks=0)
    resp = connect.call("DELETE", f"/connectors/{name}/offsets")
    assert resp.status == 200, resp
    assert "reset" in resp.json["message"]
    assert connect.ok("GET", f"/connectors/{name}/offsets", expect=200) == {"offsets": []}

    # after the reset the whole file is read again from the start
    assert connect.call("PUT", f"/connectors/{name}/resume").status == 202
    want = want + lines
    wait_for(lambda: values(consume(connect.bootstrap, topic, count=len(want), timeout=5)) == want, 20,
             what="the whole file again after DELETE offsets", log=connect.log_text)
    assert_error(connect.get(f"/connectors/{unique('nope')}/offsets"), 404)
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_sink_offsets_get_alter_reset(connect: ConnectProcess, tmp_path: Path) -> None:
    """A sink's offsets are its consumer group's: PATCH commits them (null removes one), DELETE
    resets them, and the sink resumes where they say; bad entries are 400 naming the field."""
    name, topic = unique("rest-sink-offsets"), unique("t-sink-offsets")
    out = tmp_path / f"{topic}.out"
    lines = [f"rec-{i}" for i in range(10)]
    produce(connect.bootstrap, topic, [(None, line.encode(), []) for line in lines])
    connect.create(name, sink_config(tmp_path, topic))

    def written() -> list[str]:
        return out.read_text().splitlines() if out.exists() else []

    wait_for(lambda: written() == lines, 20, what="10 lines in the sink's file", log=connect.log_text)
    partition = {"kafka_topic": topic, "kafka_partition": 0}
    assert "STOPPED" in assert_error(connect.call("DELETE", f"/connectors/{name}/offsets"), 400)["message"]

    assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
    connect.wait_state(name, "STOPPED", tasks=0)
    committed = {"offsets": [{"partition": partition, "offset": {"kafka_offset": 10}}]}
    wait_for(lambda: connect.ok("GET", f"/connectors/{name}/offsets", expect=200) == committed, 30,
             what="offset 10 committed by the stopped sink")

    for entry, field in (({"partition": {"kafka_topic": topic}, "offset": {"kafka_offset": 1}},
                          "offsets[0].partition.kafka_partition"),
                         ({"partition": {**partition, "kafka_topic": ""}, "offset": {"kafka_offset": 1}},
                          "offsets[0].partition.kafka_topic"),
                         ({"partition": partition, "offset": {"kafka_offset": -1}}, "offsets[0].offset"),
                         ({"partition": partition, "offset": {"kafka_offset": "7"}}, "offsets[0].offset"),
                         ({"partition": partition, "offset": {}}, "offsets[0].offset")):
        message = assert_error(connect.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [entry]}),
                               400)["message"]
        assert field in message, (entry, message)
    gone = {"partition": {"kafka_topic": topic, "kafka_partition": 5}, "offset": {"kafka_offset": 1}}
    assert f"{topic}-5" in assert_error(connect.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [gone]}),
                                        400)["message"]
    assert connect.ok("GET", f"/connectors/{name}/offsets", expect=200) == committed  # nothing changed

    altered = {"offsets": [{"partition": partition, "offset": {"kafka_offset": 7}}]}
    assert "altered" in connect.ok("PATCH", f"/connectors/{name}/offsets", altered, expect=200)["message"]
    assert connect.ok("GET", f"/connectors/{name}/offsets", expect=200) == altered
    assert connect.call("PUT", f"/connectors/{name}/resume").status == 202
    wait_for(lambda: written() == lines + lines[7:], 20, what="records 7..9 again after PATCH offsets",
             log=connect.log_text)

    assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
    connect.wait_state(name, "STOPPED", tasks=0)
    removed = {"offsets": [{"partition": partition, "offset": None}]}
    assert connect.ok("PATCH", f"/connectors/{name}/offsets", removed, expect=200)
    assert connect.ok("GET", f"/connectors/{name}/offsets", expect=200) == {"offsets": []}
    assert connect.ok("PATCH", f"/connectors/{name}/offsets", altered, expect=200)
    assert "reset" in connect.ok("DELETE", f"/connectors/{name}/offsets", expect=200)["message"]
    assert connect.ok("GET", f"/connectors/{name}/offsets", expect=200) == {"offsets": []}
    assert "reset" in connect.ok("DELETE", f"/connectors/{name}/offsets", expect=200)["message"]  # no group: fine

    # after the reset the sink reads the topic from the start again
    assert connect.call("PUT", f"/connectors/{name}/resume").status == 202
    wait_for(lambda: written() == lines + lines[7:] + lines, 20, what="all records again after DELETE offsets",
             log=connect.log_text)
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


# -- plugins -----------------------------------------------------------------------------------------------


def test_connector_plugins_lists(connect: ConnectProcess) -> None:
    plugins = connect.ok("GET", "/connector-plugins", expect=200)
    assert all(set(p) == {"class", "type", "version"} for p in plugins), plugins
    assert {p["type"] for p in plugins} <= {"source", "sink"}
    by_short = {p["class"].rsplit(".", 1)[-1]: p for p in plugins}
    assert by_short["FileStreamSourceConnector"]["type"] == "source"
    assert by_short["FileStreamSinkConnector"]["type"] == "sink"
    assert connect.ok("GET", "/connector-plugins", expect=200, connectorsOnly="true") == plugins

    everything = connect.ok("GET", "/connector-plugins", expect=200, connectorsOnly="false")
    kinds = {p["type"] for p in everything}
    assert {"source", "sink", "transformation", "predicate", "converter", "header_converter"} <= kinds, kinds
    names = {(p["class"].rsplit(".", 1)[-1], p["type"]) for p in everything}
    for expected in (("InsertFieldValue", "transformation"), ("RegexRouter", "transformation"),
                     ("Filter", "transformation"), ("TopicNameMatches", "predicate"),
                     ("HasHeaderKey", "predicate"), ("JsonConverter", "converter"),
                     ("StringConverter", "converter"), ("SimpleHeaderConverter", "header_converter")):
        assert expected in names, (expected, sorted(names))
    assert {(p["class"], p["type"]) for p in plugins} <= {(p["class"], p["type"]) for p in everything}


def test_connector_plugin_config_definitions(connect: ConnectProcess) -> None:
    defs = connect.ok("GET", "/connector-plugins/FileStreamSourceConnector/config", expect=200)
    by_name = {d["name"]: d for d in defs}
    for d in defs:
        assert {"name", "type", "required", "default_value", "importance", "documentation", "group", "order",
                "width", "display_name", "dependents"} <= set(d), d
    assert {"name", "connector.class", "tasks.max", "file", "topic", "batch.size"} <= set(by_name)
    assert by_name["topic"]["required"] is True
    assert by_name["batch.size"]["type"] == "INT" and by_name["batch.size"]["default_value"] == "2000"
    sink_defs = {d["name"] for d in connect.ok("GET", "/connector-plugins/FileStreamSinkConnector/config", expect=200)}
    assert {"file", "topics", "topics.regex", "errors.deadletterqueue.topic.name"} <= sink_defs


def test_validate_reports_the_error_on_the_right_key(connect: ConnectProcess, tmp_path: Path) -> None:
    path = "/connector-plugins/FileStreamSinkConnector/config/validate"
    bad = {"connector.class": "FileStreamSinkConnector", "name": "v", "file": str(tmp_path / "x.out")}
    result = connect.ok("PUT", path, bad, expect=200)
    assert set(result) >= {"name", "error_count", "groups", "configs"}
    assert result["error_count"] > 0
    errors = {c["value"]["name"]: c["value"]["errors"] for c in result["configs"]}
    assert errors["topics"], errors
    assert "topics" in " ".join(errors["topics"])
    assert errors["file"] == [] and errors["name"] == []
    assert all(set(c) == {"definition", "value"} for c in result["configs"])

    good = connect.ok("PUT", path, {**bad, "topics": "x"}, expect=200)
    assert good["error_count"] == 0, good
    typo = connect.ok("PUT", path, {**bad, "topics": "x", "tasks.max": "many"}, expect=200)
    assert typo["error_count"] == 1
    assert {c["value"]["name"] for c in typo["configs"] if c["value"]["errors"]} == {"tasks.max"}

    # connector.class naming another plugin than the URL: 400
    mismatch = {**bad, "topics": "x", "connector.class": "FileStreamSourceConnector"}
    assert_error(connect.call("PUT", path, mismatch), 400)
    assert "v" not in connect.connector_names()


# -- loggers -----------------------------------------------------------------------------------------------


def test_admin_loggers_get_and_put(connect: ConnectProcess) -> None:
    loggers = connect.ok("GET", "/admin/loggers", expect=200)
    assert "root" in loggers
    assert set(loggers["root"]) == {"level", "last_modified"}
    assert loggers["root"]["level"] == "INFO"

    name = "headwater.connect.runtime.worker"
    resp = connect.call("PUT", f"/admin/loggers/{name}", {"level": "DEBUG"})
    assert resp.status == 200, resp
    assert name in resp.json
    one = connect.ok("GET", f"/admin/loggers/{name}", expect=200)
    assert one["level"] == "DEBUG" and isinstance(one["last_modified"], int)
    assert connect.ok("GET", "/admin/loggers", expect=200)[name]["level"] == "DEBUG"
    assert connect.ok("GET", "/admin/loggers", expect=200)["root"]["level"] == "INFO"

    assert connect.call("PUT", f"/admin/loggers/{name}", {"level": "INFO"}, scope="cluster").status == 204
    # cluster scope is applied through the config topic: poll
    wait_for(lambda: connect.ok("GET", f"/admin/loggers/{name}", expect=200)["level"] == "INFO", 30,
             what=f"{name} back at INFO")
    assert_error(connect.call("PUT", f"/admin/loggers/{name}", {"level": "LOUD"}), 400)
    assert_error(connect.get("/admin/loggers/no.such.logger.anywhere"), 404)


# -- the kc CLI (kafka-connect-py) ----------------------------------------------------------------------------


def _kc() -> str:
    exe = shutil.which("kc", path=str(Path(sys.executable).parent)) or shutil.which("kc")
    if exe is None:
        pytest.skip("the kc CLI (pip install kafka-connect-py) is not installed")
    return exe


def test_kc_cli_list_create_status_pause_resume_delete(connect: ConnectProcess, tmp_path: Path) -> None:
    exe = _kc()
    name, topic = unique("kc"), unique("t-kc")

    def kc(*args: str) -> str:
        done = subprocess.run([exe, "--url", connect.rest.rstrip("/"), *args], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    before = json.loads(kc("list"))
    assert isinstance(before, list) and name not in before

    spec = tmp_path / "connector.json"
    spec.write_text(json.dumps({"name": name, "config": sink_config(tmp_path, topic)}))
    created = json.loads(kc("create", "--config-file", str(spec)))
    assert created["name"] == name and created["type"] == "sink"
    assert name in json.loads(kc("list"))
    connect.wait_state(name, "RUNNING", tasks=1)

    status = json.loads(kc("status", name))
    assert status["name"] == name and status["connector"]["state"] == "RUNNING"

    kc("pause", name)
    connect.wait_state(name, "PAUSED", tasks=1)
    assert json.loads(kc("status", name))["connector"]["state"] == "PAUSED"
    kc("resume", name)
    connect.wait_state(name, "RUNNING", tasks=1)

    kc("delete", name)
    assert name not in json.loads(kc("list"))
    assert connect.get(f"/connectors/{name}").status == 404


def test_exactly_once_required_is_refused_with_kafkas_messages(connect: ConnectProcess, tmp_path: Path) -> None:
    """KIP-618's validation: exactly.once.support=required on a worker without exactly-once source support is
    refused on validate and create (Kafka's messages, on that key); requested (any case) passes; bad values of
    exactly.once.support and transaction.boundary are named."""
    from headwater.connect.runtime.exactly_once import NOT_ENABLED

    source = tmp_path / "eos.txt"
    source.write_text("a\n")
    path = "/connector-plugins/FileStreamSourceConnector/config/validate"

    def errors(**extra: str) -> dict[str, list[str]]:
        result = connect.ok("PUT", path, {**source_config(source, "eos-t", **extra), "name": "eos"}, expect=200)
        return {c["value"]["name"]: c["value"]["errors"] for c in result["configs"] if c["value"]["errors"]}

    # FileStreamSource declares exactly-once support for a file: the worker's level is the only problem
    # (a connector that says nothing: tests/unit/test_exactly_once_validation.py)
    assert errors(**{"exactly.once.support": "required"}) == {"exactly.once.support": [NOT_ENABLED]}
    assert errors(**{"exactly.once.support": "REQUESTED", "transaction.boundary": "Interval"}) == {}
    bad = errors(**{"exactly.once.support": "always", "transaction.boundary": "never"})
    assert set(bad) == {"exactly.once.support", "transaction.boundary"}, bad
    assert all("String must be one of (case insensitive)" in m[0] for m in bad.values()), bad
    name = unique("eos-required")
    refused = connect.call("POST", "/connectors", {"name": name, "config": source_config(
        source, "eos-t", **{"exactly.once.support": "required"})})
    assert refused.status == 400 and NOT_ENABLED in refused.body.decode(), refused
    assert connect.call("GET", f"/connectors/{name}").status == 404
    defs = {d["name"] for d in connect.ok("GET", "/connector-plugins/FileStreamSourceConnector/config", expect=200)}
    assert {"exactly.once.support", "transaction.boundary", "transaction.boundary.interval.ms"} <= defs
