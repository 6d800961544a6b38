"""``GET /metrics`` on a worker's REST listener: Prometheus' text format, with Kafka Connect's JMX-exporter
names, figures that move with the traffic."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from connectproc import ConnectProcess, unique, wait_for

pytestmark = pytest.mark.timeout(120)


def scrape(up: ConnectProcess) -> tuple[str, dict[str, float]]:
    with urllib.request.urlopen(up.rest.rstrip("/") + "/metrics", timeout=10) as resp:
        kind = resp.headers["Content-Type"]
        text = resp.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return kind, samples


def test_worker_metrics_follow_a_file_pipeline(tmp_path: Path) -> None:
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("".join(f"line {i}\n" for i in range(100)))
    topic = unique("metrics-lines")
    with ConnectProcess(tmp_path / "up") as up:
        up.create("lines-in", {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic})
        up.create("lines-out", {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic})
        up.wait_state("lines-in", "RUNNING", tasks=1)
        up.wait_state("lines-out", "RUNNING", tasks=1)

        def written() -> float:
            return scrape(up)[1].get('kafka_connect_source_task_metrics_source_record_write_total'
                                     '{connector="lines-in",task="0"}', 0)
        wait_for(lambda: written() == 100, 30, 0.2, "100 records written")
        kind, samples = scrape(up)
        assert kind.startswith("text/plain") and "version=0.0.4" in kind
        assert samples["kafka_connect_connect_worker_metrics_connector_count"] == 2
        assert samples["kafka_connect_connect_worker_metrics_task_count"] == 2
        assert samples['kafka_connect_connector_metrics_status{connector="lines-in",status="running"}'] == 1
        assert samples['kafka_connect_connect_worker_metrics_connector_tasks{connector="lines-out",state="running"}'] \
            == 1
        wait_for(lambda: scrape(up)[1].get('kafka_connect_sink_task_metrics_sink_record_send_total'
                                          '{connector="lines-out",task="0"}') == 100, 30, 0.2, "100 records sent")
        with source_file.open("a") as f:
            f.write("".join(f"more {i}\n" for i in range(50)))
        wait_for(lambda: written() == 150, 30, 0.2, "the counter to move with the traffic")
        up.ok("PUT", "/connectors/lines-in/pause", expect=202)
        wait_for(lambda: scrape(up)[1].get('kafka_connect_connector_metrics_status{connector="lines-in",'
                                          'status="paused"}') == 1, 30, 0.2, "the paused state")
        assert not any(re.match(r'kafka_connect_connector_metrics_status\{connector="lines-in",status="running"',
                                name) for name in scrape(up)[1])
