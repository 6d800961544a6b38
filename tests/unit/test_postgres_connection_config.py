"""The Postgres connectors' connection keys as libpq parameters: Debezium's database.* keys (TLS typed and
checked, other keys libpq's own or an error naming them), the JDBC URL's pgjdbc parameters, and the
passwords, which reach libpq and the task configs but no message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from headwater.connect.api.config import field_errors
from headwater.connect.rest.validate import validation_result
from headwater.connectors.postgres import PostgresConnector
from headwater.connectors.postgres.config import PostgresSourceConfig
from headwater.connectors.postgres.sink import PostgresSinkConfig

SECRET = "s3cret-value-7d1"
SOURCE = {"name": "pg", "connector.class": "PostgresConnector", "database.hostname": "db.example",
          "database.user": "u", "database.dbname": "d", "topic.prefix": "p", "database.password": SECRET}
SINK = {"name": "sink", "connector.class": "JdbcSinkConnector", "topics": "t"}


def errors(model: type[BaseModel], config: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(config)
    return field_errors(info.value, model)


@pytest.fixture
def pem_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.postgresql/root.crt for libpq to fall back on
    files = {"ca": "-----BEGIN CERTIFICATE-----\n", "cert": "-----BEGIN CERTIFICATE-----\n",
             "key": "-----BEGIN PRIVATE KEY-----\n", "encrypted": "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"}
    out = {}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        out[name] = str(tmp_path / name)
    (tmp_path / "der").write_bytes(b"\x30\x82\x04\xbe\x02\x01\x00")
    out["der"] = str(tmp_path / "der")
    return out


def test_debeziums_tls_keys_become_libpq_parameters(pem_files: dict[str, str]) -> None:
    config = PostgresSourceConfig.model_validate({
        **SOURCE, "database.sslmode": "verify-full", "database.sslrootcert": pem_files["ca"],
        "database.sslcert": pem_files["cert"], "database.sslkey": pem_files["encrypted"],
        "database.sslpassword": "keypass", "database.connect_timeout": "5", "database.tcpKeepAlive": "false"})
    assert config.libpq_params() == {
        "host": "db.example", "port": 5432, "user": "u", "dbname": "d", "application_name": "headwater-p",
        "keepalives": "0", "sslmode": "verify-full", "sslrootcert": pem_files["ca"], "sslcert": pem_files["cert"],
        "sslkey": pem_files["encrypted"], "sslpassword": "keypass", "password": SECRET, "connect_timeout": "5"}
    assert PostgresSourceConfig.model_validate(SOURCE).libpq_params()["sslmode"] == "prefer"  # Debezium's default


def test_an_unknown_database_key_is_an_error_naming_it(pem_files: dict[str, str]) -> None:
    assert errors(PostgresSourceConfig, {**SOURCE, "database.sslmod": "verify-full"}) == {"database.sslmod": [
        "Invalid configuration database.sslmod: is not a setting of this connector nor a libpq connection parameter "
        "(did you mean database.sslmode?)"]}
    assert "database.host" in errors(PostgresSourceConfig, {**SOURCE, "database.host": "other"})
    assert "database.replication" in errors(PostgresSourceConfig, {**SOURCE, "database.replication": "true"})
    factory = "org.postgresql.ssl.NonValidatingFactory"
    sslfactory = errors(PostgresSourceConfig, {**SOURCE, "database.sslfactory": factory})
    assert "database.sslmode=require" in sslfactory["database.sslfactory"][0]
    assert "database.sslmode" in errors(PostgresSourceConfig, {**SOURCE, "database.sslmode": "verify_full"})


@pytest.mark.parametrize(("tls", "key", "words"), [
    ({"database.sslmode": "verify-full"}, "database.sslmode", "against the CA file in database.sslrootcert"),
    ({"database.sslrootcert": "/no/such/ca.pem"}, "database.sslrootcert", "file /no/such/ca.pem does not exist"),
    ({"database.sslcert": "cert"}, "database.sslkey", "is needed with database.sslcert"),
    ({"database.sslkey": "key"}, "database.sslcert", "is needed with database.sslkey"),
    ({"database.sslcert": "cert", "database.sslkey": "der"}, "database.sslkey", "openssl pkey -inform DER"),
    ({"database.sslcert": "cert", "database.sslkey": "encrypted"}, "database.sslkey",
     "is encrypted: set database.sslpassword"),
])
def test_tls_settings_are_checked_naming_the_key(pem_files: dict[str, str], tls: dict[str, str], key: str,
                                                 words: str) -> None:
    tls = {k: pem_files.get(v, v) for k, v in tls.items()}
    found = errors(PostgresSourceConfig, {**SOURCE, **tls})
    assert list(found) == [key] and words in found[key][0], found


def test_the_jdbc_urls_parameters_become_libpq_parameters(pem_files: dict[str, str]) -> None:
    url = (f"jdbc:postgresql://db.example:6432/target?sslmode=verify-ca&sslrootcert={pem_files['ca']}"
           f"&sslcert={pem_files['cert']}&sslkey={pem_files['key']}&ApplicationName=copy&connectTimeout=7"
           f"&user=url_user&password=url_pw&keepalives_idle=30")
    config = PostgresSinkConfig.model_validate({**SINK, "connection.url": url})
    assert config.params() == {
        "host": "db.example", "port": 6432, "dbname": "target", "application_name": "copy", "connect_timeout": "7",
        "keepalives_idle": "30", "sslmode": "verify-ca", "sslrootcert": pem_files["ca"], "sslcert": pem_files["cert"],
        "sslkey": pem_files["key"], "user": "url_user", "password": "url_pw"}
    keys = PostgresSinkConfig.model_validate({**SINK, "connection.url": url, "connection.user": "key_user",
                                              "connection.password": SECRET}).params()
    assert (keys["user"], keys["password"]) == ("key_user", SECRET)  # connection.* keys over the URL's
    ssl_true = PostgresSinkConfig.model_validate(
        {**SINK, "connection.url": f"jdbc:postgresql://h/db?ssl=true&sslrootcert={pem_files['ca']}"}).params()
    assert ssl_true["sslmode"] == "verify-full"  # pgjdbc's ssl=true
    plain = PostgresSinkConfig.model_validate({**SINK, "connection.url": "jdbc:postgresql://h/db"}).params()
    assert plain["sslmode"] == "prefer"
    schema = PostgresSinkConfig.model_validate(
        {**SINK, "connection.url": "jdbc:postgresql://h/db?currentSchema=copy&options=-c%20work_mem%3D64MB"}).params()
    assert schema["options"] == "-c work_mem=64MB -c search_path=copy"


def test_an_unknown_or_bad_url_parameter_is_an_error_naming_it(pem_files: dict[str, str]) -> None:
    url = "jdbc:postgresql://h/db?sslmode=verify-full&sslrootcert=/no/ca.pem"
    assert errors(PostgresSinkConfig, {**SINK, "connection.url": url}) == {"connection.url": [
        "Invalid configuration connection.url: parameter sslrootcert file /no/ca.pem does not exist (or is not a "
        "file)"]}
    typo = errors(PostgresSinkConfig, {**SINK, "connection.url": "jdbc:postgresql://h/db?sslmdoe=require"})
    assert typo["connection.url"][0].endswith("parameter sslmdoe is not a setting of this connector nor a libpq "
                                              "connection parameter (did you mean sslmode?)")
    assert "parameter ssl is 'yes'" in errors(
        PostgresSinkConfig, {**SINK, "connection.url": "jdbc:postgresql://h/db?ssl=yes"})["connection.url"][0]


def test_passwords_reach_the_task_configs_but_no_message() -> None:
    config = PostgresSourceConfig.model_validate({**SOURCE, "database.sslpassword": "keypass"})
    assert config.originals()["database.password"] == SECRET  # what the tasks are given
    assert config.originals()["database.sslpassword"] == "keypass"
    assert SECRET not in repr(config) and SECRET not in str(config) and "keypass" not in repr(config)
    # an error about the whole config never quotes it; a bad password value is hidden
    found = errors(PostgresSourceConfig, {**SOURCE, "table.include.list": "a", "table.exclude.list": "b"})
    assert SECRET not in str(found)
    assert errors(PostgresSourceConfig, {**SOURCE, "database.password": 7}) == {"database.password": [
        "Invalid value [hidden] for configuration database.password: Input should be a valid string"]}
    bad_url = errors(PostgresSinkConfig, {**SINK, "connection.url": f"jdbc:mysql://h/db?user=u&password={SECRET}",
                                          "connection.password": SECRET})
    assert SECRET not in str(bad_url) and "password=[hidden]" in bad_url["connection.url"][0]
    # config/validate answers as Kafka does for a PASSWORD key
    result = validation_result(PostgresConnector, {**SOURCE, "database.sslpassword": "keypass"}, {})
    values = {c["definition"]["name"]: (c["definition"]["type"], c["value"]["value"]) for c in result["configs"]}
    assert values["database.password"] == values["database.sslpassword"] == ("PASSWORD", "[hidden]")
    assert SECRET not in str(result) and "keypass" not in str(result)
