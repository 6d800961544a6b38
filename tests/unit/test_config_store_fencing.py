"""The config store's KIP-618 bookkeeping, read from config-topic records as its reader hands them over:
task configs committed after the last ``tasks-fencing-<connector>`` record leave the connector pending
fencing (Kafka's KafkaConfigBackingStore), a task-count record clears it, and a malformed one is ignored."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from headwater.connect.storage.config_events import ConfigEvent, TaskConfigsCommitted, TaskCountRecorded
from headwater.connect.storage.kafka_stores import KafkaConfigStore


class Topic:
    """Records fed to the store at increasing offsets; the events it told of."""

    def __init__(self) -> None:
        self.events: list[ConfigEvent] = []
        self.store = KafkaConfigStore("127.0.0.1:9", "configs", "test", self.events.append)
        self.offset = 0

    def put(self, key: str, value: Any) -> None:
        self.store._on_record(key.encode(), None if value is None else json.dumps(value).encode(), 0, self.offset)
        self.offset += 1

    def tasks(self, name: str, count: int, tag: str = "a") -> None:
        for i in range(count):
            self.put(f"task-{name}-{i}", {"properties": {"tag": tag}})
        self.put(f"commit-{name}", {"tasks": count})


def test_commits_leave_a_connector_pending_until_its_task_count_is_recorded() -> None:
    topic = Topic()
    snap = topic.store.snapshot
    topic.tasks("src", 3)
    assert snap.pending_fencing == {"src"} and snap.task_generations == {"src": 0}
    assert "src" not in snap.task_count_records
    topic.put("tasks-fencing-src", {"task-count": 3})
    assert snap.pending_fencing == set() and snap.task_count_records == {"src": 3}
    assert topic.events[-2:] == [TaskConfigsCommitted("src"), TaskCountRecorded("src")]
    assert len(snap.tasks["src"]) == 3  # the record is not read as a task config ("task-" prefix)

    topic.tasks("src", 1, "b")
    assert snap.pending_fencing == {"src"} and snap.task_generations["src"] == 1
    assert snap.task_count_records == {"src": 3}  # the generation to fence
    # Stopped: zero task configs are a commit too (pending), but no new generation of configs.
    topic.tasks("src", 0)
    assert snap.pending_fencing == {"src"} and snap.task_generations["src"] == 1
    topic.put("tasks-fencing-src", {"task-count": 0})
    assert snap.pending_fencing == set() and snap.task_count_records == {"src": 0}


@pytest.mark.parametrize("value", [{"task-count": "2"}, {"task-count": -1}, {"task-count": True}, {}, [2], None])
def test_a_malformed_task_count_record_is_ignored_and_named(value: Any, caplog: pytest.LogCaptureFixture) -> None:
    topic = Topic()
    topic.tasks("src", 2)
    with caplog.at_level(logging.ERROR):
        topic.put("tasks-fencing-src", value)
    snap = topic.store.snapshot
    assert snap.pending_fencing == {"src"} and "src" not in snap.task_count_records
    assert "task count record of src" in caplog.text and "'task-count'" in caplog.text
    assert not any(isinstance(e, TaskCountRecorded) for e in topic.events)
