"""The streaming fast path (changes written from pgoutput's bytes) against the record path, end to end: the
same changes captured by two connectors on one database, one with JsonConverter alone (the fast path), one
with a transform that keeps every record (Connect records through the converter), give the same keys and
values but for the processing times and the topic prefix."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from support.connectproc import ConnectProcess, TopicReader, module_connect, unique
from test_postgres_cdc import TYPES_DDL, TYPES_ROW, source

pytestmark = pytest.mark.timeout(180)

connect = module_connect("postgres-streamed")
#: a transform that keeps every record: its connector takes the record path (no encoded path with transforms)
KEEP_ALL = {"transforms": "keep", "transforms.keep.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.keep.predicate": "never", "predicates": "never",
            "predicates.never.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicates.never.pattern": "no-such-topic"}
BIG = "x" * 20_000  # stored out of line (TOAST): an update that leaves it alone does not send it


@pytest.fixture
def database(postgres) -> str:
    return postgres.new_database("streamed")


def _normalized(raw: bytes | None, prefix: str) -> Any:
    """A key or value as JSON with the connector's prefix replaced and the processing times left out."""
    if raw is None:
        return None
    value = json.loads(raw.decode().replace(prefix, "PREFIX"))
    payload = value.get("payload", value) if isinstance(value, dict) else value
    if isinstance(payload, dict):
        for name in ("ts_ms", "ts_us", "ts_ns"):
            if "source" in payload:
                payload.pop(name, None)
    return value


@pytest.mark.parametrize("schemas", ["true", "false"])
def test_streamed_changes_match_the_record_path(connect: ConnectProcess, postgres, database: str,
                                                schemas: str) -> None:
    """Every mapped type, NULLs, an unchanged TOAST value, updates (and a key change), deletes and truncates,
    in multi-row and single-row transactions: the fast path's events equal the record path's."""
    fast, slow = unique("fast"), unique("slow")
    settings = {"value.converter.schemas.enable": schemas, "snapshot.mode": "no_data", "skipped.operations": "none"}
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute(TYPES_DDL)
        db.execute("CREATE TABLE docs (id int PRIMARY KEY, body text, n int NOT NULL, note varchar(20))")
        db.execute("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")  # out of line, not compressed
        publication = f"pub_{uuid.uuid4().hex[:6]}"
        for prefix, extra in ((fast, {}), (slow, KEEP_ALL)):
            connect.create(prefix, source(postgres, database, prefix, **{"publication.name": publication,
                                                                          **settings, **extra}))
        for prefix in (fast, slow):
            connect.wait_state(prefix, "RUNNING", tasks=1, timeout=60)
        with TopicReader(connect.bootstrap, f"{fast}.public.docs") as a, \
                TopicReader(connect.bootstrap, f"{slow}.public.docs") as b:
            db.execute("INSERT INTO docs VALUES (0, 'warm-up', 0, NULL)")  # both slots stream: the changes follow
            assert len(a.read(1, 60)) == 1 and len(b.read(1, 60)) == 1
        with db.transaction():  # a multi-row transaction: every type, then a row of NULLs
            for i in range(1, 4):
                db.execute(f"INSERT INTO typed VALUES ({TYPES_ROW})", (i,))
            db.execute("INSERT INTO typed (id) VALUES (4)")
            db.execute("INSERT INTO docs VALUES (1, %s, 1, 'a \"quoted\" \\ note'), (2, 'short', 2, NULL)", (BIG,))
        db.execute("INSERT INTO docs VALUES (3, 'caf\u00e9 \t tab', 3, E'line\\nbreak')")  # single-row transactions
        db.execute("UPDATE docs SET n = 10 WHERE id = 1")  # body unchanged and TOASTed: not in the message
        db.execute("UPDATE docs SET note = 'moved', id = 5 WHERE id = 2")  # a key change: delete, tombstone, create
        db.execute("UPDATE typed SET i2 = NULL, t = 'changed' WHERE id = 1")
        db.execute("DELETE FROM docs WHERE id = 3")
        db.execute("TRUNCATE docs")
        db.execute("INSERT INTO docs VALUES (6, 'after the truncate', 6, 'x')")
        counts = {"docs": 2 + 1 + 1 + 3 + 2 + 1 + 1, "typed": 4 + 1}
        got: dict[str, list[list[tuple[Any, Any]]]] = {}
        for table, count in counts.items():
            got[table] = []
            for prefix in (fast, slow):
                with TopicReader(connect.bootstrap, f"{prefix}.public.{table}") as reader:
                    msgs = reader.read(count + (1 if table == "docs" else 0), 60)
                got[table].append([(_normalized(m.key, prefix), _normalized(m.value, prefix)) for m in msgs])
        for prefix in (fast, slow):
            connect.ok("DELETE", f"/connectors/{prefix}", expect=204)
    for table, (fast_events, slow_events) in got.items():
        assert len(fast_events) == counts[table] + (1 if table == "docs" else 0), (table, fast_events)
        assert fast_events == slow_events, table
    values: list[Any] = [v.get("payload", v) if v else None for _, v in got["docs"][0]]
    ops = [v["op"] if v else None for v in values]
    assert ops == ["c", "c", "c", "c", "u", "d", None, "c", "d", None, "t", "c"], ops
    assert values[4]["after"]["body"] == "__debezium_unavailable_value"  # the unchanged TOAST value
    assert values[1]["after"] == {"id": 1, "body": BIG, "n": 1, "note": 'a "quoted" \\ note'}
    typed = [v.get("payload", v) for _, v in got["typed"][0]]
    assert typed[3]["after"]["i2"] is None and typed[4]["after"]["i2"] is None and typed[4]["op"] == "u"
