"""The topics of this node: the registry (``cluster.py``), a topic and its partitions (``topic.py``),
idempotent producers' state per partition (``producer_state.py``) and the scheduled flushes, retention and
cleaning over their logs (``housekeeping.py``)."""
