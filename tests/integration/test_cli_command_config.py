"""``headwater topics|groups|produce|consume --command-config client.properties``: the client properties
Kafka's scripts take (security.protocol, sasl.*, ssl.*) used by the commands, and a file with a key the
client cannot honour refused naming the file and the key, before anything connects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import unique

pytestmark = pytest.mark.timeout(120)


def hw(*args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "headwater", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == expect, (args, done.returncode, done.stdout, done.stderr)
    return done


def test_plaintext_command_config(broker: BrokerProcess, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("# as kafka-topics.sh --command-config takes it\nsecurity.protocol=PLAINTEXT\n"
                      "client.id=ops\nrequest.timeout.ms=20000\n")
    b = ["--bootstrap-server", broker.bootstrap, "--command-config", str(config)]
    topic = unique("cc-topic")
    assert "Created topic" in hw("topics", "create", "--topic", topic, "--partitions", "2", *b).stdout
    assert {"topic": topic, "partitions": 2} in json.loads(hw("topics", "list", "--json", *b).stdout)
    [described] = json.loads(hw("topics", "describe", "--topic", topic, "--json", *b).stdout)
    assert len(described["partitions"]) == 2


@pytest.mark.parametrize(("text", "named"), [
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n", "sasl.jaas.config"),
    ("security.protocol=PLAINTEXT\nbatch.size=10\n", "batch.size"),
    ("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/etc/kafka/trust.jks\n",
     "ssl.truststore.type=JKS"),
    ("this line has no separator\n", "expected key=value"),
])
def test_bad_command_config_names_the_key(broker: BrokerProcess, tmp_path: Path, text: str, named: str) -> None:
    config = tmp_path / "client.properties"
    config.write_text(text)
    for command in (["topics", "list"], ["groups", "list"], ["consume", "--topic", "t"]):
        err = hw(*command, "--bootstrap-server", broker.bootstrap, "--command-config", str(config), expect=2).stderr
        assert f"--command-config {config}" in err and named in err, err


def test_missing_command_config(broker: BrokerProcess, tmp_path: Path) -> None:
    err = hw("topics", "list", "--bootstrap-server", broker.bootstrap, "--command-config",
             str(tmp_path / "nope.properties"), expect=2).stderr
    assert "nope.properties" in err
