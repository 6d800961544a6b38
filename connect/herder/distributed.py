"""DistributedHerder: workers sharing a ``group.id`` split connectors and tasks between them.

State lives in three compacted topics (configs, offsets, statuses); membership and
assignment go through the broker's group protocol (type ``connect``) with the leader
running the incremental cooperative assignor. Writes that only the leader may make
raise NotLeader, and the REST layer forwards them to the leader's URL.

As in Kafka Connect's DistributedHerder, one loop (``BaseHerder._tick``) changes the herder's
state: the config store's records, the group's rebalances (the leader's assignment too), the
worker's status reports and the REST writes all arrive there as events (``events``). The config
topic is read to its end in one place, ``_fresh_configs``, whenever the loop needs the newest view.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from ..api.errors import ConnectException
from ..config import WorkerConfig
from ..kafka.fencing import fence_producers
from ..loggers import set_level
from ..plugins import PluginRegistry
from ..rest.signature import ReplayGuard, RequestRefused, RequestSignature, sign
from ..runtime.exactly_once import transactional_id, worker_exactly_once_enabled
from ..status import State, Status, TargetState, TaskId
from ..storage.config_events import (
    ConfigEvent,
    ConnectorConfigSeen,
    ConnectorRemoved,
    LoggerLevelSeen,
    RestartRequested,
    TargetStateSeen,
    TaskConfigsCommitted,
    TaskCountRecorded,
)
from ..storage.kafka_log import ensure_compacted_topic
from ..storage.kafka_stores import KafkaConfigStore, KafkaOffsetStore, KafkaStatusStore
from .assignor import IncrementalAssignor
from .base import BaseHerder
from .errors import BadRequest, Conflict, HerderError, NotFound, NotLeader, NotOwner
from .events import AssignmentNeeded, FencingSettled, HerderEvent, Rebalanced, SessionKeyDue, StatusReported
from .fencing import FENCE_RETRY_MAX_S, FENCE_TIMEOUT_MS, ZombieFencing, needs_fencing_round
from .membership import GroupMembership, JoinResult
from .protocol import Assignment, MemberMetadata, encode_metadata
from .session_key import KeyPolicy

__all__ = ["DistributedHerder", "NotLeader", "NotOwner"]

log = logging.getLogger(__name__)


class DistributedHerder(BaseHerder):
    def __init__(self, config: WorkerConfig, registry: PluginRegistry, worker_id: str, rest_url: str) -> None:
        bootstrap, security = config.bootstrap_servers, config.security()
        client = f"connect-{worker_id}"
        self.offset_store = KafkaOffsetStore(bootstrap, config.offset_storage_topic, f"{client}-offsets", security)
        super().__init__(config, registry, self.offset_store, worker_id)
        self.rest_url = rest_url.rstrip("/")
        self.config_store = KafkaConfigStore(bootstrap, config.config_storage_topic, f"{client}-configs",
                                             self._on_config_record, security)
        self.status_store = KafkaStatusStore(bootstrap, config.status_storage_topic, f"{client}-statuses", security)
        # Views of the stores' state, which only their readers change; the herder reads them.
        snap = self.config_store.snapshot
        self.configs, self.targets, self.task_configs = snap.connectors, snap.targets, snap.tasks
        self.statuses = self.status_store.statuses
        self.assignor = IncrementalAssignor(config.scheduled_rebalance_max_delay_ms)
        protocols = ["default"] if config.connect_protocol == "eager" else (
            ["sessioned", "compatible", "default"] if config.connect_protocol == "sessioned"
            else ["compatible", "default"])
        self.membership = GroupMembership(
            bootstrap, config.group_id, client, config.session_timeout_ms, config.rebalance_timeout_ms,
            config.heartbeat_interval_ms, protocols, self._metadata, self._assign, self._on_assignment, security)
        # The herder's own state, changed only on the loop:
        self.assignment: Assignment | None = None
        self.generation = -1
        self.leader_url: str | None = None
        self._running_configs: dict[str, dict[str, str]] = {}
        self._running_task_configs: dict[TaskId, dict[str, str]] = {}
        # Task configs a follower hands to the leader, one POST at a time per connector (a later one
        # waits for the one before, so the leader never commits an older set last). They only send.
        self._forwards: dict[str, asyncio.Task[None]] = {}
        self._config_loaded = False
        # KIP-618: source tasks assigned here that wait for a round of zombie fencing, this worker's requests
        # for those rounds (off the loop), and, on the leader, the rounds in progress
        self._awaiting_fencing: dict[str, set[TaskId]] = {}
        self._fence_requests: dict[str, asyncio.Task[None]] = {}
        self._fence_failures: dict[str, int] = {}
        self._fencings: dict[str, ZombieFencing] = {}
        # KIP-507: the leader's key rotation (a timer posts SessionKeyDue) and the signatures received lately
        self.key_policy = KeyPolicy.of(config)
        self._key_due: asyncio.TimerHandle | None = None
        self._replays = ReplayGuard()
        if config.connect_protocol != "sessioned":
            log.warning("Internal request verification is disabled for this cluster: this worker's connect.protocol "
                        "is %r. Unless that is intended, remove connect.protocol from the worker config or set it "
                        "to 'sessioned'; otherwise any client that reaches a worker's REST API can write task "
                        "configs (KIP-507).", config.connect_protocol)

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        cfg, bootstrap = self.config, self.config.bootstrap_servers
        await ensure_compacted_topic(bootstrap, cfg.config_storage_topic, 1, cfg.config_storage_replication_factor,
                                     "connector configurations", "config.storage.topic", cfg.security())
        await ensure_compacted_topic(bootstrap, cfg.offset_storage_topic, cfg.offset_storage_partitions,
                                     cfg.offset_storage_replication_factor, "source connector offsets",
                                     "offset.storage.topic", cfg.security())
        await ensure_compacted_topic(bootstrap, cfg.status_storage_topic, cfg.status_storage_partitions,
                                     cfg.status_storage_replication_factor, "connector and task statuses",
                                     "status.storage.topic", cfg.security())
        await self.offsets.start()
        await self.status_store.start()
        await self.config_store.start()
        # What the topic held before this worker started is taken by its first rebalance; records
        # from now on are events (a cluster log level, ephemeral as in Kafka Connect, only from now on).
        self._config_loaded = True
        self._running_configs = {}
        self._start_loop()
        await self.membership.start()

    async def stop(self) -> None:
        if self._key_due is not None:
            self._key_due.cancel()
        await self.membership.stop()
        await self._stop_loop()
        background = [*self._forwards.values(), *self._fence_requests.values(),
                      *(f.task for f in self._fencings.values() if f.task is not None)]
        for job in background:
            job.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        # Let the last status writes (UNASSIGNED on shutdown) reach the topic before it closes.
        try:
            await asyncio.wait_for(self.status_store.flush(), 5)
        except (TimeoutError, OSError) as exc:
            log.warning("the last status writes of %s did not all reach %s: %s", self.worker_id,
                        self.config.status_storage_topic, exc)
        await self.config_store.stop()
        await self.status_store.stop()
        await self.offsets.stop()

    def ready(self) -> bool:
        return self.assignment is not None

    def startup_failure(self) -> BaseException | None:
        return self.membership.failure

    def rebalance_metrics(self) -> dict[str, Any] | None:
        times = self.membership.rebalances
        since = times.since_last_ms()
        return {"completed-rebalances-total": times.total, "rebalancing": times.running,
                "rebalance-avg-time-ms": round(times.avg_ms(), 3), "rebalance-max-time-ms": round(times.max_ms(), 3),
                "time-since-last-rebalance-ms": -1 if since is None else round(since), "epoch": self.generation,
                "leader-name": self.leader_url or ""}

    # -- events: what the loop does ---------------------------------------------------------------

    async def _handle(self, event: HerderEvent) -> None:
        if isinstance(event, AssignmentNeeded):
            assignments = await self._compute_assignment(event.join)
            if not event.reply.done():
                event.reply.set_result(assignments)
        elif isinstance(event, Rebalanced):
            await self._apply_assignment(event.assignment, event.generation, event.applied)
            await self._check_session_key()  # a new leader distributes a key if there is none or it expired
        elif isinstance(event, SessionKeyDue):
            await self._check_session_key()
        elif isinstance(event, ConnectorRemoved):
            await self.worker.stop_tasks(self.worker.task_ids(event.name))
            await self.worker.stop_connector(event.name)
            self.membership.request_rejoin()
        elif isinstance(event, ConnectorConfigSeen):
            await self._connector_config_changed(event.name)
        elif isinstance(event, TaskConfigsCommitted):
            await self._task_configs_changed(event.name)
        elif isinstance(event, TaskCountRecorded | FencingSettled):
            await self._start_fenced_tasks(event.name if isinstance(event, TaskCountRecorded) else event.connector)
        elif isinstance(event, TargetStateSeen):
            await self._apply_target(event.name)
        elif isinstance(event, RestartRequested):
            await self._restart_local(event.name, event.include_tasks, event.only_failed)
        elif isinstance(event, LoggerLevelSeen):
            set_level(event.namespace, event.level)
        else:
            await super()._handle(event)

    async def _fresh_configs(self) -> None:
        """Read the config topic to its end: every record written before now is in the snapshot (and
        queued as an event). The one place the herder waits for the config log."""
        await self.config_store.log.read_to_end()

    # -- status ---------------------------------------------------------------------------------

    async def _record_status(self, event: StatusReported) -> None:
        current = self.statuses.get((event.connector, event.task))
        if event.state == State.UNASSIGNED and current is not None and current.worker_id != self.worker_id:
            return  # another worker owns it now: do not overwrite its status
        status = Status(event.state, self.worker_id, event.trace, max(self.generation, 0))
        # Queued in order here; the loop does not wait for the broker's ack (stop flushes them).
        ack = await self.status_store.write(event.connector, event.task, status)
        ack.add_done_callback(functools.partial(_log_failed_write, f"{event.connector}/{event.task}"))

    # -- the group: callbacks from the membership's task, answered by the loop ---------------------

    def _metadata(self) -> bytes:
        return encode_metadata(MemberMetadata(self.rest_url, self.config_store.snapshot.offset, self.assignment, 1))

    async def _assign(self, join: JoinResult) -> dict[str, Assignment]:
        reply: asyncio.Future[dict[str, Assignment]] = asyncio.get_running_loop().create_future()
        self._post(AssignmentNeeded(join, reply))
        return await reply

    async def _on_assignment(self, assignment: Assignment, generation: int, leader: bool) -> None:
        applied: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._post(Rebalanced(assignment, generation, leader, applied))
        await applied  # revoked work has stopped before the membership rejoins

    async def _compute_assignment(self, join: JoinResult) -> dict[str, Assignment]:
        await self._fresh_configs()
        snap = self.config_store.snapshot
        counts = {name: len(snap.tasks.get(name, [])) for name in snap.connectors}
        return self.assignor.assign(join.member_id, self.rest_url, snap.offset, join.members, counts)

    async def _apply_assignment(self, assignment: Assignment, generation: int,
                                applied: asyncio.Future[None]) -> None:
        """Stop what this worker no longer owns, then release the membership (``applied``: revoked work has
        stopped), then start what is new here. The membership heartbeats while hundreds of tasks start:
        starting them is not part of the rebalance, and the loop yields between them (a session that
        lapsed while a worker started its share would rebalance the whole group again)."""
        self.generation = generation
        self.leader_url = assignment.leader_url
        if self.config_store.snapshot.offset < assignment.config_offset:
            await self._fresh_configs()
        wanted_connectors = set(assignment.connectors())
        wanted_tasks = {TaskId(c, t) for c, t in assignment.tasks()}
        stale = [t for t in self.worker.task_ids() if t not in wanted_tasks]
        await self.worker.stop_tasks(stale)
        for t in stale:
            self._running_task_configs.pop(t, None)
        for name in list(self.worker.connectors):
            if name not in wanted_connectors:
                await self.worker.stop_connector(name)
                self._running_configs.pop(name, None)
        self.assignment = assignment
        if not applied.done():
            applied.set_result(None)
        for name in sorted(wanted_connectors - set(self.worker.connectors)):
            await self._start_connector(name)
            await asyncio.sleep(0)
        starting = sorted(wanted_tasks - set(self.worker.tasks))
        if starting:
            await self._read_offsets_to_end()
        for tid in starting:
            await self._start_task(tid)
            await asyncio.sleep(0)

    async def _read_offsets_to_end(self) -> None:
        """A task given to this worker starts from the offsets its previous owner stored last (it committed
        them when it stopped, before the revocation), not from this worker's older view of the offsets
        topic: Kafka's KafkaOffsetBackingStore reads to the end before answering too."""
        offsets_log = self.offset_store.log
        try:
            await offsets_log.read_to_end(timeout=30)
        except Exception as exc:
            log.warning("could not read %s to its end before starting tasks (%s); they start from the "
                        "offsets read so far", offsets_log.topic, exc)

    async def _start_connector(self, name: str) -> None:
        config = self.configs.get(name)
        if config is None:
            return
        target = self.targets.get(name, TargetState.STARTED)
        self._running_configs[name] = dict(config)
        ok = await self.worker.start_connector(name, config, target)
        if ok and target != TargetState.STOPPED:
            self._request_reconfigure(name)

    async def _start_task(self, tid: TaskId) -> None:
        configs = self.task_configs.get(tid.connector) or []
        if tid.task >= len(configs) or tid.connector not in self.configs:
            return
        if self._awaits_fencing(tid.connector):  # started once the leader has recorded the fencing
            self._awaiting_fencing.setdefault(tid.connector, set()).add(tid)
            self._request_fencing(tid.connector)
            return
        self._running_task_configs[tid] = configs[tid.task]
        await self.worker.start_task(tid, self.configs[tid.connector], configs[tid.task],
                                     self.targets.get(tid.connector, TargetState.STARTED))

    def _owns_connector(self, name: str) -> bool:
        return self.assignment is not None and name in self.assignment.connectors()

    # -- config topic records ---------------------------------------------------------------------

    def _on_config_record(self, event: ConfigEvent) -> None:
        """From the config store's reader: queue the record for the loop."""
        if self._config_loaded:
            self._post(event)

    async def _connector_config_changed(self, name: str) -> None:
        config = self.configs.get(name)
        if name in self._running_configs and config != self._running_configs.get(name):
            if self._owns_connector(name):  # a new config bounces only this connector
                await self.worker.stop_connector(name)
                await self._start_connector(name)
        elif not self._owns_connector(name):
            self.membership.request_rejoin()

    async def _task_configs_changed(self, name: str) -> None:
        new = self.task_configs.get(name) or []
        fencing = self._fencings.pop(name, None)
        if fencing is not None and not fencing.done.done():
            fencing.done.set_exception(Conflict("Failed to complete zombie fencing because a new set of task "
                                                "configs was generated"))
        # Under exactly-once every task of a new generation starts after the fencing, which fences the
        # producers of the tasks left running too: all restart (as Kafka restarts them), even when the
        # task-count record was read before this event
        every = self._exactly_once_source(name)
        changed = [t for t in self.worker.task_ids(name)
                   if every or t.task >= len(new) or self._running_task_configs.get(t) != new[t.task]]
        await self.worker.stop_tasks(changed)
        for t in changed:
            self._running_task_configs.pop(t, None)
        if self.assignment is not None:
            for c, number in self.assignment.tasks():
                tid = TaskId(c, number)
                if c == name and tid not in self.worker.tasks:
                    await self._start_task(tid)
        self.membership.request_rejoin()

    # -- KIP-618: source tasks start after the zombies of older generations are fenced -----------------

    def _exactly_once_source(self, name: str) -> bool:
        """This worker runs the source tasks of ``name`` with transactional producers."""
        return worker_exactly_once_enabled(self.config) and self.connector_type(name) == "source"

    def _awaits_fencing(self, name: str) -> bool:
        """A source task of ``name`` may not start yet: this worker runs exactly-once source tasks, and the
        connector's task configs came after its last task-count record."""
        return name in self.config_store.snapshot.pending_fencing and self._exactly_once_source(name)

    def _request_fencing(self, name: str) -> None:
        """Ask the leader for a round of fencing (off the loop), unless this worker is asking already."""
        running = self._fence_requests.get(name)
        if running is None or running.done():
            self._fence_requests[name] = asyncio.create_task(self._fence_request(name), name=f"fence-{name}")

    async def _fence_request(self, name: str) -> None:
        """One request; then the waiting tasks are tried again (FencingSettled): they start, or ask again."""
        try:
            if self.membership.is_leader:
                await self.fence_zombies(name)
            else:
                await self._to_leader("PUT", f"/connectors/{name}/fence", None, attempts=1)
            await self.config_store.log.read_to_end()  # the task-count record, before the tasks start
            self._fence_failures.pop(name, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures = self._fence_failures[name] = self._fence_failures.get(name, 0) + 1
            delay = min(0.25 * 2 ** failures, FENCE_RETRY_MAX_S)
            conflict = isinstance(exc, Conflict) or getattr(exc, "status", None) == 409
            log.log(logging.INFO if conflict else logging.ERROR,
                    "a round of zombie fencing for %s failed (attempt %d: %s: %s); its source tasks wait, "
                    "asking again in %.1f s", name, failures, type(exc).__name__, exc, delay)
            if not conflict and failures >= 3:  # surfaced as Kafka does, in the waiting tasks' status
                trace = f"Failed to perform round of zombie fencing: {type(exc).__name__}: {exc}"
                for tid in sorted(self._awaiting_fencing.get(name, ()), key=lambda t: t.task):
                    self._on_status(name, tid.task, State.FAILED, trace)
            await asyncio.sleep(delay)
        self._post(FencingSettled(name))

    async def _start_fenced_tasks(self, name: str) -> None:
        """Start the tasks of ``name`` that waited for a fencing and are still this worker's."""
        waiting = self._awaiting_fencing.pop(name, set())
        wanted = {TaskId(c, t) for c, t in self.assignment.tasks()} if self.assignment is not None else set()
        for tid in sorted(waiting & wanted, key=lambda t: t.task):
            if tid not in self.worker.tasks:
                await self._start_task(tid)

    async def _fence_zombies(self, name: str) -> asyncio.Future[None]:
        """On the leader (Kafka's doFenceZombieSourceTasks): fence the producers of the generation recorded
        last and record the current task count. The fencing runs off the loop; the future is its end."""
        self._require_leader()
        self._require(name)
        if self.connector_type(name) != "source":
            raise BadRequest(f"Connector {name} is not a source connector")
        await self._fresh_configs()
        snap = self.config_store.snapshot
        count, recorded = len(snap.tasks.get(name, [])), snap.task_count_records.get(name)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if name not in snap.pending_fencing:
            log.debug("no zombie fencing for %s: every older task generation is fenced already", name)
        elif needs_fencing_round(recorded, count):
            assert recorded is not None
            fencing = self._fencings.get(name)
            if fencing is None:
                fencing = self._fencings[name] = ZombieFencing(name, recorded, count,
                                                               snap.task_generations.get(name, -1))
                fencing.task = asyncio.create_task(self._run_fencing(fencing), name=f"fencing-{name}")
            return fencing.done
        else:
            log.info("recording %d task(s) of %s without fencing (%s)", count, name,
                     "first generation with exactly-once support" if recorded is None else "one task follows one")
            await self.config_store.put_task_count_record(name, count)
        done.set_result(None)
        return done

    async def _run_fencing(self, fencing: ZombieFencing) -> None:
        name = fencing.connector
        ids = [transactional_id(self.config.group_id, name, i) for i in range(fencing.to_fence)]
        log.info("fencing the producers of %d task(s) of %s's previous generation: %s", len(ids), name, ids)
        try:
            await fence_producers(self.config.bootstrap_servers, self.config.client("admin"), ids, FENCE_TIMEOUT_MS)
            await self._call(f"record the task count of {name}", lambda: self._record_task_count(fencing))
        except asyncio.CancelledError:
            if not fencing.done.done():
                fencing.done.cancel()
            raise
        except Exception as exc:  # a Conflict: new task configs came meanwhile, and a new round follows
            log.log(logging.INFO if isinstance(exc, Conflict) else logging.ERROR, "zombie fencing of %s failed: "
                    "%s: %s", name, type(exc).__name__, exc)
            if not fencing.done.done():
                fencing.done.set_exception(exc)
        else:
            log.info("fenced %s's previous generation and recorded %d task(s)", name, fencing.to_record)
            if not fencing.done.done():
                fencing.done.set_result(None)
        finally:
            if self._fencings.get(name) is fencing:
                del self._fencings[name]

    async def _record_task_count(self, fencing: ZombieFencing) -> None:
        """On the loop, after the fencing: the task-count record, unless new task configs came since."""
        self._require_leader()
        await self._fresh_configs()
        name = fencing.connector
        if fencing.done.done() or self.config_store.snapshot.task_generations.get(name, -1) != fencing.generation:
            raise Conflict("Fencing failed because new task configurations were generated for the connector")
        await self.config_store.put_task_count_record(name, fencing.to_record)

    async def fence_zombies(self, name: str) -> None:
        """``PUT /connectors/{name}/fence`` (internal): returns once the round is recorded; NotLeader on a
        follower. Waiting for the round does not hold the loop."""
        done = await self._call(f"fence the zombies of {name}", lambda: self._fence_zombies(name))
        await asyncio.shield(done)

    async def alter_offsets(self, name: str, entries: list[dict[str, Any]] | None) -> None:
        """Under exactly-once, a stopped source connector's zombies are fenced before its offsets change, so
        none of its old tasks commits over them (Kafka's modifyConnectorOffsets; the leader does it)."""
        if name in self.configs and self._exactly_once_source(name):
            self._require_stopped(name)
            try:
                await self.fence_zombies(name)
            except HerderError:
                raise
            except Exception as exc:
                raise ConnectException(f"Failed to perform zombie fencing for source connector prior to modifying "
                                       f"offsets: {type(exc).__name__}: {exc}") from exc
        await super().alter_offsets(name, entries)

    async def _apply_target(self, name: str) -> None:
        target = self.targets.get(name, TargetState.STARTED)
        running = self.worker.connectors.get(name)
        was_stopped = running is not None and running.target == TargetState.STOPPED
        if target == TargetState.STOPPED:
            await self.worker.stop_tasks(self.worker.task_ids(name))
            if running is not None and not was_stopped:
                await self.worker.stop_connector(name)
                await self._start_connector(name)
            return
        if was_stopped and self._owns_connector(name):
            await self.worker.stop_connector(name)
            await self._start_connector(name)
            return
        self.worker.set_target_state(name, target)

    async def _restart_here(self, name: str) -> None:
        # Only what runs here: each worker holds its own leases, and the leader need not be asked.
        await self._restart_local(name, True, False)

    async def _restart_local(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        # The leader marked the targets RESTARTING when it answered; FAILED ones may not be marked yet.
        wanted = (State.FAILED, State.RESTARTING)
        failed = self.statuses.get((name, None))
        if self._owns_connector(name) and (not only_failed or (failed and failed.state in wanted)):
            await self.worker.stop_connector(name)
            await self._start_connector(name)
        if include_tasks:
            for tid in list(self.worker.task_ids(name)):
                st = self.statuses.get((name, tid.task))
                if not only_failed or (st is not None and st.state in wanted):
                    await self.worker.stop_tasks([tid])
                    await self._start_task(tid)

    # -- KIP-507: the session key and signed internal requests -------------------------------------

    def signing_enabled(self) -> bool:
        """Internal requests are signed and checked when the group runs the sessioned protocol (this
        worker's setting until it has joined), as in Kafka."""
        return self.config.connect_protocol == "sessioned" and self.membership.protocol in (None, "sessioned")

    async def _check_session_key(self) -> None:
        """On the leader: distribute a new key when needed, then check again when the current one expires."""
        if self._key_due is not None:
            self._key_due.cancel()
            self._key_due = None
        if not self.membership.is_leader or not self.signing_enabled():
            if self.membership.is_leader and self.config.connect_protocol == "sessioned":
                log.warning("the group runs the %r protocol (a member is not configured with "
                            "connect.protocol=sessioned): internal requests are not signed (KIP-507)",
                            self.membership.protocol)
            return
        now = _now_ms()
        current = self.config_store.snapshot.session_key
        why = self.key_policy.why_replace(current, now)
        retry_in = None
        if why is not None:
            log.info("distributing a new session key: %s", why)
            try:
                await self.config_store.put_session_key(self.key_policy.new_key(now))
            except Exception as exc:
                log.error("writing a new session key to %s failed (%s); trying again in 1 s",
                          self.config.config_storage_topic, exc)
                retry_in = 1.0
            current = self.config_store.snapshot.session_key
        if retry_in is None:
            expires = self.key_policy.expires_at(current) if current is not None else now
            retry_in = max((expires - _now_ms()) / 1000, 0.1)
        self._key_due = asyncio.get_running_loop().call_later(retry_in, self._post, SessionKeyDue())

    def verify_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Refuse (RequestRefused) an internal request not signed with the current session key, signed too
        long ago, or received before; nothing to check when the group does not sign (Kafka's herder checks
        before it forwards, and forwarding keeps the signature)."""
        if not self.signing_enabled():
            return
        signature = RequestSignature.from_headers(headers, body)
        key = self.config_store.snapshot.session_key
        if key is None:
            raise RequestRefused(503, "This worker is still starting up and has not been able to read a session key "
                                      "from the config topic yet")
        signature.check(key.key, self.config.inter_worker_verification_algorithms, _now_ms(), self._replays)

    # -- REST writes (run on the loop by BaseHerder's public methods) -------------------------------

    def _require_leader(self) -> None:
        if not self.membership.is_leader:
            raise NotLeader(self.leader_url)

    async def _put_connector_config(self, name: str, config: dict[str, Any], allow_replace: bool,
                                    initial_state: TargetState | None) -> bool:
        self._require_leader()
        config = self.check_config(name, config)
        await self._fresh_configs()
        exists = name in self.configs
        if exists and not allow_replace:
            raise Conflict(f"Connector {name} already exists")
        await self.config_store.put_connector_config(name, config, None if exists else
                                                     (initial_state or TargetState.STARTED))
        await self._fresh_configs()
        return not exists

    async def _delete_connector(self, name: str) -> None:
        self._require_leader()
        await self._fresh_configs()
        self._require(name)
        await self.config_store.remove_connector(name)
        await self._fresh_configs()

    async def _set_target_state(self, name: str, target: TargetState) -> None:
        self._require(name)
        if target == TargetState.STOPPED:
            self._require_leader()
            await self.config_store.put_task_configs(name, [])
        await self.config_store.put_target_state(name, target)
        await self._fresh_configs()

    async def _restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        self._require_leader()
        self._require(name)
        result = None
        if include_tasks or only_failed:
            result = self.connector_status(name)
            conn = result["connector"]
            if not only_failed or conn["state"] == State.FAILED.value:
                conn["state"] = State.RESTARTING.value
                await self._mark_restarting(name, None)
            for t in result["tasks"]:
                if include_tasks and (not only_failed or t["state"] == State.FAILED.value):
                    t["state"] = State.RESTARTING.value
                    await self._mark_restarting(name, t["id"])
        await self.config_store.request_restart(name, include_tasks, only_failed)
        return result

    async def _mark_restarting(self, name: str, task: int | None) -> None:
        """Write RESTARTING for a restart target (as Kafka's herder does), so no reader sees the
        pre-restart RUNNING once the request was answered; the owner writes the next state."""
        current = self.statuses.get((name, task))
        owner = current.worker_id if current is not None else self.worker_id
        generation = current.generation if current is not None else max(self.generation, 0)
        await self.status_store.put(name, task, Status(State.RESTARTING, owner, None, generation))

    async def _restart_task(self, name: str, task: int) -> None:
        status = self.task_status(name, task)
        tid = TaskId(name, task)
        if tid in self.worker.tasks:
            await self.worker.stop_tasks([tid])
            await self._start_task(tid)
            return
        self._task_elsewhere(name, task, status)
        raise NotFound(f"Task {name}-{task} is not running on any worker yet")

    def _task_elsewhere(self, name: str, task: int, status: dict[str, Any]) -> None:
        owner = status.get("worker_id")
        if owner and owner != self.worker_id:
            raise NotOwner(f"http://{owner}")

    async def _reconfigure(self, name: str) -> None:
        if not self.worker.is_running(name):
            return
        configs = await self.worker.task_configs(name)
        if configs == self.task_configs.get(name):
            return
        if self.membership.is_leader:
            await self.config_store.put_task_configs(name, configs)
            await self._fresh_configs()
        else:
            self._forward_task_configs(name, configs)

    async def _set_cluster_logger_level(self, namespace: str, level: str) -> None:
        # Any worker may write it (no forwarding); every worker, this one included, applies it when read.
        await self.config_store.put_logger_level(namespace, level)

    async def _put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Internal endpoint (POST /connectors/{c}/tasks): the leader writes task configs, each naming the
        connector's own task class."""
        self._require_leader()
        connector = self._require(name)
        for task in configs:
            self.worker.check_task_class(name, connector, task)
        await self.config_store.put_task_configs(name, configs)
        await self._fresh_configs()

    # -- a follower's task configs, handed to the leader ---------------------------------------------

    def _forward_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Off the loop: a leader in a rebalance may take a while to answer, and the loop must go on
        (it learns the new leader's URL from the next rebalance)."""
        previous = self._forwards.get(name)
        self._forwards = {n: t for n, t in self._forwards.items() if not t.done()}
        self._forwards[name] = asyncio.create_task(self._post_task_configs(name, configs, previous),
                                                   name=f"forward-task-configs-{name}")

    async def _post_task_configs(self, name: str, configs: list[dict[str, str]],
                                 previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            await self._to_leader("POST", f"/connectors/{name}/tasks", configs)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("handing the task configs of %s to the leader failed", name)

    async def _to_leader(self, method: str, path: str, body: Any, attempts: int = 30) -> None:
        """A signed internal request to the leader, tried ``attempts`` times a second apart."""
        import aiohttp

        from ..rest.internal_client import internal_session

        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        status, answer = 0, "no leader known"
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(1)
            url = self.leader_url
            if not url:
                continue
            async with internal_session(self.config, aiohttp.ClientTimeout(total=90)) as session, session.request(
                    method, url.rstrip("/") + path, data=data, headers=self._signed_headers(data),
                    params={"forward": "true"}) as resp:
                if resp.status < 300:
                    return
                status, answer = resp.status, (await resp.text())[:500]
                log.info("leader answered %d to %s %s: %s", resp.status, method, path, answer)
                if resp.status == 403:  # signed with a key the leader has replaced: read the newest
                    await self._read_session_key()
        raise LeaderUnreachable(f"{method} {path} at the leader {self.leader_url} failed: {status} {answer}", status)


    def _signed_headers(self, data: bytes) -> dict[str, str]:
        """Content-Type, and the signature with the session key when there is one (Kafka signs whenever it
        has a key; the leader checks only when the group runs the sessioned protocol). Signed afresh for
        each attempt: the leader refuses a signature it has seen."""
        headers = {"Content-Type": "application/json"}
        key = self.config_store.snapshot.session_key
        if key is not None:
            headers.update(sign(key.key, self.config.inter_worker_signature_algorithm, data, _now_ms()))
        return headers

    async def _read_session_key(self) -> None:
        try:
            await self.config_store.log.read_to_end()
        except Exception as exc:
            log.warning("could not read %s to its end for the newest session key: %s",
                        self.config.config_storage_topic, exc)


def _now_ms() -> int:
    """Wall-clock milliseconds: session keys' creation times and signing times are compared across workers."""
    return int(time.time() * 1000)


class LeaderUnreachable(ConnectException):
    """A follower's internal request (task configs, a fencing) did not succeed at the leader; ``status`` is the
    leader's last answer (0: none)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def _log_failed_write(what: str, ack: asyncio.Future[Any]) -> None:
    if not ack.cancelled() and ack.exception() is not None:
        log.error("writing the status of %s failed: %s", what, ack.exception())
