"""MirrorMaker 2's own properties format (``connect-mirror-maker.properties``) read into flows.

As Kafka's ``MirrorMakerConfig``:

- ``clusters = A, B`` names the clusters; ``A.bootstrap.servers`` and any other ``A.<key>`` are cluster A's
  client settings (``A.consumer.*``, ``A.producer.*``, ``A.admin.*`` for one client kind);
- ``A->B.enabled = true`` enables the flow from A to B (off by default); ``A->B.<key>`` overrides a
  setting for that flow only;
- any other key applies to every flow (``topics``, ``groups``, ``replication.factor``, ...).

Each enabled flow runs MirrorSourceConnector, MirrorCheckpointConnector and MirrorHeartbeatConnector
with ``source.cluster.alias``, ``target.cluster.alias`` and both clusters' settings as
``source.cluster.<key>`` / ``target.cluster.<key>``; its Connect worker keeps configs, offsets and
statuses in ``mm2-configs.<source>.internal``, ``mm2-offsets.<source>.internal`` and
``mm2-status.<source>.internal`` on the target cluster.

For an enabled flow A->B whose reverse is not enabled, a heartbeats-only flow B->A runs just
MirrorHeartbeatConnector on A (as MirrorMakerConfig.clusterPairs does), so that A's ``heartbeats`` topic
gets beats which A->B mirrors to B as ``A.heartbeats``; ``emit.heartbeats.enabled = false`` (everywhere,
or as ``B->A.emit.heartbeats.enabled``) turns it off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from headwater.connect.api.errors import ConfigException
from headwater.connect.kafka.security import is_security_key

__all__ = ["CONNECTORS", "Flow", "MirrorMakerConfig", "MirrorConfigError", "cluster_client_settings"]

CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
HEARTBEAT = "MirrorHeartbeatConnector"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
# Top-level keys every flow's worker takes (MirrorMakerConfig.workerConfig), besides the worker's own
# property names; group.id and bootstrap.servers stay per flow, else all flows would share one group.
_WORKER_PREFIXES = ("offset.storage.", "config.storage.", "status.storage.", "key.converter", "value.converter",
                    "header.converter", "task.", "worker.", "replication.policy.",
                    "exactly.once.source.support")  # KIP-618: every flow's worker, or B.<key> for flows into B
_CLIENT_KINDS = ("consumer.", "producer.", "admin.")
_FLOW = re.compile(r"^([^.\s>-][^\s>]*?)->([^.\s]+?)\.(.+)$")
_ALIAS = re.compile(r"^[A-Za-z0-9_-]+$")


class MirrorConfigError(ConfigException, ValueError):
    """An mm2.properties file that cannot be run, naming the key (still a ValueError, as it was)."""


@dataclass
class Flow:
    source: str
    target: str
    settings: dict[str, str]  # every flow's settings, then this flow's overrides
    source_cluster: dict[str, str]
    target_cluster: dict[str, str]
    overrides: dict[str, str] = field(default_factory=dict)  # the ``source->target.<key>`` ones alone
    heartbeats_only: bool = False  # the reverse of an enabled flow, run for MirrorHeartbeatConnector alone

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def connector_names(self) -> tuple[str, ...]:
        return (HEARTBEAT,) if self.heartbeats_only else CONNECTORS

    def connector_configs(self) -> dict[str, dict[str, str]]:
        """The three connectors of the flow, by connector name (MM2 names them by their class)."""
        base = {**self.settings, "source.cluster.alias": self.source, "target.cluster.alias": self.target}
        base.update({f"source.cluster.{k}": v for k, v in self.source_cluster.items()})
        base.update({f"target.cluster.{k}": v for k, v in self.target_cluster.items()})
        base.pop("enabled", None)
        return {name: {**base, "name": name, "connector.class": f"org.apache.kafka.connect.mirror.{name}"}
                for name in self.connector_names}

    def worker_settings(self) -> dict[str, str]:
        """The flow's Connect worker: the target cluster, MM2's internal topic names, a group of its own."""
        return {"bootstrap.servers": self.target_cluster["bootstrap.servers"],
                "group.id": f"mm2-{self.source}-{self.target}",
                "config.storage.topic": f"mm2-configs.{self.source}.internal",
                "offset.storage.topic": f"mm2-offsets.{self.source}.internal",
                "status.storage.topic": f"mm2-status.{self.source}.internal",
                **{k: v for k, v in self.target_cluster.items() if not k.startswith(_CLIENT_KINDS)}}

    def worker_config(self, worker_keys: frozenset[str], defaults: dict[str, str] | None = None) -> dict[str, str]:
        """Every setting of the flow's Connect worker: ``defaults``, then the top-level worker keys (the
        worker's own property names in ``worker_keys`` and MM2's prefixes), then the target cluster's
        settings (``worker_settings``), then this flow's own worker keys (``A->B.offset.flush.interval.ms``)."""

        def is_worker_key(key: str) -> bool:
            return key in worker_keys or key.startswith(_WORKER_PREFIXES)

        common = {k: v for k, v in self.settings.items()
                  if k not in self.overrides and is_worker_key(k) and k not in ("bootstrap.servers", "group.id")}
        own = {k: v for k, v in self.overrides.items() if is_worker_key(k) and k != "bootstrap.servers"}
        return {"key.converter": BYTES, "value.converter": BYTES, "header.converter": BYTES, **(defaults or {}),
                **common, **self.worker_settings(), **own}

    def origin(self, key: str) -> str:
        """The mm2.properties key a connector setting came from, for error messages."""
        for side, alias in (("source", self.source), ("target", self.target)):
            if key.startswith(f"{side}.cluster."):
                return f"{alias}.{key[len(side) + 9:]}"
        return f"{self.name}.{key}" if key in self.overrides else key


@dataclass
class MirrorMakerConfig:
    clusters: list[str]
    flows: list[Flow] = field(default_factory=list)  # the enabled flows
    heartbeat_flows: list[Flow] = field(default_factory=list)  # reverses of enabled flows, for heartbeats

    @classmethod
    def from_properties(cls, props: dict[str, str], only_targets: list[str] | None = None) -> MirrorMakerConfig:
        raw = props.get("clusters", "")
        clusters = [c.strip() for c in raw.split(",") if c.strip()]
        if not clusters:
            raise MirrorConfigError("clusters: name the clusters, e.g. clusters = A, B")
        for alias in clusters:
            if not _ALIAS.match(alias):
                raise MirrorConfigError(f"clusters: {alias!r} is not a valid cluster alias (letters, digits, _ and -)")
        cluster_props: dict[str, dict[str, str]] = {c: {} for c in clusters}
        flow_props: dict[tuple[str, str], dict[str, str]] = {}
        common: dict[str, str] = {}
        for key, value in props.items():
            if key == "clusters":
                continue
            m = _FLOW.match(key)
            if m:
                source, target, setting = m.group(1), m.group(2), m.group(3)
                for alias, side in ((source, "source"), (target, "target")):
                    if alias not in cluster_props:
                        raise MirrorConfigError(f"{key}: the {side} cluster {alias!r} is not in clusters "
                                                f"({', '.join(clusters)})")
                flow_props.setdefault((source, target), {})[setting] = value
                continue
            alias, dot, setting = key.partition(".")
            if dot and alias in cluster_props:
                cluster_props[alias][setting] = value
            else:
                common[key] = value
        # Top-level security.protocol, sasl.*, ssl.*: every cluster's, under its own keys (as MM2's clusterProps)
        shared = {k: common.pop(k) for k in [k for k in common if is_security_key(k)]}
        cluster_props = {alias: {**shared, **own} for alias, own in cluster_props.items()}
        unknown = [t for t in only_targets or [] if t not in cluster_props]
        if unknown:
            raise MirrorConfigError(f"--clusters: {', '.join(unknown)} not in clusters ({', '.join(clusters)})")
        enabled = set()
        for (source, target), overrides in flow_props.items():
            if _true(overrides.get("enabled", "false")):
                if source == target:
                    raise MirrorConfigError(f"{source}->{target}.enabled: a cluster cannot mirror into itself")
                enabled.add((source, target))
        # The reverse of each enabled flow, for its heartbeats alone (unless that flow runs anyway).
        beats_everywhere = _true(common.get("emit.heartbeats.enabled", "true"))
        reverse = {(t, s) for s, t in enabled if (t, s) not in enabled
                   and _true(flow_props.get((t, s), {}).get("emit.heartbeats.enabled", str(beats_everywhere)))}
        flows = []
        for source, target in sorted(enabled | reverse):
            if only_targets and target not in only_targets:
                continue
            for alias in (source, target):
                if "bootstrap.servers" not in cluster_props[alias]:
                    raise MirrorConfigError(f"{alias}.bootstrap.servers: the cluster {alias!r} of the flow "
                                            f"{source}->{target} has no bootstrap servers")
            overrides = flow_props.get((source, target), {})
            flows.append(Flow(source, target, {**common, **overrides}, dict(cluster_props[source]),
                              dict(cluster_props[target]), dict(overrides), (source, target) in reverse))
        return cls(clusters, [f for f in flows if not f.heartbeats_only], [f for f in flows if f.heartbeats_only])

    @property
    def herders(self) -> list[Flow]:
        """Every flow a process runs a worker for: the enabled ones, then the heartbeats-only ones."""
        return self.flows + self.heartbeat_flows


def _true(value: str) -> bool:
    return value.strip().lower() == "true"


def cluster_client_settings(props: dict[str, str], cluster: str, source: str | None = None) -> dict[str, str]:
    """Client settings for reaching ``cluster`` as a consumer (its ``<cluster>.*`` keys, with
    ``<cluster>.consumer.*`` winning), plus the replication policy of the flow ``source->cluster`` (for the
    name of its checkpoints topic), from an mm2.properties file."""
    clusters = [c.strip() for c in props.get("clusters", "").split(",") if c.strip()]
    if cluster not in clusters:
        raise MirrorConfigError(f"clusters: {cluster!r} is not one of the clusters ({', '.join(clusters)})")
    mine = {k[len(cluster) + 1:]: v for k, v in props.items() if k.startswith(cluster + ".")}
    shared = {k: v for k, v in props.items() if is_security_key(k)}
    out = {**shared, **{k: v for k, v in mine.items() if not k.startswith(_CLIENT_KINDS)}}
    out.update({k[len("consumer."):]: v for k, v in mine.items() if k.startswith("consumer.")})
    policy_keys = ("replication.policy.class", "replication.policy.separator")
    out.update({k: props[k] for k in policy_keys if k in props})
    if source is not None:
        flow = f"{source}->{cluster}."
        out.update({k: props[flow + k] for k in policy_keys if flow + k in props})
    return out
