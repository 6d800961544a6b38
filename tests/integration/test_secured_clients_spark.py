"""``format("headwater")`` reading a SASL_SSL/SCRAM-SHA-512 listener with Spark's Kafka source options
(``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.*``):
every record is read; a wrong password fails the read naming the broker and the reason; keys the source
cannot honour are refused naming the option."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.connectproc import unique
from support.mirrorkit import create, produce_keyed
from support.securedclients import Secured, secured_broker

import headwater.spark
from headwater.spark.options import OptionError, parse_options

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_broker(tmp_path_factory.mktemp("spark-secured")) as s:
        yield s


def kafka_options(s: Secured, password: str | None = None) -> dict[str, str]:
    """The listener and its security keys as Spark's Kafka source takes them: ``kafka.`` before Kafka's names."""
    scram = s.scram() if password is None else s.scram(password)
    return {"kafka.bootstrap.servers": s.bootstrap("SASL_SSL"), **{f"kafka.{k}": v for k, v in scram.items()}}


def read(spark: Any, options: dict[str, str]) -> Any:
    reader = spark.read.format("headwater")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_over_sasl_ssl_scram(spark: Any, secured: Secured) -> None:
    headwater.spark.register(spark)
    topic = unique("spark-secured")
    create(secured.proc.bootstrap, topic, 2)
    produce_keyed(secured.proc.bootstrap, topic, 300, headers=False)
    rows = read(spark, {**kafka_options(secured), "subscribe": topic}).select("partition", "offset", "value").collect()
    assert len(rows) == 300 and {r["partition"] for r in rows} == {0, 1}
    assert sorted(bytes(r["value"]).decode() for r in rows) == sorted(f"v{i}" * (1 + i % 4) for i in range(300))
    with pytest.raises(Exception) as info:  # Spark wraps the source's error in its own
        read(spark, {**kafka_options(secured, "wrong"), "subscribe": topic}).count()
    assert secured.bootstrap("SASL_SSL") in str(info.value) and "SCRAM-SHA-512" in str(info.value)
    assert "authentication" in str(info.value).lower()


@pytest.mark.parametrize(("option", "value", "named"), [
    ("kafka.sasl.mechanism", "GSSAPI", "kafka.sasl.mechanism=GSSAPI"),
    ("kafka.sasl.mechanism", "OAUTHBEARER", "kafka.sasl.mechanism=OAUTHBEARER"),
    ("kafka.ssl.truststore.type", "JKS", "kafka.ssl.truststore.type=JKS"),
    ("kafka.sasl.kerberos.service.name", "kafka", "kafka.sasl.kerberos.service.name"),
])
def test_what_the_source_cannot_honour_is_refused_by_option(secured: Secured, option: str, value: str,
                                                            named: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_options({**kafka_options(secured), "subscribe": "t", option: value})
    assert named in str(info.value)
