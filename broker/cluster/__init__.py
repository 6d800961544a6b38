"""Cluster membership on ZooKeeper: broker registration, controller election and the live brokers that
Metadata answers with (docs/CLUSTER.md). Loaded only when ``zookeeper.connect`` is set."""
