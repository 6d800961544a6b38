"""The built-in sources' answers to KIP-618's preflight: MirrorSourceConnector (MM2's rule: only with a
read_committed source consumer), FileStreamSource (a file, not standard input) and the spool-dir sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.connect.api import ExactlyOnceSupport
from headwater.connect.runtime.exactly_once import UNSUPPORTED, exactly_once_problems
from headwater.connectors.file.source import FileStreamSourceConnector
from headwater.connectors.file.spooldir import SPOOLDIR_CONNECTORS
from headwater.connectors.mirror.source import NOT_READ_COMMITTED, MirrorSourceConnector

REQUIRED = {"exactly.once.support": "required"}


def mirror(**extra: str) -> dict[str, str]:
    return {"name": "m", "connector.class": "MirrorSourceConnector", "source.cluster.alias": "A",
            "target.cluster.alias": "B", "source.cluster.bootstrap.servers": "127.0.0.1:1",
            "target.cluster.bootstrap.servers": "127.0.0.1:2", **REQUIRED, **extra}


@pytest.mark.parametrize("key", ["source.cluster.isolation.level", "source.cluster.consumer.isolation.level",
                                 "consumer.isolation.level", "source.consumer.isolation.level"])
def test_mirror_supports_exactly_once_with_a_read_committed_source_consumer(key: str) -> None:
    props = mirror(**{key: "READ_COMMITTED"})
    assert MirrorSourceConnector().exactly_once_support(props) is ExactlyOnceSupport.SUPPORTED
    assert exactly_once_problems(MirrorSourceConnector, props, worker_enabled=True) == []
    assert MirrorSourceConnector.validate(props) == {}


def test_mirror_refuses_required_when_its_source_consumer_reads_uncommitted() -> None:
    # the later layer wins, as MM2's sourceConsumerConfig: source.consumer.* over consumer.* over the cluster's
    for props in (mirror(), mirror(**{"source.cluster.consumer.isolation.level": "read_committed",
                                      "source.consumer.isolation.level": "read_uncommitted"})):
        assert MirrorSourceConnector().exactly_once_support(props) is ExactlyOnceSupport.UNSUPPORTED
        assert exactly_once_problems(MirrorSourceConnector, props, worker_enabled=True) == [UNSUPPORTED]
        assert MirrorSourceConnector.validate(props) == {"exactly.once.support": [NOT_READ_COMMITTED]}
    requested = mirror(**{"exactly.once.support": "requested"})
    assert MirrorSourceConnector.validate(requested) == {}  # requested: nothing is checked


def test_file_source_supports_exactly_once_for_a_file_not_stdin(tmp_path: Path) -> None:
    base = {"name": "f", "connector.class": "FileStreamSource", "topic": "t", **REQUIRED}
    with_file = {**base, "file": str(tmp_path / "in.txt")}
    assert FileStreamSourceConnector().exactly_once_support(with_file) is ExactlyOnceSupport.SUPPORTED
    assert exactly_once_problems(FileStreamSourceConnector, with_file, worker_enabled=True) == []
    assert FileStreamSourceConnector().exactly_once_support(base) is ExactlyOnceSupport.UNSUPPORTED
    assert exactly_once_problems(FileStreamSourceConnector, base, worker_enabled=True) == [UNSUPPORTED]


def test_spooldir_sources_support_exactly_once() -> None:
    for cls in SPOOLDIR_CONNECTORS:
        assert cls().exactly_once_support({}) is ExactlyOnceSupport.SUPPORTED, cls
        assert exactly_once_problems(cls, REQUIRED, worker_enabled=True) == []
