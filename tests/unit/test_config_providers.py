"""Config providers (KIP-297, KIP-632, KIP-887) and the placeholder transformer: Kafka's pattern, allowed.paths
that ``..`` and links cannot escape, allowlist.pattern, errors that name the key and provider and never a value,
task configs given their placeholders back, the worker's own properties resolved at start, and the password rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, SecretStr

from headwater.connect.api.errors import ConfigException
from headwater.connect.api.secrets import is_secret_key, secret_keys
from headwater.connect.config import WorkerConfigError, load_worker_config
from headwater.connect.config_providers import (
    ConfigTransformer,
    DirectoryConfigProvider,
    EnvVarConfigProvider,
    FileConfigProvider,
    UnresolvedPlaceholders,
    build_providers,
    reverse_transform,
)
from headwater.connect.plugins import PluginRegistry

SECRET = "s3cr3t-Pa55"


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry([])


def secrets_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "db.properties").write_text(f"user=app\npassword={SECRET}\n")
    (folder / "db-password").write_text(SECRET + "\n")
    (folder / "sub").mkdir()
    return folder


def test_file_provider_reads_a_properties_file_within_allowed_paths(tmp_path: Path) -> None:
    folder = secrets_folder(tmp_path)
    provider = FileConfigProvider()
    provider.configure({"allowed.paths": str(folder)})
    assert provider.get(str(folder / "db.properties"), {"password"}).data == {"password": SECRET}
    assert provider.get(str(folder / "db.properties")).data == {"user": "app", "password": SECRET}
    (tmp_path / "outside.properties").write_text("password=x\n")
    for escape in (str(folder / ".." / "outside.properties"), str(tmp_path / "outside.properties")):
        with pytest.raises(ConfigException, match="is not in allowed.paths"):
            provider.get(escape, {"password"})
    os.symlink(tmp_path / "outside.properties", folder / "link.properties")
    with pytest.raises(ConfigException, match="is not in allowed.paths"):
        provider.get(str(folder / "link.properties"), {"password"})


def test_a_malformed_properties_file_is_refused_without_quoting_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text(f"{SECRET}\n")
    with pytest.raises(ConfigException) as info:
        FileConfigProvider().get(str(bad))
    assert SECRET not in str(info.value)


def test_allowed_paths_must_be_absolute_and_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigException, match="allowed.paths: path relative/dir is not absolute"):
        FileConfigProvider().configure({"allowed.paths": "relative/dir"})
    with pytest.raises(ConfigException, match="does not exist"):
        DirectoryConfigProvider().configure({"allowed.paths": str(tmp_path / "missing")})


def test_directory_provider_gives_file_contents_untrimmed(tmp_path: Path) -> None:
    folder = secrets_folder(tmp_path)
    provider = DirectoryConfigProvider()
    provider.configure({"allowed.paths": str(folder)})
    assert provider.get(str(folder), {"db-password"}).data == {"db-password": SECRET + "\n"}
    assert set(provider.get(str(folder)).data) == {"db.properties", "db-password"}  # regular files only
    assert provider.get(str(folder), {"sub", "missing"}).data == {}
    with pytest.raises(ConfigException, match="not a file name"):
        provider.get(str(folder), {"../db-password"})
    with pytest.raises(ConfigException, match="is not in allowed.paths"):
        provider.get(str(tmp_path), {"x"})


def test_env_provider_takes_no_path_and_only_allowlisted_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HW_DB_PASSWORD", SECRET)
    monkeypatch.setenv("HOME_SECRET", "other")
    provider = EnvVarConfigProvider()
    provider.configure({"allowlist.pattern": "HW_.*"})
    assert provider.get("", {"HW_DB_PASSWORD"}).data == {"HW_DB_PASSWORD": SECRET}
    assert "HOME_SECRET" not in provider.get("").data
    with pytest.raises(ConfigException, match="HOME_SECRET does not match allowlist.pattern HW_.*"):
        provider.get("", {"HOME_SECRET"})
    with pytest.raises(ConfigException, match="no path"):
        provider.get("/etc", {"HW_DB_PASSWORD"})
    with pytest.raises(ConfigException, match="allowlist.pattern: not a regular expression"):
        EnvVarConfigProvider().configure({"allowlist.pattern": "("})


def test_transformer_follows_kafkas_pattern(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = secrets_folder(tmp_path)
    monkeypatch.setenv("HW_USER", "app")
    transformer = ConfigTransformer({"file": FileConfigProvider(), "env": EnvVarConfigProvider()})
    props = {"database.password": f"${{file:{folder}/db.properties:password}}",
             "url": "postgres://${env:HW_USER}:${file:" + f"{folder}/db.properties:password" + "}@db/x",
             "table.name.format": "${topic}", "plain": "value"}
    resolved = transformer.transform(props, "connector c")
    assert resolved.config == {"database.password": SECRET, "url": f"postgres://app:{SECRET}@db/x",
                               "table.name.format": "${topic}", "plain": "value"}
    assert resolved.keys == {"database.password", "url"}
    # [measured in Kafka] the path ends at the first ':' after it: ${file:/a:b:key} reads key "b:key" of /a
    assert transformer.transform({"k": f"${{file:{folder}/db.properties:x:password}}"}, "c",
                                 strict=False).config == {"k": f"${{file:{folder}/db.properties:x:password}}"}


def test_unresolvable_placeholders_name_key_and_provider_never_a_value(tmp_path: Path) -> None:
    folder = secrets_folder(tmp_path)
    file = FileConfigProvider()
    file.configure({"allowed.paths": str(folder)})
    transformer = ConfigTransformer({"file": file})
    props = {"database.password": f"${{file:{folder}/db.properties:passwd}}",
             "connection.password": "${vault:secret/db:password}",
             "other.password": f"${{file:{tmp_path}/x.properties:password}}",
             "ok.password": f"${{file:{folder}/db.properties:password}}"}
    with pytest.raises(UnresolvedPlaceholders) as info:
        transformer.transform(props, "connector pg")
    message = str(info.value)
    assert message.startswith("Could not resolve the config provider placeholders of connector pg: ")
    assert f"database.password: config provider 'file' has no key 'passwd' at {folder}/db.properties" in message
    assert "connection.password: config provider 'vault' is not configured on this worker (config.providers=file)" \
        in message
    assert "other.password: config provider 'file' failed: path" in message and "allowed.paths" in message
    assert "ok.password" not in message and SECRET not in message
    assert info.value.field == "database.password"
    # Lenient (validation): left as written
    lenient = transformer.transform(props, "connector pg", strict=False).config
    assert lenient["database.password"] == props["database.password"] and lenient["ok.password"] == SECRET


def test_reverse_transform_puts_the_placeholders_back_into_task_configs() -> None:
    raw = {"database.password": "${file:/s/db.properties:password}", "database.user": "app",
           "url": "jdbc://h/${env:DB}"}
    tasks = [{"database.password": SECRET, "database.user": "app", "task.class": "x.T"}, {"url": "jdbc://h/prod"}]
    assert reverse_transform(raw, tasks) == [
        {"database.password": "${file:/s/db.properties:password}", "database.user": "app", "task.class": "x.T"},
        {"url": "jdbc://h/${env:DB}"}]


def test_worker_providers_are_built_by_kafka_class_name_and_named_when_wrong(
        registry: PluginRegistry, tmp_path: Path) -> None:
    folder = secrets_folder(tmp_path)
    providers = build_providers({
        "config.providers": "file, dir ,env",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(folder),
        "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
        "config.providers.env.class": "EnvVarConfigProvider"}, registry)
    assert {n: type(p) for n, p in providers.items()} == {
        "file": FileConfigProvider, "dir": DirectoryConfigProvider, "env": EnvVarConfigProvider}
    with pytest.raises(ConfigException, match=r"^config.providers.vault.class: no config provider class "
                                              r"com.example.VaultConfigProvider is installed$"):
        build_providers({"config.providers": "vault",
                         "config.providers.vault.class": "com.example.VaultConfigProvider"}, registry)
    with pytest.raises(ConfigException, match=r"^config.providers.file.class: missing"):
        build_providers({"config.providers": "file"}, registry)
    with pytest.raises(ConfigException, match=r"^config.providers.file.param.allowed.paths: allowed.paths: path "
                                              r"rel is not absolute"):
        build_providers({"config.providers": "file", "config.providers.file.class": "FileConfigProvider",
                         "config.providers.file.param.allowed.paths": "rel"}, registry)


def test_the_worker_properties_are_resolved_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = secrets_folder(tmp_path)
    monkeypatch.setenv("HW_JAAS_PASSWORD", SECRET)
    props = tmp_path / "worker.properties"
    props.write_text("config.providers=file,env\n"
                     "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
                     f"config.providers.file.param.allowed.paths={folder}\n"
                     "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
                     "group.id=${file:" + f"{folder}/db.properties:user" + "}\n"
                     "producer.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     'username="u" password="${env:HW_JAAS_PASSWORD}";\n'
                     "producer.security.protocol=SASL_PLAINTEXT\nproducer.sasl.mechanism=PLAIN\n")
    config = load_worker_config(str(props))
    assert config.group_id == "app"
    assert config.client("producer")["sasl.jaas.config"].endswith(f'password="{SECRET}";')
    with pytest.raises(WorkerConfigError, match="config.providers.env.class: no config provider class Nope"):
        load_worker_config(str(props), ["config.providers.env.class=Nope"])
    with pytest.raises(WorkerConfigError, match="group.id: config provider 'file' has no key 'missing'") as info:
        load_worker_config(str(props), ["group.id=${file:" + f"{folder}/db.properties:missing" + "}"])
    assert SECRET not in str(info.value)


class _Model(BaseModel):
    api_pin: SecretStr = Field(SecretStr(""), alias="api.pin")
    host: str = Field("", alias="host")


@pytest.mark.parametrize("key", ["database.password", "connection.password", "password", "ssl.key.password",
                                 "ssl.truststore.password", "ssl.keystore.key", "sasl.jaas.config",
                                 "producer.override.sasl.jaas.config", "database.sslpassword", "aws.secret",
                                 "sasl.oauthbearer.client.secret", "value.converter.basic.auth.user.info"])
def test_secret_key_names(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["database.user", "password.encoder.iterations", "ssl.keystore.location",
                                 "secret.path.enable", "host", "topic"])
def test_keys_that_are_not_secrets(key: str) -> None:
    assert not is_secret_key(key)


def test_a_secret_str_field_is_secret_whatever_its_name() -> None:
    assert secret_keys(["api.pin", "host", "database.password"], _Model) == {"api.pin", "database.password"}


def test_rest_answers_hide_secrets_but_show_a_lone_placeholder(registry: PluginRegistry) -> None:
    from headwater.connect.herder.errors import BadRequest
    from headwater.connect.rest.redact import keep_hidden, redact, redact_tasks

    stored = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.user": "app",
              "database.password": SECRET, "database.sslpassword": "${file:/run/secrets/pg.properties:key}",
              "producer.override.sasl.jaas.config": f'PlainLoginModule required password="{SECRET}";',
              "producer.override.ssl.key.password": "",
              "transforms.mask.api.secret": f"x-${{env:A}}-{SECRET}"}
    shown = redact(registry, stored)
    assert shown == {**stored, "database.password": "[hidden]", "producer.override.sasl.jaas.config": "[hidden]",
                     "transforms.mask.api.secret": "[hidden]"}
    tasks = redact_tasks(registry, stored, [{"id": {"connector": "c", "task": 0},
                                             "config": {"database.password": SECRET, "task.class": "x.T"}}])
    assert tasks[0]["config"] == {"database.password": "[hidden]", "task.class": "x.T"}
    # what an edit sends back: [hidden] keeps the stored value, anything else replaces it
    edited = {**shown, "database.user": "other"}
    assert keep_hidden(registry, "c", edited, stored) == {**stored, "database.user": "other"}
    assert keep_hidden(registry, "c", {**edited, "database.password": "new"}, stored)["database.password"] == "new"
    with pytest.raises(BadRequest, match=r"^database.password, producer.override.sasl.jaas.config, "
                                         r"transforms.mask.api.secret: \[hidden\] stands for the value stored for "
                                         r"connector c, which has none"):
        keep_hidden(registry, "c", edited, None)


def test_passwords_in_urls_are_hidden_and_an_unchanged_url_keeps_them(registry: PluginRegistry) -> None:
    from headwater.connect.herder.errors import BadRequest
    from headwater.connect.rest.redact import keep_hidden, redact

    url = f"jdbc:postgresql://db:5432/app?user=app&password={SECRET}&sslpassword={SECRET}&sslmode=require"
    stored = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "connection.url": url,
              "mirror.uri": f"postgres://app:{SECRET}@db/x"}
    shown = redact(registry, stored)
    assert shown["connection.url"] == ("jdbc:postgresql://db:5432/app?user=app&password=[hidden]&sslpassword=[hidden]"
                                       "&sslmode=require")
    assert shown["mirror.uri"] == "postgres://app:[hidden]@db/x"
    assert keep_hidden(registry, "c", shown, stored) == stored
    with pytest.raises(BadRequest, match=r"^connection.url: \[hidden\] stands for"):
        keep_hidden(registry, "c", {**shown, "connection.url": shown["connection.url"].replace("db:", "db2:")}, stored)
    new_url = url.replace("db:", "db2:")
    assert keep_hidden(registry, "c", {**shown, "connection.url": new_url}, stored)["connection.url"] == new_url
