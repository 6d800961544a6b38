"""Secrets through config providers (KIP-297, KIP-632, KIP-887) on a real distributed worker, a real broker and a
PostgreSQL that checks passwords (scram-sha-256): a password from each provider (file, directory, environment)
lets a Postgres CDC source connect and snapshot, while no REST answer, no record of the config topic (read with a
Kafka client) and no line of the worker's log holds it. A password written in clear is answered as [hidden], and
an edit that sends [hidden] back keeps it (the connector reconnects). Refusals name the key, the provider and the
rule (allowed.paths, allowlist.pattern, a missing key); the admin API serves no record of the internal topics."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import TopicReader, unique, wait_for
from support.pgpassword import PASSWORD_USER, PasswordPostgres, start_password_postgres, walsenders
from support.workerproc import BROKER_OVERRIDES, Cluster, WorkerProcess, read_topic

pytestmark = pytest.mark.timeout(240)

PASSWORD = "pw-" + uuid.uuid4().hex  # the database role's: must reach Postgres and nothing else
ENV_NAME = "HW_TEST_PG_PASSWORD"
LEASE_MS = 2000
# A third-party provider on plugin.path (as a Vault one would be): a file's content, leased for LEASE_MS; each
# get() is counted in the file named by its count.file parameter.
LEASED_PROVIDER = """
from headwater.connect.api.config_provider import ConfigData, ConfigProvider
from headwater.connect.api.hookspecs import hookimpl


class LeasedConfigProvider(ConfigProvider):
    def configure(self, configs):
        self.count_file, self.ttl_ms = configs["count.file"], int(configs["ttl.ms"])

    def get(self, path, keys=None):
        with open(self.count_file, "a") as f:
            f.write(path + "\\n")
        with open(path) as f:
            return ConfigData({"value": f.read()}, self.ttl_ms)


@hookimpl
def headwater_config_providers():
    return [LeasedConfigProvider]
"""


@dataclass
class World:
    pg: PasswordPostgres
    worker: WorkerProcess
    cluster: Cluster
    secrets: Path  # allowed.paths of the file and directory providers
    outside: Path  # a folder outside them, holding the same password
    leases: Path  # one line per get() of the leased provider

    @property
    def configs_topic(self) -> str:
        return self.cluster.tag + "-configs"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of the module's own that allows the workers' short sessions (``fast_settings``)."""
    with BrokerProcess(tmp_path_factory.mktemp("secrets-broker") / "data", *BROKER_OVERRIDES,
                       "num.partitions=1") as proc:
        yield proc


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, broker: BrokerProcess) -> Iterator[World]:
    base = tmp_path_factory.mktemp("secrets")
    secrets, outside = base / "secrets", base / "outside"
    (secrets / "pg").mkdir(parents=True)
    outside.mkdir()
    (secrets / "db.properties").write_text(f"user={PASSWORD_USER}\npassword={PASSWORD}\n")
    (secrets / "pg" / "password").write_text(PASSWORD)  # as `printf %s ... > file`: no newline
    (outside / "db.properties").write_text(f"password={PASSWORD}\n")
    plugins, leases = base / "plugins", base / "leases.txt"
    plugins.mkdir()
    (plugins / "leased_provider.py").write_text(LEASED_PROVIDER)
    pg = start_password_postgres(PASSWORD)
    try:
        providers = {
            "config.providers": "file,dir,env,lease",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "config.providers.file.param.allowed.paths": str(secrets),
            "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
            "config.providers.dir.param.allowed.paths": str(secrets),
            "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
            "config.providers.env.param.allowlist.pattern": "HW_TEST_.*",
            "config.providers.lease.class": "LeasedConfigProvider",
            "config.providers.lease.param.count.file": str(leases),
            "config.providers.lease.param.ttl.ms": str(LEASE_MS),
            "plugin.path": str(plugins),
        }
        with pytest.MonkeyPatch.context() as env, Cluster(base, broker.bootstrap) as cluster:
            env.setenv(ENV_NAME, PASSWORD)
            env.setenv("HW_OTHER_PASSWORD", PASSWORD)  # in the environment, but not allowlisted
            assert cluster.settings is not None
            cluster.settings.update(providers)
            (worker,) = cluster.start(1)
            yield World(pg, worker, cluster, secrets, outside, leases)
    finally:
        pg.stop()


def source(world: World, prefix: str, password: str, **extra: str) -> dict[str, str]:
    return world.pg.cdc_source(prefix, password, **extra)


def placeholders(world: World) -> dict[str, str]:
    return {"file": f"${{file:{world.secrets}/db.properties:password}}",
            "dir": f"${{dir:{world.secrets}/pg:password}}",
            "env": f"${{env:{ENV_NAME}}}"}


def snapshot_arrives(world: World, prefix: str, ids: int = 1) -> list[Any]:
    """The snapshot's rows on the connector's topic: it connected to Postgres with the password."""
    with TopicReader(world.worker.bootstrap, f"{prefix}.public.items") as reader:
        msgs = reader.read(ids, 60)
    assert len(msgs) >= ids, (f"{len(msgs)} records on {prefix}.public.items", world.worker.log_text()[-3000:])
    return [json.loads(m.value) for m in msgs if m.value]


def rest_answers(worker: WorkerProcess, name: str, config: dict[str, str]) -> dict[str, str]:
    """Every REST answer that carries the connector's config, as text."""
    cls = config["connector.class"]
    answers = {path: worker.call("GET", path).body.decode()
               for path in (f"/connectors/{name}", f"/connectors/{name}/config", f"/connectors/{name}/tasks",
                            f"/connectors/{name}/tasks-config", "/connectors?expand=info&expand=status")}
    answers["validate"] = worker.call("PUT", f"/connector-plugins/{cls}/config/validate", config).body.decode()
    return answers


def wait_running(world: World, name: str) -> None:
    world.cluster.wait_running(name, 1, timeout=60)


def test_a_password_from_each_provider_reaches_postgres_and_nowhere_else(world: World) -> None:
    worker = world.worker
    names = {}
    for provider, placeholder in placeholders(world).items():
        name, prefix = unique(f"sec-{provider}"), unique(f"sec{provider}")
        worker.ok("POST", "/connectors", {"name": name, "config": source(world, prefix, placeholder)})
        names[provider] = (name, prefix)
    for provider, (name, prefix) in names.items():
        wait_running(world, name)
        rows = snapshot_arrives(world, prefix)
        assert rows[0]["after"] == {"id": 1, "name": "one"}, provider

    for provider, (name, _) in names.items():
        config = worker.ok("GET", f"/connectors/{name}/config")
        assert config["database.password"] == placeholders(world)[provider]  # a placeholder is shown as written
        for path, body in rest_answers(world.worker, name, config).items():
            assert PASSWORD not in body, f"{path} of {name}"
        tasks = worker.ok("GET", f"/connectors/{name}/tasks")
        assert tasks[0]["config"]["database.password"] == placeholders(world)[provider]  # reverse-transformed
        assert worker.call("GET", f"/admin/topics/{world.configs_topic}/records").status == 403

    # The config topic, read with a Kafka client: the connector, task and commit records hold placeholders
    records = read_topic(world.worker.bootstrap, world.configs_topic)
    ours = [(k or b"").decode() + " " + (v or b"").decode() for _, _, k, v in records
            if k and any(name.encode() in k for name, _ in names.values())]
    assert any(r.startswith("task-") and "${file:" in r for r in ours), ours
    assert all(PASSWORD not in r for r in ours)
    assert PASSWORD not in world.worker.log_text()


def test_a_password_in_clear_is_hidden_and_kept_by_an_edit_that_sends_hidden(world: World) -> None:
    worker = world.worker
    name, prefix = unique("sec-clear"), unique("secclear")
    config = source(world, prefix, PASSWORD)
    worker.ok("POST", "/connectors", {"name": name, "config": config})
    wait_running(world, name)
    snapshot_arrives(world, prefix)
    shown = worker.ok("GET", f"/connectors/{name}/config")
    assert shown["database.password"] == "[hidden]"
    for path, body in rest_answers(worker, name, shown).items():
        assert PASSWORD not in body, path
    validated = worker.ok("PUT", "/connector-plugins/PostgresConnector/config/validate", config)
    [password] = [c["value"] for c in validated["configs"] if c["value"]["name"] == "database.password"]
    assert password["value"] == "[hidden]"

    # An edit round-trips [hidden] (as the console's form does): the stored password is kept, and used
    before = wait_for(lambda: walsenders(world.pg.server, prefix), 30, 0.2, "the source's replication connection")
    edited = {**shown, "errors.log.enable": "true"}
    answer = worker.ok("PUT", f"/connectors/{name}/config", edited)
    assert answer["config"]["database.password"] == "[hidden]" and answer["config"]["errors.log.enable"] == "true"
    patched = worker.ok("PATCH", f"/connectors/{name}/config", {"database.password": "[hidden]",
                                                                 "errors.log.include.messages": "true"})
    assert patched["config"]["database.password"] == "[hidden]"

    def stored() -> dict[str, Any] | None:
        for _, _, key, value in reversed(read_topic(worker.bootstrap, world.configs_topic)):
            if key == f"connector-{name}".encode() and value:
                props = json.loads(value)["properties"]
                return props if props.get("errors.log.include.messages") == "true" else None
        return None

    assert wait_for(stored, 30, 0.2, "the patched config in the config topic")["database.password"] == PASSWORD
    wait_for(lambda: worker.ok("GET", f"/connectors/{name}/tasks")[0]["config"].get("errors.log.include.messages")
             == "true", 30, 0.2, "the task configs made from the patched config")
    # a new replication connection, authenticated with the kept password (scram-sha-256 checks it)
    wait_for(lambda: walsenders(world.pg.server, prefix) - before, 60, 0.2,
             "the restarted task's replication connection", worker.log_text)
    wait_running(world, name)
    with psycopg.connect(world.pg.server.dsn(world.pg.database), autocommit=True) as db:
        db.execute("INSERT INTO items VALUES (2, 'after the edit') ON CONFLICT DO NOTHING")
    rows = snapshot_arrives(world, prefix, 2)
    assert any((r.get("after") or {}).get("id") == 2 for r in rows), rows
    assert (worker.status(name) or {}).get("tasks", [{}])[0].get("state") == "RUNNING"

    # [hidden] for a connector that stores nothing is refused, naming the key
    refused = worker.call("PUT", f"/connectors/{unique('sec-new')}/config", source(world, unique("x"), "[hidden]"))
    assert refused.status == 400 and "database.password: [hidden] stands for the value stored" in refused.body.decode()
    assert PASSWORD not in worker.log_text()


def failed_connector_trace(world: World, name: str) -> str:
    def check() -> str | None:
        status = world.cluster.status(name)
        conn = (status or {}).get("connector") or {}
        return conn.get("trace") if conn.get("state") == "FAILED" else None

    return wait_for(check, 60, 0.2, f"{name} FAILED", world.worker.log_text)


@pytest.mark.parametrize("case", ["outside allowed.paths", "a dot-dot escape", "not allowlisted", "a missing key",
                                  "an unknown provider"])
def test_refusals_fail_the_connector_naming_key_provider_and_rule(world: World, case: str) -> None:
    placeholder, expected = {
        "outside allowed.paths": (f"${{file:{world.outside}/db.properties:password}}",
                                  f"database.password: config provider 'file' failed: path {world.outside}/"
                                  f"db.properties is not in allowed.paths"),
        "a dot-dot escape": (f"${{dir:{world.secrets}/../outside:db.properties}}",
                             "database.password: config provider 'dir' failed: path "),
        "not allowlisted": ("${env:HW_OTHER_PASSWORD}",
                            "database.password: config provider 'env' failed: environment variable "
                            "HW_OTHER_PASSWORD does not match allowlist.pattern HW_TEST_.*"),
        "a missing key": (f"${{dir:{world.secrets}/pg:passwd}}",
                          f"database.password: config provider 'dir' has no key 'passwd' at {world.secrets}/pg"),
        "an unknown provider": ("${vault:secret/pg:password}",
                                "database.password: config provider 'vault' is not configured on this worker "
                                "(config.providers=file,dir,env,lease)"),
    }[case]
    name = unique("sec-refused")
    world.worker.ok("POST", "/connectors", {"name": name, "config": source(world, unique("x"), placeholder)})
    trace = failed_connector_trace(world, name)
    assert f"Could not resolve the config provider placeholders of connector {name}: " in trace
    assert expected in trace, trace
    assert PASSWORD not in trace and PASSWORD not in world.worker.log_text()
    world.worker.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_task_whose_secret_is_gone_fails_naming_key_and_provider(world: World) -> None:
    """Each start resolves anew, on the worker that starts the task: a secret removed since fails the restart."""
    rotating = world.secrets / "rotating"
    rotating.mkdir()
    (rotating / "password").write_text(PASSWORD)
    name, prefix = unique("sec-gone"), unique("secgone")
    world.worker.ok("POST", "/connectors", {"name": name, "config": source(
        world, prefix, f"${{dir:{rotating}:password}}")})
    wait_running(world, name)
    snapshot_arrives(world, prefix)
    os.remove(rotating / "password")
    world.worker.ok("POST", f"/connectors/{name}/tasks/0/restart", expect=204)

    def failed() -> str | None:
        task = ((world.cluster.status(name) or {}).get("tasks") or [{}])[0]
        return task.get("trace") if task.get("state") == "FAILED" else None

    trace = wait_for(failed, 60, 0.2, f"{name}'s task FAILED", world.worker.log_text)
    assert (f"Could not resolve the config provider placeholders of task {name}-0: database.password: config "
            f"provider 'dir' has no key 'password' at {rotating}") in trace
    assert PASSWORD not in trace


def test_leased_values_restart_the_connector_and_its_task_when_they_expire(world: World) -> None:
    """ConfigData.ttl_ms: the connector and its task restart after it (config.action.reload=restart, Kafka's
    default) and read the provider anew; a third-party provider from plugin.path does it."""
    name, prefix = unique("sec-lease"), unique("seclease")
    world.worker.ok("POST", "/connectors", {"name": name, "config": source(
        world, prefix, f"${{lease:{world.secrets}/pg/password:value}}")})
    wait_running(world, name)
    snapshot_arrives(world, prefix)
    first = wait_for(lambda: walsenders(world.pg.server, prefix), 30, 0.2, "the source's replication connection")
    gets = len(world.leases.read_text().splitlines())
    # after the lease: a new replication connection, with the password read again
    wait_for(lambda: walsenders(world.pg.server, prefix) - first, 30, 0.2, "a reconnection after the lease",
             world.worker.log_text)
    assert len(world.leases.read_text().splitlines()) > gets
    assert f"values the config providers gave {name} expired; restarting it" in world.worker.log_text()
    world.worker.ok("DELETE", f"/connectors/{name}", expect=204)
    assert PASSWORD not in world.worker.log_text()


def test_an_unknown_provider_class_stops_the_worker_at_start_naming_the_key(broker: BrokerProcess,
                                                                           tmp_path: Path) -> None:
    worker = WorkerProcess(broker.bootstrap, {"config.providers": "file,vault",
                                              "config.providers.file.class": "FileConfigProvider",
                                              "config.providers.vault.class": "com.example.VaultConfigProvider"},
                           tmp_path / "worker.log")
    worker.launch()
    assert worker.proc is not None and worker.proc.wait(60) == 2
    assert ("headwater connect distributed: invalid worker configuration: config.providers.vault.class: no config "
            "provider class com.example.VaultConfigProvider is installed") in worker.log_text()


def test_a_connector_on_a_follower_resolves_there_and_hands_placeholders_to_the_leader(world: World) -> None:
    """The task configs a follower's connector makes reach the leader (POST /connectors/{c}/tasks) and the config
    topic with the placeholder, not the password the follower resolved."""
    second = world.cluster.start(1)[0]
    leader = world.cluster.leader(60)
    for _ in range(6):
        name, prefix = unique("sec-follower"), unique("secf")
        leader.ok("POST", "/connectors", {"name": name, "config": source(world, prefix, placeholders(world)["env"])})
        status = world.cluster.wait_running(name, 1, timeout=90)
        if status["connector"]["worker_id"] != leader.worker_id:
            break
    else:
        pytest.fail(f"no connector was given to a follower ({second.worker_id}, leader {leader.worker_id})")
    snapshot_arrives(world, prefix)
    tasks = [(k or b"").decode() + " " + (v or b"").decode()
             for _, _, k, v in read_topic(world.worker.bootstrap, world.configs_topic)
             if k and k.startswith(f"task-{name}-".encode())]
    assert tasks and all(f"${{env:{ENV_NAME}}}" in t and PASSWORD not in t for t in tasks), tasks
    assert PASSWORD not in second.log_text() and PASSWORD not in world.worker.log_text()
