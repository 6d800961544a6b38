"""``Herder``: everything the REST API may ask of a herder, and nothing else.

The REST layer (``connect.rest``) is typed against this protocol only; the standalone and
distributed herders (``base.BaseHerder``) implement it. Reads answer from the herder's current
view; writes may raise the refusals of ``errors`` (``NotLeader``: replay the request at the leader).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..api import Connector
from ..config import WorkerConfig
from ..plugins import PluginRegistry
from ..runtime.worker_task import RecordTask
from ..status import Status, TargetState, TaskId

__all__ = ["Herder"]


class Herder(Protocol):
    # -- the worker this herder runs on -----------------------------------------------------------

    @property
    def config(self) -> WorkerConfig: ...

    @property
    def registry(self) -> PluginRegistry: ...

    @property
    def worker_id(self) -> str: ...

    def ready(self) -> bool: ...

    # -- reads ------------------------------------------------------------------------------------

    def connector_names(self) -> list[str]: ...

    def connector_config(self, name: str) -> dict[str, str] | None:
        """The stored config of ``name`` (None: no such connector)."""

    def connector_info(self, name: str) -> dict[str, Any]: ...

    def connector_status(self, name: str) -> dict[str, Any]: ...

    def task_status(self, name: str, task: int) -> dict[str, Any]: ...

    def task_metrics(self, name: str, task: int) -> dict[str, Any]: ...

    def tasks(self, name: str) -> list[dict[str, Any]]: ...

    def active_topics(self, name: str) -> list[str]: ...

    def validate(self, props: dict[str, Any]) -> tuple[type[Connector], dict[str, list[str]]]: ...

    async def connector_offsets(self, name: str) -> list[dict[str, Any]]: ...

    # -- figures for GET /metrics -----------------------------------------------------------------

    @property
    def statuses(self) -> Mapping[tuple[str, int | None], Status]:
        """Every connector's and task's status as this worker last heard it."""

    def local_task_count(self) -> int:
        """Tasks running on this worker."""

    def record_tasks(self) -> list[tuple[TaskId, RecordTask]]:
        """The record tasks running on this worker, with their figures."""

    def rebalance_metrics(self) -> dict[str, Any] | None: ...

    # -- writes -----------------------------------------------------------------------------------

    async def put_connector_config(self, name: str, config: dict[str, Any], allow_replace: bool,
                                   initial_state: TargetState | None = None) -> bool: ...

    async def delete_connector(self, name: str) -> None: ...

    async def set_target_state(self, name: str, target: TargetState) -> None: ...

    async def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        ...

    async def restart_task(self, name: str, task: int) -> None: ...

    def reset_active_topics(self, name: str) -> None: ...

    def verify_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None:
        """KIP-507: raise ``rest.signature.RequestRefused`` (with its HTTP status) unless the internal
        request (``body`` as received) is signed as the cluster signs."""

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None: ...

    async def fence_zombies(self, name: str) -> None:
        """KIP-618: the leader fences the producers of the connector's older task generations and records its
        task count; returns once that is recorded (NotLeader on a follower)."""

    async def alter_offsets(self, name: str, entries: list[dict[str, Any]] | None) -> None: ...

    async def set_cluster_logger_level(self, namespace: str, level: str) -> None: ...
