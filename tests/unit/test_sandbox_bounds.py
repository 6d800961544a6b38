"""What a connector may touch: the worker's ``connector.allowed.paths`` and ``spark.conf.allowed``, the
folders no connector writes to (``plugin.path``, the offset file), checked by ``Worker.validate`` (what
the REST validate endpoint and a create answer) for every built-in connector that touches files, and
again where a task opens its file (tests/integration/test_connector_sandbox.py); and the Kafka worker
keys Headwater cannot honour, refused at load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from headwater.connect.api import PathRefused, check_path
from headwater.connect.api.sandbox import SPARK_CODE_KEYS, applied
from headwater.connect.config import WorkerConfig, WorkerConfigError, load_worker_config
from headwater.connect.plugins import PluginRegistry
from headwater.connect.runtime.sandbox import worker_sandbox
from headwater.connect.runtime.worker import Worker
from headwater.connect.storage.offsets import MemoryOffsetStore
from headwater.connect.unhonoured import UNHONOURED

REGISTRY = PluginRegistry()


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """allowed/ (the bound, with a way out through a symlink), plugins/, outside/."""
    for folder in ("allowed/in", "allowed/error", "allowed/finished", "plugins", "outside/in"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "allowed" / "link").symlink_to(tmp_path / "outside")
    (tmp_path / "allowed" / "plugins-link").symlink_to(tmp_path / "plugins")
    return tmp_path


def worker(place: Path, **settings: str) -> Worker:
    config = WorkerConfig.model_validate({"bootstrap.servers": "127.0.0.1:1", "plugin.path": str(place / "plugins"),
                                          **settings})
    return Worker("w", config, REGISTRY, MemoryOffsetStore(), lambda *a: None)


def bounded(place: Path, **settings: str) -> Worker:
    return worker(place, **{"connector.allowed.paths": str(place / "allowed"), **settings})


def sink(file: str) -> dict[str, str]:
    return {"name": "s", "connector.class": "FileStreamSinkConnector", "topics": "t", "file": file}


def source(file: str) -> dict[str, str]:
    return {"name": "s", "connector.class": "FileStreamSourceConnector", "topic": "t", "file": file}


def spooldir(input_path: str, error_path: str, finished_path: str) -> dict[str, str]:
    return {"name": "s", "connector.class": "SpoolDirLineDelimitedSourceConnector", "topic": "t",
            "input.path": input_path, "error.path": error_path, "finished.path": finished_path,
            "input.file.pattern": ".*"}


def lake(path: str, **extra: str) -> dict[str, str]:
    return {"name": "s", "connector.class": "SparkParquetSink", "topics": "t", "lake.path": path, **extra}


def errors(w: Worker, props: dict[str, str]) -> dict[str, list[str]]:
    return w.validate(props)[1]


# -- the bound ------------------------------------------------------------------------------------------


def test_paths_inside_the_bound_are_accepted_for_every_connector(place: Path) -> None:
    w, a = bounded(place), place / "allowed"
    assert errors(w, sink(str(a / "out.txt"))) == {}
    assert errors(w, sink(str(a / "new" / "deeper" / "out.txt"))) == {}  # not there yet: created at start
    assert errors(w, source(str(a / "in.txt"))) == {}
    assert errors(w, spooldir(str(a / "in"), str(a / "error"), str(a / "finished"))) == {}
    assert errors(w, lake(str(a / "lake"))) == {}
    assert errors(w, lake(f"file://{a}/lake", **{"topics.dir": "tables"})) == {}
    assert errors(w, lake("hdfs://namenode:8020/lake")) == {}  # not this machine's file system


@pytest.mark.parametrize("escape", ["outside", "dotdot", "symlink"])
def test_paths_outside_the_bound_are_refused_naming_the_key_and_the_bound(place: Path, escape: str) -> None:
    w, a = bounded(place), place / "allowed"
    way_out = {"outside": place / "outside", "dotdot": a / ".." / "outside", "symlink": a / "link"}[escape]
    bound = f"connector.allowed.paths={a}"
    cases = [
        ("file", sink(str(way_out / "out.txt"))),
        ("file", source(str(way_out / "in.txt"))),
        ("input.path", spooldir(str(way_out / "in"), str(a / "error"), str(a / "finished"))),
        ("error.path", spooldir(str(a / "in"), str(way_out), str(a / "finished"))),
        ("finished.path", spooldir(str(a / "in"), str(a / "error"), str(way_out))),
        ("lake.path", lake(str(way_out / "lake"))),
        ("lake.path", lake(f"file:{way_out}/lake")),
    ]
    for key, props in cases:
        found = errors(w, props)
        assert list(found) == [key], (props, found)
        (message,) = found[key]
        assert message.startswith(f"Invalid configuration {key}: ") and bound in message, message
        if escape != "outside":
            assert f"resolved to '{place / 'outside'}" in message, message


def test_a_lake_table_folder_may_not_climb_out_of_the_lake(place: Path) -> None:
    w, a = bounded(place), place / "allowed"
    assert list(errors(w, lake(str(a / "lake"), **{"topics.dir": "../../outside"}))) == ["topics.dir"]
    assert list(errors(w, lake(str(a / "lake"), **{"table.name.format": "../../../outside/${topic}"}))) == \
        ["table.name.format"]


def test_unset_the_bound_leaves_paths_free_but_the_plugin_folder(place: Path) -> None:
    w = worker(place)
    assert errors(w, sink(str(place / "outside" / "out.txt"))) == {}
    assert errors(w, source("/etc/hostname")) == {}
    found = errors(w, sink(str(place / "plugins" / "evil.py")))
    assert found == {"file": [f"Invalid configuration file: '{place / 'plugins' / 'evil.py'}' is not a place a "
                              f"connector may write to: it is in the worker's plugin.path folder "
                              f"'{place / 'plugins'}'"]}


# -- never written, whatever the bound says ---------------------------------------------------------------


@pytest.mark.parametrize("bound", [False, True])
def test_the_plugin_folder_and_the_offset_file_are_never_written(place: Path, bound: bool) -> None:
    offsets = place / "allowed" / "connect.offsets"
    settings = {"offset.storage.file.filename": str(offsets)}
    # even a bound that holds the plugin folder does not open it
    w = worker(place, **settings, **({"connector.allowed.paths": f"{place / 'allowed'},{place / 'plugins'}"}
                                     if bound else {}))
    a, p = place / "allowed", place / "plugins"
    for props, key in [(sink(str(p / "evil.py")), "file"), (sink(str(a / "plugins-link" / "evil.py")), "file"),
                       (sink(str(a / ".." / "plugins" / "evil.py")), "file"), (sink(str(offsets)), "file"),
                       (spooldir(str(a / "in"), str(a / "error"), str(p)), "finished.path"),
                       (spooldir(str(a / "in"), str(p), str(a / "finished")), "error.path"),
                       (spooldir(str(place), str(a / "error"), str(a / "finished")), "input.path"),
                       (lake(str(p)), "lake.path"), (lake(str(place)), "lake.path"),
                       (lake(str(a / "lake"), **{"topics.dir": "../../plugins"}), "topics.dir")]:
        found = errors(w, props)
        assert key in found, (props, found)
        assert "is not a place a connector may write to" in found[key][0], found
    # reading the plugin folder is no danger: the worker imports it anyway
    assert "file" not in errors(w, source(str(p / "anything.py")))


def test_a_folder_holding_the_plugin_folder_is_refused_as_a_write_folder(place: Path) -> None:
    w = worker(place)
    (message,) = errors(w, lake(str(place)))["lake.path"]
    assert f"it holds the worker's plugin.path folder '{place / 'plugins'}'" in message


def test_check_path_is_the_plugin_authors_call(place: Path) -> None:
    sandbox = worker_sandbox(WorkerConfig.model_validate({"plugin.path": str(place / "plugins"),
                                                          "connector.allowed.paths": str(place / "allowed")}))
    with applied(sandbox):
        assert check_path("my.dir", place / "allowed" / "x", "write") == place / "allowed" / "x"
        with pytest.raises(PathRefused) as refused:
            check_path("my.dir", place / "allowed" / "link" / "x", "read")
        assert refused.value.field == "my.dir" and str(refused.value).startswith("my.dir: ")
        assert isinstance(refused.value, ValueError)  # reported by a pydantic validator under the key
        cwd = os.getcwd()
        try:
            os.chdir(place / "allowed")
            assert check_path("my.dir", "../allowed/y") == place / "allowed" / "y"
            with pytest.raises(PathRefused):
                check_path("my.dir", "../outside/y")
        finally:
            os.chdir(cwd)
    assert check_path("my.dir", place / "outside") == place / "outside"  # no worker, no bound


def test_a_bound_that_is_not_a_folder_fails_the_worker_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(WorkerConfigError) as failed:
        load_worker_config(None, [f"connector.allowed.paths={tmp_path},{tmp_path / 'missing'}"])
    assert str(failed.value).startswith("connector.allowed.paths: ") and str(tmp_path / "missing") in str(failed.value)


# -- spark.conf.* ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions",
                                 "spark.driver.extraClassPath", "spark.executor.extraLibraryPath", "spark.jars",
                                 "spark.jars.packages", "spark.jars.repositories", "spark.plugins",
                                 "spark.extraListeners", "spark.sql.extensions", "spark.driver.defaultJavaOptions",
                                 "spark.sql.queryExecutionListeners", "spark.files", "spark.archives",
                                 "spark.submit.pyFiles", "spark.executorEnv.LD_PRELOAD", "spark.pyspark.python",
                                 "spark.sql.catalog.evil", "SPARK.DRIVER.EXTRAJAVAOPTIONS"])
def test_spark_settings_that_load_code_are_refused_unless_the_worker_allows_them(place: Path, key: str) -> None:
    props = lake(str(place / "allowed" / "lake"), **{f"spark.conf.{key}": "-javaagent:/tmp/agent.jar"})
    found = errors(bounded(place), props)
    assert list(found) == [f"spark.conf.{key}"], found
    assert "the worker refuses it unless spark.conf.allowed names it" in found[f"spark.conf.{key}"][0]
    assert errors(bounded(place, **{"spark.conf.allowed": key}), props) == {}
    wildcard = "spark.*" if not key.startswith("SPARK") else "spark.driver.*"
    assert errors(bounded(place, **{"spark.conf.allowed": f"spark.sql.shuffle.partitions, {wildcard}"}), props) == {}


def test_harmless_spark_settings_pass_and_spark_folders_are_bounded(place: Path) -> None:
    w, a = bounded(place), place / "allowed"
    ok = lake(str(a / "lake"), **{"spark.conf.spark.sql.shuffle.partitions": "8",
                                  "spark.conf.spark.driver.memory": "2g",
                                  "spark.conf.spark.local.dir": str(a / "scratch")})
    assert errors(w, ok) == {}
    found = errors(w, lake(str(a / "lake"), **{"spark.conf.spark.eventLog.dir": f"file:{place / 'plugins'}"}))
    assert list(found) == ["spark.conf.spark.eventLog.dir"] and "plugin.path folder" in found[
        "spark.conf.spark.eventLog.dir"][0]


def test_every_listed_spark_pattern_is_a_spark_key() -> None:
    assert all(p.startswith(("spark.", "*.")) for p in SPARK_CODE_KEYS)


# -- keys Headwater cannot honour -------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "refused", "accepted"), [
    ("connector.client.config.override.policy", "None", "All"),
    ("connector.client.config.override.policy", "Principal",
     "org.apache.kafka.connect.connector.policy.AllConnectorClientConfigOverridePolicy"),
    ("metric.reporters", "io.confluent.metrics.reporter.ConfluentMetricsReporter", ""),
    ("response.http.headers.config", "add Strict-Transport-Security: max-age=31536000", ""),
    ("rest.servlet.initializor.classes", "com.example.Init", ""),
    ("topic.tracking.enable", "false", "true"),
    ("topic.tracking.allow.reset", "false", "true"),
    ("rest.host.name", "0.0.0.0", None),
    ("rest.port", "8083", None),
])
def test_a_key_headwater_cannot_honour_fails_the_load_naming_it(key: str, refused: str, accepted: str | None) -> None:
    with pytest.raises(WorkerConfigError) as failed:
        load_worker_config(None, [f"{key}={refused}"])
    text = str(failed.value)
    assert text.startswith(f"{key}: {refused!r} cannot be honoured: {UNHONOURED[key].reason}"), text
    if accepted is not None:
        assert (load_worker_config(None, [f"{key}={accepted}"]).model_extra or {})[key] == accepted


def test_postgres_tls_files_are_read_within_the_bound(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(place))  # no ~/.postgresql/root.crt to fall back on
    for folder in ("allowed", "outside"):
        (place / folder / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    w, a = bounded(place), place / "allowed"
    source = {"name": "s", "connector.class": "PostgresConnector", "database.hostname": "db", "database.user": "u",
              "database.dbname": "d", "topic.prefix": "p", "database.sslmode": "verify-full"}
    assert errors(w, {**source, "database.sslrootcert": str(a / "ca.pem")}) == {}
    found = errors(w, {**source, "database.sslrootcert": str(a / "link" / "ca.pem")})
    assert list(found) == ["database.sslrootcert"] and f"connector.allowed.paths={a}" in found[
        "database.sslrootcert"][0], found
    sink = {"name": "s", "connector.class": "JdbcSinkConnector", "topics": "t",
            "connection.url": f"jdbc:postgresql://db/d?sslmode=verify-full&sslrootcert={place / 'outside' / 'ca.pem'}"}
    (message,) = errors(w, sink)["connection.url"]
    assert message.startswith("Invalid configuration connection.url: parameter sslrootcert ") and \
        "outside the folders the worker lets connectors read" in message, message
