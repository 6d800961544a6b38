"""One Spark session per worker process, shared by every Spark task on it.

Starting a JVM costs seconds and hundreds of MB, so the first task that needs Spark starts the
session and later tasks reuse it; the worker stops it when it stops (``headwater_worker_stopped``).
Settings are those of the first task: ``spark.master`` and ``spark.conf.*`` of a later task that
differ are logged, not applied (Spark has one session per JVM). A process that embeds workers and uses
the session itself (a notebook, a test session) pins it, so that a worker stopping leaves it running.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from typing import Any

from headwater.connect.api.errors import ConnectException

__all__ = ["SparkUnavailable", "shared_session", "stop_shared_session"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_session: Any = None
_settings: dict[str, str] = {}
_pinned = False  # kept past worker stops, for the embedding process's own use

# What a connector's session needs unless the user says otherwise: no UI port per worker, few
# shuffle partitions (flushes are small), and the worker's own Python for Spark's Python workers.
DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}


class SparkUnavailable(ConnectException, RuntimeError):
    """The Spark session could not be started (no Java, a master that does not answer, ...); still a
    RuntimeError, as it was."""


def shared_session(master: str = "local[2]", conf: dict[str, str] | None = None,
                   app_name: str = "headwater-spark", *, pin: bool = False) -> Any:
    """The process's Spark session, started on first use with ``master`` and ``conf``; ``pin`` keeps it
    running when a worker of this process stops, until ``stop_shared_session(force=True)``."""
    global _session, _settings, _pinned
    wanted = {"spark.master": master, **(conf or {})}
    with _lock:
        _pinned = _pinned or pin
        if _session is not None and _alive(_session):
            different = {k: v for k, v in wanted.items() if _settings.get(k) != v and k in _settings}
            if different:
                log.warning("the Spark session of this worker was started with %s; ignoring %s (one session per "
                            "worker process)", {k: _settings[k] for k in different}, different)
            return _session
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.master(master).appName(app_name)
        for key, value in {**DEFAULTS, **(conf or {})}.items():
            builder = builder.config(key, value)
        if master.startswith("spark://"):
            _check_reachable(master)
            # A standalone master that does not answer otherwise leaves the driver waiting forever.
            builder = builder.config("spark.deploy.maxExecutorRetries", "3")
        try:
            session = builder.getOrCreate()
            if master.startswith("spark://"):
                _wait_for_executors(session, master)
        except SparkUnavailable:
            raise
        except Exception as exc:
            raise SparkUnavailable(f"cannot start a Spark session with spark.master={master}: {exc}") from exc
        _session, _settings = session, wanted
        log.info("started Spark %s session (master %s)", session.version, master)
        return session


def _check_reachable(master: str, timeout: float = 5.0) -> None:
    """Fail at once when no master of ``spark://host:port[,host:port]`` accepts a connection: Spark's
    own client retries registration for a minute before giving up, and says less about why."""
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            problems.append(f"{address}: not host:port")
            continue
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except OSError as exc:
            problems.append(f"{address}: {exc}")
    raise SparkUnavailable(f"cannot start a Spark session with spark.master={master}: no master accepts a "
                           f"connection ({'; '.join(problems)})")


def _alive(session: Any) -> bool:
    try:
        return session.sparkContext._jsc is not None and not session.sparkContext._jsc.sc().isStopped()
    except Exception:
        return False


def _wait_for_executors(session: Any, master: str, timeout: float = 30.0) -> None:
    """A cluster master that accepted the app but gives it no executor would hang every write:
    wait for one, else fail with what the user can act on."""
    import time

    deadline = time.monotonic() + timeout
    tracker = session.sparkContext._jsc.sc().statusTracker()
    while time.monotonic() < deadline:
        if len(tracker.getExecutorInfos()) > 1:  # the driver counts as one
            return
        time.sleep(0.2)
    session.stop()
    raise SparkUnavailable(f"the Spark master {master} gave no executor within {timeout:.0f} s: is a worker "
                           f"registered with it, with enough free cores and memory?")


def stop_shared_session(*, force: bool = False) -> None:
    """Stop the process's Spark session, if one was started here and is not pinned (unless ``force``)."""
    global _session, _pinned
    with _lock:
        if _pinned and not force:
            return
        _pinned = False
        if _session is not None:
            try:
                _session.stop()
            except Exception:
                log.exception("stopping the Spark session failed")
            _session = None
            _settings.clear()
