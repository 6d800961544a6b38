"""Connect's readers and isolation.level, with real transactional producers (issue 29).

Committed and aborted transactions are interleaved on a topic by two confluent-kafka transactional
producers. A FileStreamSink whose consumer reads read_committed (the connector's
``consumer.override.isolation.level``, or the worker's ``consumer.isolation.level``) writes exactly the
committed records; one reading read_uncommitted (Kafka's default) writes the aborted ones too. No
control record (commit or abort marker) ever reaches a sink. The internal topics' log reads committed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from support.connectproc import ConnectProcess, module_connect, sink_config, unique, wait_for
from support.mirrorkit import create
from support.txnmix import Mix, write_interleaved

from headwater.connect.storage.kafka_log import KafkaBasedLog

pytestmark = pytest.mark.timeout(180)

connect = module_connect("read-committed-sinks")


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


def sink_delivers(proc: ConnectProcess, out: Path, topic: str, mix: Mix, **extra: str) -> list[bytes]:
    """Run a file sink over ``topic`` until it wrote the mix's end record; what it wrote."""
    name = unique("txn-sink")
    proc.create(name, sink_config(out, topic, **extra))
    written: list[bytes] = wait_for(lambda: lines(out) if mix.end in lines(out) else None, 60, 0.1,
                                    f"{mix.end!r} in {out}", proc.log_text)
    proc.ok("DELETE", f"/connectors/{name}", expect=204)
    return written


def test_read_committed_override_delivers_only_committed(connect: ConnectProcess, tmp_path: Path) -> None:
    topic = unique("txn-mix")
    create(connect.bootstrap, topic, 1)
    mix = write_interleaved(connect.bootstrap, topic)
    committed = sink_delivers(connect, tmp_path / "committed.out", topic, mix,
                              **{"consumer.override.isolation.level": "read_committed"})
    assert committed == [*mix.committed, mix.end]  # in log order, nothing aborted, no marker
    # the same topic read_uncommitted (the default): the aborted records too, and still no marker
    everything = sink_delivers(connect, tmp_path / "uncommitted.out", topic, mix)
    assert Counter(everything) == Counter(mix.everything) and len(everything) == len(mix.everything)


def test_worker_consumer_isolation_level_applies_to_sinks(tmp_path: Path) -> None:
    with ConnectProcess(tmp_path / "worker", settings={"consumer.isolation.level": "read_committed"}) as proc:
        topic = unique("txn-mix")
        create(proc.bootstrap, topic, 1)
        mix = write_interleaved(proc.bootstrap, topic)
        assert sink_delivers(proc, tmp_path / "worker.out", topic, mix) == [*mix.committed, mix.end]
        # a connector may still ask for everything
        everything = sink_delivers(proc, tmp_path / "override.out", topic, mix,
                                   **{"consumer.override.isolation.level": "read_uncommitted"})
        assert sorted(everything) == sorted(mix.everything)


def test_internal_topic_log_reads_committed(connect: ConnectProcess) -> None:
    """KafkaBasedLog (configs, offsets, statuses) replays only committed records, and reads to the end past
    aborted transactions and markers."""
    topic = unique("txn-internal")
    create(connect.bootstrap, topic, 1, **{"cleanup.policy": "compact"})
    mix = write_interleaved(connect.bootstrap, topic)
    seen: list[bytes | None] = []

    async def replay() -> None:
        log = KafkaBasedLog(connect.bootstrap, topic, lambda k, v, p, o: seen.append(v), unique("txn-log"))
        await log.start()  # returns once read to the end
        await log.stop()

    asyncio.run(replay())
    assert seen == [*mix.committed, mix.end]


def test_bad_isolation_level_override_is_refused(connect: ConnectProcess, tmp_path: Path) -> None:
    config = sink_config(tmp_path / "never.out", unique("t"), **{"consumer.override.isolation.level": "committed"})
    validated = connect.ok("PUT", "/connector-plugins/FileStreamSinkConnector/config/validate",
                           {**config, "name": "bad"})
    errors = {c["value"]["name"]: c["value"]["errors"] for c in validated["configs"] if c["value"]["errors"]}
    message = "consumer.override.isolation.level must be read_uncommitted or read_committed, not 'committed'"
    assert errors.get("consumer.override.isolation.level") == [message], errors
    resp = connect.call("PUT", "/connectors/bad/config", config)
    assert resp.status == 400 and message in resp.json["message"], resp
