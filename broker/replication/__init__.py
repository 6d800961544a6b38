"""Replication between the brokers of a ZooKeeper cluster: partition leadership as ZooKeeper holds it
(``state``), what a leader and its followers do with it (docs/CLUSTER.md). Loaded only in cluster mode."""
