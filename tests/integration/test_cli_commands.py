"""The operator's commands (``headwater topics|groups|produce|consume|connectors``) as subprocesses
against ``headwater up``: tables for people, JSON for scripts, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.connectproc import ConnectProcess, unique, wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory):
    with ConnectProcess(tmp_path_factory.mktemp("cli-up")) as proc:
        yield proc


def hw(*args: str, stdin: str | None = None, expect: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "headwater", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == expect, (args, done.returncode, done.stdout, done.stderr)
    return done


def js(*args: str, stdin: str | None = None) -> Any:
    return json.loads(hw(*args, "--json", stdin=stdin).stdout)


def test_topics_create_describe_alter_delete(up: ConnectProcess) -> None:
    b = ["--bootstrap-server", up.bootstrap]
    topic = unique("cli-topic")
    assert "Created topic" in hw("topics", "create", "--topic", topic, "--partitions", "3", "--config",
                                 "retention.ms=3600000", *b).stdout
    assert "already exists" in hw("topics", "create", "--topic", topic, *b, expect=1).stderr
    assert {"topic": topic, "partitions": 3} in js("topics", "list", *b)
    table = hw("topics", "list", *b).stdout.splitlines()
    assert table[0].split() == ["TOPIC", "PARTITIONS"] and any(line.split() == [topic, "3"] for line in table)
    hw("topics", "alter", "--topic", topic, "--partitions", "5", "--config", "cleanup.policy=compact", *b)
    [described] = js("topics", "describe", "--topic", topic, *b)
    assert len(described["partitions"]) == 5
    assert described["configs"] == {"retention.ms": "3600000", "cleanup.policy": "compact"}
    hw("topics", "alter", "--topic", topic, "--delete-config", "retention.ms", *b)
    assert js("topics", "describe", "--topic", topic, *b)[0]["configs"] == {"cleanup.policy": "compact"}
    assert "no topic" in hw("topics", "describe", "--topic", "nope-" + topic, *b, expect=2).stderr
    assert "expected KEY=VALUE" in hw("topics", "create", "--topic", "x", "--config", "oops", *b, expect=2).stderr
    hw("topics", "delete", "--topic", topic, *b)
    wait_for(lambda: topic not in {t["topic"] for t in js("topics", "list", *b)}, 30, 0.2, "the topic deleted")


def test_produce_consume_groups_and_reset(up: ConnectProcess) -> None:
    b = ["--bootstrap-server", up.bootstrap]
    topic, group = unique("cli-records"), unique("cli-group")
    hw("topics", "create", "--topic", topic, "--partitions", "2", *b)
    lines = "".join(f"k{i % 4}:value {i}\n" for i in range(40))
    assert "40 records sent" in hw("produce", "--topic", topic, "-K", ":", "-H", "source=cli", *b, stdin=lines).stderr
    out = hw("consume", "--topic", topic, "--from-beginning", "-e", "--json", *b).stdout.splitlines()
    records = [json.loads(line) for line in out]
    assert sorted(r["value"] for r in records) == sorted(f"value {i}" for i in range(40))
    assert all(r["headers"] == [["source", "cli"]] and r["key"] == f"k{int(r['value'].split()[1]) % 4}"
               for r in records)
    keyed = hw("consume", "--topic", topic, "--from-beginning", "-e", "-K", "=", *b).stdout.splitlines()
    assert "k1=value 1" in keyed and len(keyed) == 40
    # a group reads 10 and commits; describe shows its lag
    assert len(hw("consume", "--topic", topic, "--group", group, "--from-beginning", "-c", "10", "-p", "0",
                  *b).stdout.splitlines()) == 10
    described = js("groups", "describe", "--group", group, *b)
    offsets = {o["partition"]: o for o in described["offsets"]}
    assert offsets[0]["current_offset"] == 10 and offsets[0]["lag"] == offsets[0]["log_end_offset"] - 10
    assert any(g["group"] == group for g in js("groups", "list", *b))
    # reset: a dry run changes nothing, --execute commits
    dry = js("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", *b)
    assert {r["partition"]: r["new_offset"] for r in dry} == {0: 0, 1: 0}
    assert {o["partition"]: o["current_offset"] for o in js("groups", "describe", "--group", group, *b)["offsets"]} \
        == {0: 10}
    done = hw("groups", "reset-offsets", "--group", group, "--topic", f"{topic}:0", "--shift-by", "-4", "--execute",
              *b)
    assert "resetting" in done.stderr and "PREVIOUS-OFFSET" in done.stdout
    assert js("groups", "describe", "--group", group, *b)["offsets"][0]["current_offset"] == 6
    assert "does not exist" in hw("groups", "describe", "--group", "nobody-" + group, *b, expect=1).stderr


def test_connectors_over_the_rest_api(up: ConnectProcess, tmp_path: Path) -> None:
    url = ["--url", up.rest]
    name = unique("cli-file")
    source = tmp_path / "in.txt"
    source.write_text("a\nb\nc\n")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"name": name, "config": {"connector.class": "FileStreamSource", "file": str(source),
                                                            "topic": unique("cli-file-topic")}}))
    assert "created" in hw("connectors", "create", "-f", str(config), *url).stdout
    assert "409" in hw("connectors", "create", "-f", str(config), *url, expect=1).stderr
    wait_for(lambda: any(c["name"] == name and c["state"] == "RUNNING" for c in js("connectors", "list", *url)),
             20, 0.2, "RUNNING in the list")
    status = hw("connectors", "status", name, *url).stdout
    assert f"{name} (source): RUNNING" in status and "task 0: RUNNING" in status
    hw("connectors", "pause", name, *url)
    wait_for(lambda: js("connectors", "status", name, *url)["connector"]["state"] == "PAUSED", 20, 0.2, "PAUSED")
    hw("connectors", "resume", name, *url)
    wait_for(lambda: js("connectors", "status", name, *url)["connector"]["state"] == "RUNNING", 20, 0.2, "RUNNING")
    hw("connectors", "restart", name, "--include-tasks", *url)
    hw("connectors", "delete", name, *url)
    assert "404" in hw("connectors", "status", name, *url, expect=1).stderr
    assert "cannot reach" in hw("connectors", "list", "--url", "http://127.0.0.1:1", expect=1).stderr
