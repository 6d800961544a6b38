"""``GET /metrics`` on a worker's REST listener: Prometheus' text format, with Kafka Connect's JMX-exporter
names, figures that move with the traffic."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.connectproc import ConnectProcess, scrape_metrics, unique, wait_for

pytestmark = pytest.mark.timeout(120)


def scrape(up: ConnectProcess) -> tuple[str, dict[str, float]]:
    return scrape_metrics(up.rest)


@pytest.mark.slow
def test_worker_metrics_follow_a_file_pipeline(tmp_path: Path) -> None:
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("".join(f"line {i}\n" for i in range(100)))
    topic = unique("metrics-lines")
    with ConnectProcess(tmp_path / "up") as up:
        up.create("lines-in", {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic})
        up.create("lines-out", {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic})
        # lines are not JSON: every record fails conversion and goes to the dead letter queue
        up.create("lines-dlq", {"connector.class": "FileStreamSink", "file": str(tmp_path / "never.txt"),
                                "topics": topic, "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                "value.converter.schemas.enable": "false", "errors.tolerance": "all",
                                "errors.deadletterqueue.topic.name": unique("metrics-dlq"),
                                "errors.deadletterqueue.topic.replication.factor": "1"})
        for name in ("lines-in", "lines-out", "lines-dlq"):
            up.wait_state(name, "RUNNING", tasks=1)

        def written() -> float:
            return scrape(up)[1].get('kafka_connect_source_task_metrics_source_record_write_total'
                                     '{connector="lines-in",task="0"}', 0)
        wait_for(lambda: written() == 100, 30, 0.2, "100 records written")
        kind, samples = scrape(up)
        assert kind.startswith("text/plain") and "version=0.0.4" in kind
        assert samples["kafka_connect_connect_worker_metrics_connector_count"] == 3
        assert samples["kafka_connect_connect_worker_metrics_task_count"] == 3
        assert samples['kafka_connect_connector_metrics_status{connector="lines-in",status="running"}'] == 1
        assert samples['kafka_connect_connect_worker_metrics_connector_tasks{connector="lines-out",state="running"}'] \
            == 1
        wait_for(lambda: scrape(up)[1].get('kafka_connect_sink_task_metrics_sink_record_send_total'
                                          '{connector="lines-out",task="0"}') == 100, 30, 0.2, "100 records sent")
        lines_in, lines_out = '{connector="lines-in",task="0"}', '{connector="lines-out",task="0"}'
        samples = scrape(up)[1]
        assert samples["kafka_connect_source_task_metrics_source_record_poll_total" + lines_in] == 100
        assert samples["kafka_connect_sink_task_metrics_sink_record_read_total" + lines_out] == 100
        lag = ('kafka_consumer_consumer_fetch_manager_metrics_records_lag{client_id="connector-consumer-lines-out-0",'
               f'connector="lines-out",partition="0",task="0",topic="{topic}"}}')  # labels come sorted
        assert samples[lag] == 0, "the sink delivered every record: no lag"
        wait_for(lambda: scrape(up)[1].get('kafka_connect_task_error_metrics_deadletterqueue_produce_requests_total'
                                          '{connector="lines-dlq",task="0"}') == 100, 30, 0.2,
                 "100 records in the dead letter queue")
        # offsets are committed every offset.flush.interval.ms: each commit that wrote offsets is timed
        commits = "kafka_connect_connector_task_metrics_offset_commit_completion_total"
        wait_for(lambda: scrape(up)[1].get(commits + lines_in, 0) >= 1
                 and scrape(up)[1].get(commits + lines_out, 0) >= 1, 30, 0.2, "an offset commit by each task")
        samples = scrape(up)[1]
        assert 0 < samples["kafka_connect_connector_task_metrics_offset_commit_max_time_ms" + lines_in] < 10_000
        assert 0 < samples["kafka_connect_connector_task_metrics_offset_commit_avg_time_ms" + lines_out] < 10_000
        assert samples["kafka_connect_connect_worker_rebalance_metrics_completed_rebalances_total"] >= 1
        assert samples["kafka_connect_connect_worker_rebalance_metrics_rebalancing"] == 0
        assert samples["kafka_connect_connect_worker_rebalance_metrics_epoch"] >= 1
        assert samples["kafka_connect_connect_worker_rebalance_metrics_time_since_last_rebalance_ms"] >= 0
        # the same figures under Kafka's names in the task's REST metrics
        runtime = up.ok("GET", "/connectors/lines-out/tasks/0/metrics")["runtime"]
        assert runtime["sink-record-read-total"] == 100 and runtime["offset-commit-completion-total"] >= 1
        assert runtime["consumer-lag"] == [{"topic": topic, "partition": 0, "offset": 100, "end-offset": 100,
                                            "lag": 0}]
        with source_file.open("a") as f:
            f.write("".join(f"more {i}\n" for i in range(50)))
        wait_for(lambda: written() == 150, 30, 0.2, "the counter to move with the traffic")
        # /admin/loggers applies a level live: the commits' DEBUG lines appear, with the task in context
        logger = "headwater.connect.runtime.worker_task"
        debug_line = (r"DEBUG \[lines-in\|task-0\] headwater\.connect\.runtime\.worker_task: task lines-in-0 "
                      r"committed offsets in [0-9.]+ ms")
        assert not re.search(debug_line, up.log_text())
        up.ok("PUT", f"/admin/loggers/{logger}", {"level": "DEBUG"}, expect=200)
        with source_file.open("a") as f:
            f.write("one more\n")
        wait_for(lambda: re.search(debug_line, up.log_text()), 30, 0.2, "a DEBUG line once the level is DEBUG",
                 up.log_text)
        up.ok("PUT", f"/admin/loggers/{logger}", {"level": "INFO"}, expect=200)
        up.ok("PUT", "/connectors/lines-in/pause", expect=202)
        wait_for(lambda: scrape(up)[1].get('kafka_connect_connector_metrics_status{connector="lines-in",'
                                          'status="paused"}') == 1, 30, 0.2, "the paused state")
        assert not any(re.match(r'kafka_connect_connector_metrics_status\{connector="lines-in",status="running"',
                                name) for name in scrape(up)[1])
