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


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    from support.certs import CertificateAuthority

    base = tmp_path_factory.mktemp("cc-scram")
    ca = CertificateAuthority(base / "pki")
    server = ca.issue("broker", server=True, CN="localhost")
    with BrokerProcess(base / "data", "num.partitions=1", "authorizer.enabled=true", "super.users=User:ops",
                       "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                       "sasl.enabled.mechanisms=SCRAM-SHA-512",
                       "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
                       "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
                       'PlainLoginModule required user_ops="ops-secret";',
                       "ssl.keystore.type=PEM", f"ssl.keystore.location={server.pem}") as proc:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{proc.ports['SASL_PLAINTEXT']}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "ops", "sasl.password": "ops-secret"})
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "ops", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"ops-scram-secret")])["ops"].result(30)
        yield proc, ca.cert


SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="ops" password="{}";'


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_topics_over_scram_with_command_config(scram_broker: tuple[BrokerProcess, Path], tmp_path: Path,
                                               protocol: str) -> None:
    """The authorizer is on and only User:ops may create topics: the commands act as the user the file names."""
    proc, ca = scram_broker
    config = tmp_path / "client.properties"
    lines = [f"security.protocol={protocol}", "sasl.mechanism=SCRAM-SHA-512",
             "sasl.jaas.config=" + SCRAM_JAAS.format("ops-scram-secret")]
    if protocol == "SASL_SSL":
        lines += [f"ssl.truststore.location={ca}", "ssl.truststore.type=PEM"]
    config.write_text("\n".join(lines) + "\n")
    b = ["--bootstrap-server", f"127.0.0.1:{proc.ports[protocol]}", "--command-config", str(config)]
    topic = unique("cc-scram")
    assert "Created topic" in hw("topics", "create", "--topic", topic, *b).stdout
    assert topic in {t["topic"] for t in json.loads(hw("topics", "list", "--json", *b).stdout)}
    # ANONYMOUS on the PLAINTEXT listener may not: the authorizer really is on
    denied = hw("topics", "create", "--topic", unique("cc-anon"), "--bootstrap-server", proc.bootstrap, expect=1)
    assert "AUTHORIZATION" in denied.stderr.upper()
    # a wrong password in the file: the command fails with the broker's answer instead of hanging
    config.write_text(config.read_text().replace("ops-scram-secret", "wrong"))
    assert "SaslAuthenticationFailed" in hw("topics", "list", *b, expect=1).stderr
