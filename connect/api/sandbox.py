"""What a connector may touch on the worker's machine: file-system paths and Spark settings.

The worker sets the bounds (``connector.allowed.paths``, ``spark.conf.allowed``, and the folders no
connector may ever write to: ``plugin.path``, whose ``.py`` files the worker imports at once, and the
worker's own offset file) around every validation, connector start and task start; a connector's config
model calls ``check_path`` for each path it reads or writes, and ``check_spark_conf`` for Spark settings
it passes on. A refusal is a ``ValueError`` whose text starts with the key, so a pydantic validator that
lets it through reports it under that key (the validate answer, and a create that starts nothing).
Outside a worker (a plugin's unit test) nothing is bounded.

In a config model::

    @model_validator(mode="after")
    def _bounded(self) -> MyConfig:
        check_path("output.dir", self.output_dir, "write")
        return self
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .errors import ConfigException

__all__ = ["PathRefused", "Sandbox", "SPARK_CODE_KEYS", "SPARK_PATH_KEYS", "applied", "check_path",
           "check_spark_conf", "current", "resolve", "within"]

#: read: the connector opens or lists it; write: it creates, appends to, moves into or deletes under it
Mode = Literal["read", "write"]

ALLOWED_PATHS_KEY = "connector.allowed.paths"
SPARK_ALLOWED_KEY = "spark.conf.allowed"

#: Spark settings that put code, JVM options, native libraries, environment or executables into Spark's
#: processes (spark.apache.org/docs/latest/configuration.html, running-on-yarn, running-on-kubernetes),
#: refused in ``spark.conf.*`` unless ``spark.conf.allowed`` names them. Patterns are fnmatch globs,
#: matched without regard to case.
SPARK_CODE_KEYS: tuple[str, ...] = (
    # JVM options and agents (-javaagent, -XX:OnOutOfMemoryError=..., system properties)
    "spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions", "spark.driver.defaultJavaOptions",
    "spark.executor.defaultJavaOptions", "spark.yarn.am.extraJavaOptions",
    # class paths, native library paths, class-loading order
    "*.extraClassPath", "*.extraLibraryPath", "spark.driver.userClassPathFirst", "spark.executor.userClassPathFirst",
    # jars, packages and where they come from; files and archives shipped to executors
    "spark.jars", "spark.jars.*", "spark.files", "spark.archives", "spark.submit.*",
    "spark.yarn.dist.*", "spark.yarn.jars", "spark.yarn.archive", "spark.sql.hive.metastore.jars",
    "spark.sql.hive.metastore.jars.*", "spark.sql.hive.metastore.sharedPrefixes",
    "spark.sql.hive.metastore.barrierPrefixes",
    # classes instantiated by name: plugins, listeners, extensions, catalogs, serializers
    "spark.plugins", "spark.plugins.*", "spark.extraListeners", "spark.sql.extensions",
    "spark.sql.queryExecutionListeners", "spark.sql.streaming.streamingQueryListeners", "spark.sql.catalog.*",
    "spark.serializer", "spark.kryo.registrator", "spark.kryo.classesToRegister", "spark.shuffle.manager",
    "spark.resources.discoveryPlugin", "*.discoveryScript", "spark.sql.sources.commitProtocolClass",
    "spark.sql.parquet.output.committer.class",
    # environment of Spark's processes (LD_PRELOAD, PYTHONPATH, JAVA_TOOL_OPTIONS) and the programs run
    "spark.executorEnv.*", "spark.yarn.appMasterEnv.*", "spark.kubernetes.driverEnv.*",
    "spark.pyspark.python", "spark.pyspark.driver.python", "spark.python.daemon.module",
    "spark.python.worker.module", "spark.r.command", "spark.r.driver.command",
    # containers and pod templates of a Kubernetes master
    "spark.kubernetes.container.image", "spark.kubernetes.*.container.image", "spark.kubernetes.*.podTemplateFile",
    # Hadoop's file-system and security classes (spark.hadoop.fs.<scheme>.impl and the like)
    "spark.hadoop.*.impl", "spark.hadoop.*.class", "spark.hadoop.*.classes",
)

#: Spark settings naming a local folder Spark writes to: bounded like the connector's own paths.
SPARK_PATH_KEYS: tuple[str, ...] = (
    "spark.local.dir", "spark.eventLog.dir", "spark.sql.warehouse.dir", "spark.checkpoint.dir",
    "spark.sql.streaming.checkpointLocation", "spark.driver.log.dfsDir", "spark.history.fs.logDirectory",
)


class PathRefused(ConfigException, ValueError):
    """A path or setting outside what the worker lets connectors touch; the text starts with the key (a
    ValueError too, so a pydantic validator reports it under that key)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}", key)


@dataclass(frozen=True)
class Sandbox:
    """The worker's bounds, paths resolved (symlinks and ``..`` followed) when the worker starts."""

    #: every path a connector touches is inside one of these; empty: no bound but ``protected``
    allowed_paths: tuple[Path, ...] = ()
    #: never written, moved into or deleted under, and no write folder may hold them, whatever the bound
    protected: tuple[tuple[Path, str], ...] = ()  # (path, what it is, for the message)
    #: spark.conf.* keys (fnmatch patterns) allowed although they load code
    spark_conf_allowed: tuple[str, ...] = ()


UNBOUNDED = Sandbox()
_current: ContextVar[Sandbox] = ContextVar("headwater_sandbox")


def current() -> Sandbox:
    """The bounds in force (the worker's inside its validations and starts; none outside a worker)."""
    return _current.get(UNBOUNDED)


@contextmanager
def applied(sandbox: Sandbox) -> Iterator[None]:
    """Run the block (and tasks and threads started from it, which copy the context) under ``sandbox``."""
    token = _current.set(sandbox)
    try:
        yield
    finally:
        _current.reset(token)


def resolve(path: str | os.PathLike[str]) -> Path:
    """The absolute path with every symlink and ``..`` resolved (missing tails kept as written), as the
    file system will see it."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def within(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or inside it (both resolved)."""
    return path == folder or folder in path.parents


def check_path(key: str, path: str | os.PathLike[str], mode: Mode = "read") -> Path:
    """The resolved ``path`` when the worker lets a connector ``mode`` it, else ``PathRefused`` naming ``key``
    and the bound. ``write`` also refuses a folder holding a protected path (files moved into it could
    replace one)."""
    sandbox = current()
    real = resolve(path)
    shown = repr(os.fspath(path)) + (f" (resolved to {str(real)!r})" if str(real) != os.fspath(path) else "")
    if mode == "write":
        for protected, what in sandbox.protected:
            if within(real, protected) or within(protected, real):
                relation = "is" if real == protected else "is in" if within(real, protected) else "holds"
                raise PathRefused(key, f"{shown} is not a place a connector may write to: it {relation} {what} "
                                       f"{str(protected)!r}")
    if sandbox.allowed_paths and not any(within(real, folder) for folder in sandbox.allowed_paths):
        bound = ", ".join(str(p) for p in sandbox.allowed_paths)
        raise PathRefused(key, f"{shown} is outside the folders the worker lets connectors {mode} "
                               f"({ALLOWED_PATHS_KEY}={bound})")
    return real


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    lowered = key.lower()
    return any(fnmatch.fnmatchcase(lowered, p.lower()) for p in patterns)


def local_path(uri: str) -> str | None:
    """The local file-system path of a Hadoop path or URI (``/x``, ``file:/x``, ``file:///x``), None when
    it names another file system (hdfs://, s3a://, ...)."""
    if uri.startswith("file://"):
        rest = uri[len("file://"):]
        host, sep, tail = rest.partition("/")
        return "/" + tail if host in ("", "localhost") and sep else None
    if uri.startswith("file:"):
        return uri[len("file:"):]
    scheme, sep, _ = uri.partition("://")
    if sep and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        return None
    return uri


def check_spark_conf(conf: Mapping[str, str], prefix: str = "spark.conf.") -> None:
    """Refuse Spark settings that load code or start programs unless the worker's ``spark.conf.allowed``
    names them, and bound the local folders Spark would write to (``spark.local.dir``, ...); ``conf`` holds
    Spark's own keys, reported as ``prefix + key``."""
    sandbox = current()
    for key, value in conf.items():
        if _matches(key, SPARK_CODE_KEYS) and not _matches(key, sandbox.spark_conf_allowed):
            raise PathRefused(prefix + key, f"Spark setting {key} loads code, JVM options or programs into Spark's "
                                            f"processes; the worker refuses it unless {SPARK_ALLOWED_KEY} names it")
        if _matches(key, SPARK_PATH_KEYS):
            for part in str(value).split(","):
                local = local_path(part.strip())
                if local:
                    check_path(prefix + key, local, "write")
