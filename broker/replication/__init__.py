"""Replication between the brokers of a ZooKeeper cluster: partition leadership as ZooKeeper holds it
(``state``), what a leader and its followers do with it (docs/CLUSTER.md). Only ``produce`` is loaded on a
single node (the APIs' hooks, never called there); the rest runs in cluster mode."""
