"""The worker's bounds on what connectors touch, built once from its config (the checks themselves are the
plugin API's ``check_path`` and ``check_spark_conf``, in connect/api/sandbox.py)."""

from __future__ import annotations

from ..api.sandbox import Sandbox, resolve
from ..config import WorkerConfig

__all__ = ["worker_sandbox"]


def worker_sandbox(config: WorkerConfig) -> Sandbox:
    """``connector.allowed.paths`` and ``spark.conf.allowed`` as given, and what no connector writes to
    whatever they say: the ``plugin.path`` folders (a ``.py`` file dropped there is imported at once) and
    the worker's offset file."""
    protected = [(resolve(p), "the worker's plugin.path folder") for p in config.plugin_paths()]
    if config.offset_storage_file_filename:
        protected.append((resolve(config.offset_storage_file_filename),
                          "the worker's offset file (offset.storage.file.filename)"))
    patterns = tuple(p.strip() for p in config.spark_conf_allowed.split(",") if p.strip())
    return Sandbox(allowed_paths=tuple(resolve(p) for p in config.allowed_paths()), protected=tuple(protected),
                   spark_conf_allowed=patterns)
