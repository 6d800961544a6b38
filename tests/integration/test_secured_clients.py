"""Every Kafka client a Connect worker creates, secured with the properties users copy from Kafka's and their
cloud vendor's documentation, against Headwater's broker with a SASL_SSL (SCRAM-SHA-512) and an mTLS listener:
two distributed workers whose only bootstrap is the SASL_SSL listener (internal stores, group membership,
admin, the tasks' producers and consumers, sink offsets, the REST admin view) run a file pipeline; one worker
on the mTLS listener (PKCS12 keystore) does too; a connector whose client logs in with a wrong password, or
trusts another CA, has its task FAILED in seconds naming the bootstrap server and the reason; keys that
cannot be honoured are refused at validation and at worker start, naming the key. A Postgres CDC source runs
on the same secured workers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from support.connectproc import produce, sink_config, source_config, unique, wait_for
from support.mirrorkit import read_all
from support.securedclients import Secured, secured_broker
from support.workerproc import REPO, SHIPPED_PROPERTIES, Cluster, fast_settings

pytestmark = pytest.mark.timeout(240)

@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_broker(tmp_path_factory.mktemp("secured")) as s:
        yield s


@pytest.fixture(scope="module")
def workers(secured: Secured, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two workers that know only the SASL_SSL listener: top-level security for the stores, the group and the
    admin client, ``consumer.*`` repeating it (as Kafka's documentation has it), ``producer.*`` inheriting it."""
    tag = unique("sec")
    settings = {**fast_settings(tag), **secured.scram(), **{f"consumer.{k}": v for k, v in secured.scram().items()}}
    with Cluster(tmp_path_factory.mktemp("sec-workers"), secured.bootstrap("SASL_SSL"), tag, settings) as cluster:
        cluster.start(2)
        yield cluster


def _file_pipeline(cluster: Cluster, tmp: Path, lines: list[str]) -> None:
    """A file source -> topic -> file sink through ``cluster``; waits for every line in the sink's file."""
    topic, source, sink = unique("lines"), tmp / "in.txt", tmp / "out.txt"
    source.write_text("".join(f"{line}\n" for line in lines))
    worker = cluster.workers[0]
    src, snk = unique("file-source"), unique("file-sink")
    # KIP-158 topic creation: the task's admin client creates the topic (secured as the producer is)
    worker.ok("PUT", f"/connectors/{src}/config", source_config(source, topic, **{
        "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "1"}))
    worker.ok("PUT", f"/connectors/{snk}/config", sink_config(sink, topic))
    cluster.wait_running(src, 1, 60)
    cluster.wait_running(snk, 1, 60)
    wait_for(lambda: sink.exists() and sink.read_text().splitlines() == lines, 60, 0.2,
             f"{len(lines)} lines through {topic} into {sink}", cluster.logs)
    # The sink's committed offsets come through the worker's (secured) admin client
    offsets = wait_for(lambda: worker.ok("GET", f"/connectors/{snk}/offsets")["offsets"] or None, 30, 0.5,
                       "the sink's committed offsets")
    assert offsets == [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                        "offset": {"kafka_offset": len(lines)}}]


def test_two_workers_over_sasl_ssl_scram_run_a_file_pipeline(secured: Secured, workers: Cluster,
                                                            tmp_path: Path) -> None:
    assert len(workers.live) == 2 and workers.leader() is not None  # the group formed over SASL_SSL
    _file_pipeline(workers, tmp_path, [f"line {i}" for i in range(200)])
    # The REST admin view reads the cluster through the worker's secured client settings too
    topics = {t["topic"] for t in workers.workers[1].ok("GET", "/admin/topics")}
    assert workers.settings is not None and workers.settings["config.storage.topic"] in topics


def test_postgres_cdc_through_workers_over_sasl_ssl_scram(secured: Secured, workers: Cluster, postgres) -> None:
    """Snapshot, then streaming, from a real PostgreSQL into the secured cluster: the source task's producer,
    its admin client (topic creation) and the offsets store all log in with SCRAM over TLS."""
    database, prefix = "sec_" + uuid.uuid4().hex[:8], unique("secpg")
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
        db.execute("INSERT INTO items VALUES (1, 'one'), (2, 'two')")
        name = unique("secured-cdc")
        workers.workers[0].ok("PUT", f"/connectors/{name}/config", {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": postgres.host, "database.port": str(postgres.port),
            "database.user": postgres.user, "database.password": postgres.password or "",
            "database.dbname": database, "topic.prefix": prefix, "plugin.name": "pgoutput",
            "slot.name": f"slot_{uuid.uuid4().hex[:8]}", "publication.name": f"pub_{uuid.uuid4().hex[:6]}",
            "slot.drop.on.stop": "true",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "1"})
        workers.wait_running(name, 1, 60)
        topic = f"{prefix}.public.items"
        snapshot = read_all(secured.proc.bootstrap, topic, 2, timeout=60)  # the test reads the open listener
        assert [json.loads(r.value or b"{}").get("op") for r in snapshot] == ["r", "r"]
        db.execute("INSERT INTO items VALUES (3, 'three')")
        events = read_all(secured.proc.bootstrap, topic, 3, timeout=60)
    created = json.loads(events[-1].value or b"{}")
    assert (created["op"], created["after"]) == ("c", {"id": 3, "name": "three"})
    workers.workers[0].ok("DELETE", f"/connectors/{name}")


def test_dead_letter_queue_producer_over_sasl_ssl(secured: Secured, workers: Cluster, tmp_path: Path) -> None:
    topic, dlq, out = unique("raw"), unique("dlq"), tmp_path / "out.txt"
    produce(secured.proc.bootstrap, topic, [(None, b"not json", []), (None, b'"fine"', [])])  # the test's listener
    name = unique("dlq-sink")
    workers.workers[0].ok("PUT", f"/connectors/{name}/config", sink_config(out, topic, **{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1"}))
    wait_for(lambda: out.exists() and out.read_text() == "fine\n", 60, 0.2, "the good record in the sink's file",
             workers.logs)
    dead = wait_for(lambda: read_all(secured.proc.bootstrap, dlq, 1, timeout=3) or None, 60, 0.5,
                    f"the bad record in {dlq}", workers.logs)
    assert [r.value for r in dead] == [b"not json"]


def test_mtls_worker_runs_a_file_pipeline(secured: Secured, tmp_path: Path) -> None:
    tag = unique("mtls")
    with Cluster(tmp_path / "w", secured.bootstrap("MTLS"), tag, {**fast_settings(tag), **secured.mtls()}) as c:
        c.start(1)
        _file_pipeline(c, tmp_path, [f"row {i}" for i in range(50)])


@pytest.mark.parametrize("case", ["wrong password", "untrusted CA"])
def test_a_client_that_cannot_log_in_fails_its_task_naming_bootstrap_and_reason(
        secured: Secured, workers: Cluster, tmp_path: Path, case: str) -> None:
    override: dict[str, str] = (
        {"producer.override.sasl.jaas.config": secured.scram("not-the-password")["sasl.jaas.config"]}
        if case == "wrong password" else
        {"producer.override.ssl.truststore.location": str(secured.other_ca.cert)})
    (tmp_path / "in.txt").write_text("x\n")
    name = unique("refused")
    worker = workers.workers[1]
    started = time.monotonic()
    worker.ok("PUT", f"/connectors/{name}/config", source_config(tmp_path / "in.txt", unique("t"), **override))

    def failed() -> str | None:
        status = worker.status(name)
        tasks = status["tasks"] if status else []
        return tasks[0].get("trace") if tasks and tasks[0]["state"] == "FAILED" else None

    trace = wait_for(failed, 30, 0.2, f"task of {name} FAILED", workers.logs)
    assert time.monotonic() - started < 30
    assert secured.bootstrap("SASL_SSL") in trace and "SASL_SSL" in trace
    reason = "invalid credentials" if case == "wrong password" else "CERTIFICATE_VERIFY_FAILED"
    assert reason in trace, trace
    worker.ok("DELETE", f"/connectors/{name}")


def test_keys_that_cannot_be_honoured_are_refused_by_name(secured: Secured, workers: Cluster,
                                                           tmp_path: Path) -> None:
    worker = workers.workers[0]
    config = source_config(tmp_path / "in.txt", "t", **{"producer.override.sasl.mechanism": "GSSAPI",
                                                         "consumer.override.ssl.truststore.type": "JKS",
                                                         "consumer.override.ssl.truststore.location": "/x.jks"})
    result = worker.ok("PUT", "/connector-plugins/FileStreamSourceConnector/config/validate", config)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in result["configs"] if c["value"]["errors"]}
    assert any("sasl.mechanism=GSSAPI" in e for e in errors.get("producer.override.sasl.mechanism", [])), errors
    assert any("JKS" in e for e in errors.get("consumer.override.ssl.truststore.type", [])), errors
    # A worker whose own settings ask for Kerberos does not start, and says which key
    settings = {**secured.scram(), "bootstrap.servers": secured.bootstrap("SASL_SSL"),
                "listeners": "http://127.0.0.1:0", "producer.sasl.mechanism": "GSSAPI"}
    proc = subprocess.run(
        [sys.executable, "-m", "headwater", "connect", "distributed", str(SHIPPED_PROPERTIES),
         *[a for k, v in settings.items() for a in ("--set", f"{k}={v}")]],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "producer.sasl.mechanism=GSSAPI" in proc.stderr, proc.stderr[-2000:]


def test_a_worker_that_cannot_log_in_stops_naming_bootstrap_and_reason(secured: Secured) -> None:
    tag = unique("refused-worker")
    settings = {**fast_settings(tag), **secured.scram("not-the-password"),
                "bootstrap.servers": secured.bootstrap("SASL_SSL"), "listeners": "http://127.0.0.1:0"}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "headwater", "connect", "distributed", str(SHIPPED_PROPERTIES),
         *[a for k, v in settings.items() for a in ("--set", f"{k}={v}")]],
        cwd=REPO, capture_output=True, text=True, timeout=90)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and time.monotonic() - started < 60, output[-3000:]
    assert f"{secured.bootstrap('SASL_SSL')} (SASL_SSL)" in output and "invalid credentials" in output, output[-3000:]
