"""What the unit, integration and browser tests and the benchmarks share (importable as ``support`` once
tests/ is on ``sys.path``: tests/conftest.py and the bench scripts put it there).

- ``brokerproc``, ``connectproc``, ``workerproc``: ``headwater broker``, ``headwater up`` and distributed
  workers as real subprocesses, ready once their log says so;
- ``pgserver``: a PostgreSQL server with logical replication for the CDC tests;
- ``hwclients``: produce and consume through each Kafka client (confluent-kafka, kafka-python, aiokafka,
  kcat); ``rawkafka``: hand-built requests on a raw socket; ``mirrorkit``: MirrorMaker flows' helpers.

The primitives every test needs (``wait_until``, ``unique``, ``free_port``) live in the plugin authors'
kit, ``headwater.testing``, and are imported from there.
"""
