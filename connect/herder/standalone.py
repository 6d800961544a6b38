"""StandaloneHerder: one worker, configs in memory, offsets in a local file.

Every write runs on the herder's loop (``BaseHerder._tick``), one at a time."""

from __future__ import annotations

import logging
from typing import Any

from ..status import State, Status, TargetState, TaskId
from .base import BaseHerder
from .errors import BadRequest, Conflict

__all__ = ["StandaloneHerder"]

log = logging.getLogger(__name__)


class StandaloneHerder(BaseHerder):
    async def start(self) -> None:
        await self.offsets.start()
        self._start_loop()

    async def _put_connector_config(self, name: str, config: dict[str, Any], allow_replace: bool,
                                    initial_state: TargetState | None) -> bool:
        config = self.check_config(name, config)
        exists = name in self.configs
        if exists and not allow_replace:
            raise Conflict(f"Connector {name} already exists")
        if exists:
            await self._stop_connector_and_tasks(name)
        else:
            self.targets[name] = initial_state or TargetState.STARTED
        self.configs[name] = config
        await self._start_connector_and_tasks(name)
        log.info("%s connector %s", "updated" if exists else "created", name)
        return not exists

    async def _delete_connector(self, name: str) -> None:
        self._require(name)
        await self._stop_connector_and_tasks(name)
        for key in [k for k in self.statuses if k[0] == name]:
            del self.statuses[key]
        self.configs.pop(name)
        self.targets.pop(name, None)
        self.task_configs.pop(name, None)
        log.info("deleted connector %s", name)

    async def _set_target_state(self, name: str, target: TargetState) -> None:
        self._require(name)
        previous = self.targets.get(name, TargetState.STARTED)
        if previous == target:
            return
        self.targets[name] = target
        if target == TargetState.STOPPED or previous == TargetState.STOPPED:
            await self._stop_connector_and_tasks(name)
            await self._start_connector_and_tasks(name)
        else:
            self.worker.set_target_state(name, target)

    async def _restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        self._require(name)
        conn_failed = self.statuses.get((name, None), Status(State.UNASSIGNED, "")).state == State.FAILED
        restart_conn = not only_failed or conn_failed
        tasks = []
        if include_tasks:
            for i in range(len(self.task_configs.get(name, []))):
                st = self.statuses.get((name, i))
                if not only_failed or (st is not None and st.state == State.FAILED):
                    tasks.append(i)
        if not include_tasks and not only_failed:
            await self._restart_connector_only(name)
            return None
        for i in tasks:
            self.statuses[(name, i)] = Status(State.RESTARTING, self.worker_id)
        if restart_conn:
            self.statuses[(name, None)] = Status(State.RESTARTING, self.worker_id)
        result = self.connector_status(name)
        if restart_conn:
            await self._restart_connector_only(name)
        for i in tasks:
            await self._restart_running_task(name, i)
        return result

    async def _restart_connector_only(self, name: str) -> None:
        await self.worker.stop_connector(name)
        await self.worker.start_connector(name, self.configs[name], self.targets.get(name, TargetState.STARTED))

    async def _restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)
        await self._restart_running_task(name, task)

    async def _restart_running_task(self, name: str, task: int) -> None:
        tid = TaskId(name, task)
        await self.worker.stop_tasks([tid])
        await self.worker.start_task(tid, self.configs[name], self.task_configs[name][task],
                                     self.targets.get(name, TargetState.STARTED))

    async def _put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        # One standalone worker runs every task itself: nobody hands it task configs.
        raise BadRequest("Task configs can only be written to a distributed worker")

    async def _reconfigure(self, name: str) -> None:
        if name not in self.configs or not self.worker.is_running(name):
            return
        new = await self.worker.task_configs(name)
        if new == self.task_configs.get(name):
            return
        await self.worker.stop_tasks(self.worker.task_ids(name))
        self.task_configs[name] = new
        for i, task_props in enumerate(new):
            await self.worker.start_task(TaskId(name, i), self.configs[name], task_props,
                                         self.targets.get(name, TargetState.STARTED))
