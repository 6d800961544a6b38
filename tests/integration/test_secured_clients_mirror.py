"""MirrorMaker between a secured and an open cluster: A takes only SASL_SSL/SCRAM-SHA-512 from the mirror (its
PLAINTEXT listener is the test's own), B is PLAINTEXT. In connector mode a worker on B runs MirrorSource and
MirrorCheckpoint with ``source.cluster.security.protocol`` / ``sasl.*`` / ``ssl.*``; in dedicated mode
``headwater mirror mm2.properties`` takes ``A.security.protocol`` / ``A.sasl.jaas.config`` / ``A.ssl.*`` (and its
heartbeats-only flow B->A runs a worker on A, secured by the same keys). Records arrive byte for byte and a
group's committed offsets on A are translated into checkpoints on B; ``headwater mirror translate-offsets``
reads them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from support.brokerproc import BrokerProcess
from support.connectproc import unique, wait_for
from support.mirrorkit import by_partition, create, mirror_config, produce_keyed, read_all, topics, unpack_checkpoint
from support.securedclients import Secured, secured_broker
from support.workerproc import BROKER_OVERRIDES, REPO, Cluster, fast_settings
from test_mirror_dedicated_mode import FAST, MirrorProcess

pytestmark = pytest.mark.timeout(240)

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
CHECKPOINT = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Secured, BrokerProcess]]:
    base = tmp_path_factory.mktemp("secured-mirror")
    with secured_broker(base / "a") as a, BrokerProcess(base / "b", *BROKER_OVERRIDES) as b:
        yield a, b


def commit(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def checkpoints(bootstrap: str, source: str, group: str) -> dict[int, tuple[str, int, int]]:
    """The newest checkpoint of ``group`` per partition: (remote topic, upstream, downstream offset)."""
    out = {}
    for r in read_all(bootstrap, f"{source}.checkpoints.internal"):
        if r.key is not None:
            g, topic, partition, upstream, downstream, _ = unpack_checkpoint(r.key, r.value)
            if g == group:
                out[partition] = (topic, upstream, downstream)
    return out


def _mirrored_with_checkpoints(source: tuple[str, str], target: str, topic: str, group: str, logs: object) -> None:
    """Every record of the source's ``topic`` on ``target`` as ``<alias>.<topic>``, and ``group``'s offsets
    {0: 120, 1: 300} translated; ``source``: (alias, bootstrap), both bootstraps PLAINTEXT listeners."""
    alias, bootstrap = source
    remote = f"{alias}.{topic}"
    records = read_all(bootstrap, topic, 1000)
    wait_for(lambda: by_partition(read_all(target, remote, 1000, timeout=5)) == by_partition(records),
             90, 0.5, f"{remote} as on {alias}", logs)  # type: ignore[arg-type]
    expected = {0: (remote, 120, 120), 1: (remote, 300, 300)}
    wait_for(lambda: checkpoints(target, alias, group) == expected, 60, 0.5, "translated checkpoints",
             logs)  # type: ignore[arg-type]


def _source_data(bootstrap: str) -> tuple[str, str]:
    topic, group = unique("orders"), unique("app")
    create(bootstrap, topic, 2)
    produce_keyed(bootstrap, topic, 1000, headers=False)
    commit(bootstrap, topic, group, {0: 120, 1: 300})
    return topic, group


@pytest.mark.parametrize("direction", ["A->B", "B->A"])
def test_connector_mode_between_sasl_ssl_and_plaintext(clusters: tuple[Secured, BrokerProcess], tmp_path: Path,
                                                       direction: str) -> None:
    """A->B: a worker on B (PLAINTEXT) reads A through ``source.cluster.*``; B->A: a worker on A, secured by its
    top-level keys, writes there and reaches A as the target through ``target.cluster.*``."""
    a, b = clusters
    into_a = direction == "B->A"
    plain_a, secured_a = ("A", a.proc.bootstrap), ("A", a.bootstrap("SASL_SSL"))
    source, target = (("B", b.bootstrap), secured_a) if into_a else (secured_a, ("B", b.bootstrap))
    topic, group = _source_data(plain_a[1] if not into_a else b.bootstrap)
    side = "target" if into_a else "source"
    tag = unique("mm-sec")
    worker_settings = {**fast_settings(tag), **(a.scram() if into_a else {})}
    with Cluster(tmp_path, target[1], tag, worker_settings) as workers:
        worker = workers.start(1)[0]
        for cls in (SOURCE, CHECKPOINT):
            name = unique(cls.rsplit(".", 1)[1])
            config = mirror_config(name, cls, source, target, topics=topic, groups=group)
            worker.ok("PUT", f"/connectors/{name}/config",
                      {**config, **{f"{side}.cluster.{k}": v for k, v in a.scram().items()}})
            workers.wait_running(name, 1 if cls == CHECKPOINT else 2, 60)
        _mirrored_with_checkpoints(plain_a if not into_a else source, a.proc.bootstrap if into_a else b.bootstrap,
                                   topic, group, workers.logs)


def test_dedicated_mode_with_a_secured_cluster(clusters: tuple[Secured, BrokerProcess], tmp_path: Path) -> None:
    a, b = clusters
    topic, group = _source_data(a.proc.bootstrap)
    props = tmp_path / "mm2.properties"
    settings = {"clusters": "A, B", "A.bootstrap.servers": a.bootstrap("SASL_SSL"),
                "B.bootstrap.servers": b.bootstrap, **{f"A.{k}": v for k, v in a.scram().items()},
                "A->B.enabled": "true", "A->B.topics": topic, "A->B.groups": group, **FAST}
    props.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
    with MirrorProcess(props, tmp_path / "mirror.log") as mirror:
        _mirrored_with_checkpoints(("A", a.proc.bootstrap), b.bootstrap, topic, group,
                                   lambda: mirror.log_text(True)[-5000:])
        # The heartbeats-only flow B->A is a worker on A: its stores live on A, reached over SASL_SSL only
        assert "mm2-configs.B.internal" in topics(a.proc.bootstrap)
    out = subprocess.run([sys.executable, "-m", "headwater", "mirror", "translate-offsets", "--config", str(props),
                          "--cluster", "B", "--source", "A", "--group", group, "--json"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f'"topic": "A.{topic}"' in out.stdout and '"offset": 300' in out.stdout
