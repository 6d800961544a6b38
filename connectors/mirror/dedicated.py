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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["CONNECTORS", "Flow", "MirrorMakerConfig", "MirrorConfigError"]

CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
_FLOW = re.compile(r"^([^.\s>-][^\s>]*?)->([^.\s]+?)\.(.+)$")
_ALIAS = re.compile(r"^[A-Za-z0-9_-]+$")


class MirrorConfigError(ValueError):
    """An mm2.properties file that cannot be run, naming the key."""


@dataclass
class Flow:
    source: str
    target: str
    settings: dict[str, str]  # every flow's settings, then this flow's overrides
    source_cluster: dict[str, str]
    target_cluster: dict[str, str]

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def connector_configs(self) -> dict[str, dict[str, str]]:
        """The three connectors of the flow, by connector name (MM2 names them by their class)."""
        base = {**self.settings, "source.cluster.alias": self.source, "target.cluster.alias": self.target}
        base.update({f"source.cluster.{k}": v for k, v in self.source_cluster.items()})
        base.update({f"target.cluster.{k}": v for k, v in self.target_cluster.items()})
        base.pop("enabled", None)
        return {name: {**base, "name": name, "connector.class": f"org.apache.kafka.connect.mirror.{name}"}
                for name in CONNECTORS}

    def worker_settings(self) -> dict[str, str]:
        """The flow's Connect worker: the target cluster, MM2's internal topic names, a group of its own."""
        return {"bootstrap.servers": self.target_cluster["bootstrap.servers"],
                "group.id": f"mm2-{self.source}-{self.target}",
                "config.storage.topic": f"mm2-configs.{self.source}.internal",
                "offset.storage.topic": f"mm2-offsets.{self.source}.internal",
                "status.storage.topic": f"mm2-status.{self.source}.internal",
                **{k: v for k, v in self.target_cluster.items() if not k.startswith(("consumer.", "producer.",
                                                                                     "admin."))}}


@dataclass
class MirrorMakerConfig:
    clusters: list[str]
    flows: list[Flow] = field(default_factory=list)

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
        flows = []
        for (source, target), overrides in flow_props.items():
            if overrides.get("enabled", "false").strip().lower() != "true":
                continue
            if source == target:
                raise MirrorConfigError(f"{source}->{target}.enabled: a cluster cannot mirror into itself")
            if only_targets and target not in only_targets:
                continue
            for alias in (source, target):
                if "bootstrap.servers" not in cluster_props[alias]:
                    raise MirrorConfigError(f"{alias}.bootstrap.servers: the cluster {alias!r} of the flow "
                                            f"{source}->{target} has no bootstrap servers")
            flows.append(Flow(source, target, {**common, **overrides}, dict(cluster_props[source]),
                              dict(cluster_props[target])))
        unknown = [t for t in only_targets or [] if t not in cluster_props]
        if unknown:
            raise MirrorConfigError(f"--clusters: {', '.join(unknown)} not in clusters ({', '.join(clusters)})")
        return cls(clusters, sorted(flows, key=lambda f: (f.source, f.target)))
