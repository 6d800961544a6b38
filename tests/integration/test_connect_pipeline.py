"""Data through ``headwater up``: file -> FileStreamSource -> topic -> FileStreamSink -> file, source
offsets across clean and unclean restarts, tailing (appends, rotation, truncation), an SMT chain with
predicates on JSON records, and a connector plugin hot-loaded from ``plugin.path``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from support.connectproc import (
    ConnectProcess,
    TopicReader,
    consume,
    end_offset,
    module_connect,
    produce,
    sink_config,
    source_config,
    unique,
    values,
    wait_for,
)

pytestmark = pytest.mark.timeout(150)

REPO = Path(__file__).resolve().parents[2]


# shared by the tests that neither restart it nor need their own plugin.path
connect = module_connect("connect-pipeline")


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# -- round trip ----------------------------------------------------------------------------------------------


def test_file_round_trip_100k_lines_is_exact(connect: ConnectProcess, tmp_path: Path) -> None:
    n = 100_000
    src, out = tmp_path / "in.txt", tmp_path / "out" / "out.txt"
    specials = ["", "  leading and trailing  ", "tab\tseparated", "unicodé ✓ 漢字 🚀", "a=b, {c: d}", "x" * 3000]
    lines = [specials[i % len(specials)] if i % 997 == 0 else f"line {i:06d} {'#' * (i % 40)}" for i in range(n)]
    data = "".join(line + "\n" for line in lines)
    src.write_text(data, encoding="utf-8")
    topic = unique("roundtrip")
    source, sink = unique("rt-src"), unique("rt-sink")
    started = time.monotonic()
    connect.create(sink, sink_config(out, topic))
    connect.create(source, source_config(src, topic))

    def done() -> bool:
        return out.exists() and out.stat().st_size >= len(data.encode())

    wait_for(done, 90, 0.1, "the sink file to hold every line", connect.log_text)
    elapsed = time.monotonic() - started
    print(f"{n} lines round trip in {elapsed:.1f}s")
    # a little longer: nothing more may arrive
    time.sleep(0.5)
    assert out.read_bytes() == data.encode("utf-8")

    got = consume(connect.bootstrap, topic, count=n, settle=0.5)
    assert len(got) == n
    assert values(got) == lines
    assert all(m.key is None for m in got[:100])
    for name in (source, sink):
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


# -- restarts -----------------------------------------------------------------------------------------------


class Appender(threading.Thread):
    """Appends numbered lines to a file until stopped (a live log file)."""

    def __init__(self, path: Path, start: int, per_write: int = 50, pause: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.path, self.next, self.per_write, self.pause = path, start, per_write, pause
        self.halt = threading.Event()

    def run(self) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            while not self.halt.is_set():
                f.write("".join(f"w-{i:07d}\n" for i in range(self.next, self.next + self.per_write)))
                f.flush()
                self.next += self.per_write
                time.sleep(self.pause)

    def stop(self) -> int:
        self.halt.set()
        self.join(10)
        return self.next


def _restart_scenario(tmp_path: Path, kill: bool) -> tuple[list[str], list[str], ConnectProcess]:
    """Read part of a growing file, stop the process (SIGTERM or SIGKILL) while lines are still
    being appended, start it again with the same data dir and connector file, and return the
    file's lines and the topic's values once everything was read."""
    src = tmp_path / "live.log"
    initial = 30_000
    src.write_text("".join(f"i-{i:07d}\n" for i in range(initial)))
    topic = unique("restart")
    spec = tmp_path / "source.json"
    spec.write_text(json.dumps({"name": "live-source", "config": source_config(src, topic, **{"batch.size": "500"})}))
    proc = ConnectProcess(tmp_path / "proc", connectors=[spec])
    proc.start()
    appender = Appender(src, 0)
    try:
        wait_for(lambda: end_offset(proc.bootstrap, topic) >= 5_000, 30, 0.02, "part of the file in the topic",
                 proc.log_text)
        appender.start()
        if kill:
            # let one offset flush (every 5 s under `headwater up`) happen first, so the restart resumes
            # from a stored offset rather than from the start of the file
            wait_for(lambda: proc.ok("GET", "/connectors/live-source/offsets", expect=200)["offsets"], 15, 0.1,
                     "a committed source offset", proc.log_text)
            wait_for(lambda: end_offset(proc.bootstrap, topic) > initial, 30, 0.05, "appended lines read")
            proc.kill()
        else:
            wait_for(lambda: end_offset(proc.bootstrap, topic) > 10_000, 30, 0.02, "more of the file read")
            assert proc.stop() == 0, proc.log_text(True)[-3000:]
        assert not proc.running
        time.sleep(0.3)  # lines keep being appended while the process is down
        proc.start()
        # the task starts again from the stored offset
        wait_for(lambda: "resuming" in proc.log_text(since_start=True), 30, 0.05, "the source task to resume",
                 lambda: proc.log_text(True))
        time.sleep(0.3)  # lines are still appended while the restarted task reads
        written = appender.stop()
        lines = read_lines(src)
        assert len(lines) == initial + written
        with TopicReader(proc.bootstrap, topic) as reader:
            wait_for(lambda: reader.read(timeout=0.5) and set(lines) <= set(reader.values()), 60, 0.1,
                     "every line of the file in the topic", proc.log_text)
            reader.read(settle=1.0)
            return lines, reader.values(), proc
    except BaseException:
        appender.halt.set()
        proc.kill()
        raise


def test_source_resumes_exactly_once_after_sigterm(tmp_path: Path) -> None:
    lines, got, proc = _restart_scenario(tmp_path, kill=False)
    try:
        log = proc.log_text()
        assert "resuming" in log
        dup = sum(c - 1 for c in Counter(got).values() if c > 1)
        print(f"SIGTERM restart: {len(lines)} lines, {len(got)} records, {dup} duplicates")
        assert dup == 0
        assert got == lines  # every line exactly once, in order
    finally:
        proc.stop()


@pytest.mark.slow
def test_source_loses_nothing_after_sigkill(tmp_path: Path) -> None:
    lines, got, proc = _restart_scenario(tmp_path, kill=True)
    try:
        counts = Counter(got)
        missing = [line for line in lines if line not in counts]
        dup = sum(c - 1 for c in counts.values() if c > 1)
        print(f"SIGKILL restart: {len(lines)} lines, {len(got)} records, {dup} duplicates, {len(missing)} missing")
        assert missing == []
        assert set(counts) == set(lines)
        assert dup < len(lines), "resumed from the start of the file, not from the stored offset"
        # the duplicates are one contiguous replay: after dropping repeats the order is the file's
        first_seen = list(dict.fromkeys(got))
        assert first_seen == lines
    finally:
        proc.stop()


# -- tailing ------------------------------------------------------------------------------------------------


def test_appended_lines_arrive_within_two_seconds(connect: ConnectProcess, tmp_path: Path) -> None:
    src, topic, name = tmp_path / "tail.txt", unique("tail"), unique("tail-src")
    src.write_text("first\nsecond\n")
    connect.create(name, source_config(src, topic))
    with TopicReader(connect.bootstrap, topic) as reader:
        assert [m.value for m in reader.read(2, timeout=20)] == [b"first", b"second"]
        latencies = []
        for i in range(3):
            time.sleep(0.3)  # the task is idle, waiting for file events
            t0 = time.monotonic()
            with src.open("a") as f:
                f.write(f"appended-{i}\n")
            reader.read(3 + i, timeout=10)
            latencies.append(time.monotonic() - t0)
            assert reader.values()[-1] == f"appended-{i}"
        print("append-to-topic latencies:", [f"{x:.3f}s" for x in latencies])
        # the middle of three: one append delayed by a busy machine does not decide (an idle wait of the
        # task that the file event did not cut short would delay every one)
        assert sorted(latencies)[1] < 2.0, latencies
        # a partial line waits for its end of line
        with src.open("a") as f:
            f.write("no newline yet")
        assert reader.read(6, timeout=1.0) and len(reader.messages) == 5
        with src.open("a") as f:
            f.write(", now complete\r\nwindows line\rold mac line\n")
        reader.read(8, timeout=10, settle=0.3)
        assert reader.values()[5:] == ["no newline yet, now complete", "windows line", "old mac line"]
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_rotation_and_truncation_are_followed(connect: ConnectProcess, tmp_path: Path) -> None:
    src, topic, name = tmp_path / "app.log", unique("rotate"), unique("rotate-src")
    src.write_text("old-0\nold-1\nold-2\n")
    connect.create(name, source_config(src, topic))
    with TopicReader(connect.bootstrap, topic) as reader:
        assert reader.read(3, timeout=20) and reader.values() == ["old-0", "old-1", "old-2"]

        # logrotate style: move the file away; the writer still appends to it a little; a new file appears
        rotated = tmp_path / "app.log.1"
        os.rename(src, rotated)
        with rotated.open("a") as f:
            f.write("late-0\nlate-1\n")
        src.write_text("new-0\nnew-1\n")
        want = ["old-0", "old-1", "old-2", "late-0", "late-1", "new-0", "new-1"]
        reader.read(len(want), timeout=15, settle=0.5)
        assert reader.values() == want, connect.log_text()[-3000:]

        with src.open("a") as f:
            f.write("new-2\n")
        want.append("new-2")
        reader.read(len(want), timeout=10)
        assert reader.values() == want

        # truncation: the file is cut and rewritten shorter; it is read again from the start
        with src.open("w") as f:
            f.write("t-0\n")
        want.append("t-0")
        reader.read(len(want), timeout=10, settle=0.5)
        assert reader.values() == want, connect.log_text()[-3000:]
        with src.open("a") as f:
            f.write("t-1\n")
        want.append("t-1")
        reader.read(len(want), timeout=10, settle=0.3)
        assert reader.values() == want
    assert "truncated" in connect.log_text()
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


# -- SMTs and predicates ----------------------------------------------------------------------------------------

_JAVA_MAP = re.compile(r"^\{(.*)\}$")


def parse_map_line(line: str) -> dict[str, str]:
    """A map value as FileStreamSink writes it. Kafka prints Java's ``Map.toString``, ``{k=v, k2=v2}``;
    a Python ``repr`` (``{'k': 'v'}``) is accepted here too so that this test checks the SMTs, and
    ``test_file_sink_writes_map_values_like_kafka`` checks the format. Values are compared as strings."""
    if line.startswith("{'") or line == "{}":
        return {str(k): str(v) for k, v in ast.literal_eval(line).items()}
    m = _JAVA_MAP.match(line)
    assert m, f"not a map: {line!r}"
    return dict(part.split("=", 1) for part in m.group(1).split(", ")) if m.group(1) else {}


def test_smt_chain_with_predicates_on_json(connect: ConnectProcess, tmp_path: Path) -> None:
    suffix = unique("smt")
    orders, other = f"{suffix}-orders", f"{suffix}-other"
    out, name = tmp_path / "smt.out", unique("smt-sink")
    skip = [("skip", b"yes")]
    produce(connect.bootstrap, orders, [
        (b"k1", json.dumps({"id": 1, "kind": "order"}).encode(), []),
        (b"k2", json.dumps({"id": 2, "kind": "order"}).encode(), skip),
        (b"k3", json.dumps({"id": 3, "kind": "order"}).encode(), [("trace", b"t")]),
    ])
    produce(connect.bootstrap, other, [
        (None, json.dumps({"id": 10, "kind": "other"}).encode(), []),
        (None, json.dumps({"id": 11, "kind": "other"}).encode(), skip),
    ])
    config = sink_config(out, f"{orders},{other}", **{
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "transforms": "insert,mark,route,drop,where",
        # every record: a static field
        "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.insert.static.field": "src",
        "transforms.insert.static.value": "test",
        # negate=true: only records NOT from the orders topic are marked
        "transforms.mark.type": "InsertField$Value",
        "transforms.mark.static.field": "plain",
        "transforms.mark.static.value": "yes",
        "transforms.mark.predicate": "isOrders",
        "transforms.mark.negate": "true",
        # only the orders topic is routed
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "(.*)-orders",
        "transforms.route.replacement": "$1-routed",
        "transforms.route.predicate": "isOrders",
        # records carrying the header "skip" are dropped
        "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.drop.predicate": "hasSkip",
        # the topic after routing, to see it in the file
        "transforms.where.type": "InsertField$Value",
        "transforms.where.topic.field": "topic",
        "predicates": "isOrders,hasSkip",
        "predicates.isOrders.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.isOrders.pattern": ".*-orders",
        "predicates.hasSkip.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.hasSkip.name": "skip",
    })
    connect.create(name, config)
    wait_for(lambda: len(read_lines(out)) >= 3, 20, 0.1, "3 lines in the sink file", connect.log_text)
    time.sleep(0.5)  # nothing more may arrive
    lines = read_lines(out)
    assert len(lines) == 3, lines
    got = sorted((parse_map_line(line) for line in lines), key=lambda d: int(d["id"]))
    assert got == [
        {"id": "1", "kind": "order", "src": "test", "topic": f"{suffix}-routed"},
        {"id": "3", "kind": "order", "src": "test", "topic": f"{suffix}-routed"},
        {"id": "10", "kind": "other", "src": "test", "plain": "yes", "topic": other},
    ]
    assert connect.status(name)["tasks"][0]["state"] == "RUNNING"
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_file_sink_writes_map_values_like_kafka(connect: ConnectProcess, tmp_path: Path) -> None:
    """Kafka's FileStreamSinkTask does ``println(record.value())``: a schemaless JSON object is a Java
    Map, written as ``{key=value, ...}`` (as Headwater's StringConverter renders maps)."""
    topic, out, name = unique("mapfmt"), tmp_path / "map.out", unique("mapfmt-sink")
    produce(connect.bootstrap, topic, [(None, b'{"a": 1, "b": "x", "c": [1, 2], "d": null, "e": true}', [])])
    connect.create(name, sink_config(out, topic, **{"value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                                    "value.converter.schemas.enable": "false"}))
    wait_for(lambda: read_lines(out), 20, 0.1, "a line in the sink file", connect.log_text)
    assert read_lines(out) == ["{a=1, b=x, c=[1, 2], d=null, e=true}"]
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


# -- plugins -------------------------------------------------------------------------------------------------------


def test_plugin_hot_loaded_from_plugin_path(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    with ConnectProcess(tmp_path / "proc", plugin_path=plugins) as proc:
        def classes() -> list[str]:
            return [p["class"] for p in proc.ok("GET", "/connector-plugins", expect=200)]

        assert not any("DataGen" in c for c in classes())
        bad = proc.call("POST", "/connectors", {"name": "gen", "config": {"connector.class": "DataGenSourceConnector",
                                                                           "topic": "x"}})
        assert bad.status == 400, bad

        shutil.copytree(REPO / "plugins" / "headwater-datagen", plugins / "headwater-datagen",
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        found = wait_for(lambda: [c for c in classes() if c.endswith("DataGenSourceConnector")], 15, 0.1,
                         "DataGenSourceConnector in /connector-plugins", proc.log_text)
        assert found == ["headwater_datagen.DataGenSourceConnector"]

        topic = unique("datagen")
        proc.create("gen", {"connector.class": "DataGenSourceConnector", "topic": topic, "max.records": "500",
                            "rate.per.sec": "0"})
        proc.wait_state("gen", "RUNNING", tasks=1)
        got = consume(proc.bootstrap, topic, count=500, timeout=30, settle=1.0)
        assert len(got) == 500
        assert [m.key for m in got] == [str(i).encode() for i in range(500)]
        assert (got[0].value or b"").startswith(b"{seq=0, task=0, ts=")


# -- topic creation for source connectors (KIP-158) ------------------------------------------------------


def _topic_layout(bootstrap: str, topic: str) -> tuple[int, str, int]:
    """(partitions, retention.ms, records over all partitions) of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=10).topics  # all topics: asking for this one would auto-create it
    if topic not in topics:
        return 0, "", 0
    partitions = len(topics[topic].partitions)
    (future,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("tc-watermarks")})
    try:
        records = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                      for p in range(partitions))
    finally:
        consumer.close()
    return partitions, future.result(10)["retention.ms"].value, records


def test_source_topics_are_created_by_their_topic_creation_group(connect: ConnectProcess, tmp_path: Path) -> None:
    """The first group whose include matches (and exclude does not) gives partitions and configs; the
    default group takes the rest. Topics are created before the first record, not auto-created."""
    short, plain = unique("tc-short"), unique("tc-plain")
    creation = {"topic.creation.groups": "short", "topic.creation.default.replication.factor": "-1",
                "topic.creation.default.partitions": "3", "topic.creation.short.include": "tc-short-.*",
                "topic.creation.short.partitions": "2", "topic.creation.short.retention.ms": "3600000"}
    for name, topic in (("tc-a", short), ("tc-b", plain)):
        path = tmp_path / f"{name}.txt"
        path.write_text("k:one\nk:two\n")
        connect.create(name, source_config(path, topic, **creation))
    for topic in (short, plain):
        wait_for(lambda topic=topic: _topic_layout(connect.bootstrap, topic)[2] == 2,  # type: ignore[misc]
                 30, 0.2, f"2 records in {topic}")
    assert _topic_layout(connect.bootstrap, short) == (2, "3600000", 2)
    assert _topic_layout(connect.bootstrap, plain) == (3, "604800000", 2)  # retention: the broker's default


def test_invalid_topic_creation_settings_name_the_key(connect: ConnectProcess, tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("")
    missing = connect.call("POST", "/connectors", {"name": "tc-bad", "config": source_config(
        path, "t", **{"topic.creation.default.partitions": "3"})})
    assert missing.status == 400 and "topic.creation.default.replication.factor" in missing.json["message"]
    zero = connect.call("POST", "/connectors", {"name": "tc-bad", "config": source_config(
        path, "t", **{"topic.creation.default.partitions": "0", "topic.creation.default.replication.factor": "1"})})
    assert zero.status == 400 and "topic.creation.default.partitions" in zero.json["message"]
    assert "tc-bad" not in connect.connector_names()
