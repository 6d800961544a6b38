"""Spool-directory sources, driven directly (no broker): a fake context stores offsets the way the
runtime does (only for acknowledged records), then calls ``commit()``."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from headwater.connect.api import (
    ConfigException,
    ConnectException,
    OffsetStorageReader,
    SchemaType,
    SourceRecord,
    SourceTaskContext,
    Struct,
)
from headwater.connect.api.data import STRING_SCHEMA
from headwater.connectors.file.spooldir import (
    SPOOLDIR_CONNECTORS,
    AbstractSpoolDirSourceConnector,
    SpoolDirCsvSourceConnector,
    SpoolDirLineDelimitedSourceConnector,
    SpoolDirSchemaLessJsonSourceConnector,
    SpoolDirSourceTask,
)

JAVA = "com.github.jcustenborder.kafka.connect.spooldir."


class FakeOffsets(OffsetStorageReader):
    def __init__(self, stored: dict[str, int] | None = None) -> None:
        self.data: dict[str, dict[str, Any]] = {}
        for name, n in (stored or {}).items():
            self.data[name] = {"offset": n}

    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        return self.data.get(partition["fileName"])

    def store(self, records: list[SourceRecord]) -> None:
        for r in records:
            self.data[r.source_partition["fileName"]] = r.source_offset


class FakeContext(SourceTaskContext):
    def __init__(self, configs: dict[str, str], reader: OffsetStorageReader) -> None:
        self.configs = configs
        self.reader = reader

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self.reader


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    out = {k: tmp_path / k for k in ("input", "finished", "error")}
    for d in out.values():
        d.mkdir()
    return out


def props(dirs: dict[str, Path], cls: type[AbstractSpoolDirSourceConnector] = SpoolDirLineDelimitedSourceConnector,
          /, **extra: Any) -> dict[str, str]:
    base = {"name": "spool", "connector.class": cls.aliases[0], "topic": "t", "input.path": str(dirs["input"]),
            "finished.path": str(dirs["finished"]), "error.path": str(dirs["error"]),
            "input.file.pattern": r".*\.(txt|json|csv)", "empty.poll.wait.ms": "200"}
    base.update({k.replace("_", "."): str(v) for k, v in extra.items()})
    return base


def write(folder: Path, name: str, text: str, age: float = 0.0) -> Path:
    """Write atomically (rename into place), optionally back-dating the mtime."""
    tmp = folder.parent / f".{name}.tmp"
    tmp.write_text(text, encoding="utf-8")
    if age:
        t = time.time() - age
        os.utime(tmp, (t, t))
    path = folder / name
    tmp.rename(path)
    return path


async def start_task(cls: type[AbstractSpoolDirSourceConnector], config: dict[str, str],
                     reader: OffsetStorageReader | None = None) -> SpoolDirSourceTask:
    connector = cls()
    errors = cls.validate(config)
    assert errors == {}, errors
    connector.start(cls.config_class.model_validate(config))
    (task_config,) = connector.task_configs(4)
    task = connector.task_class()()
    assert isinstance(task, SpoolDirSourceTask)
    task.initialize(FakeContext(task_config, reader or FakeOffsets()))
    await task.start(task_config)
    return task


async def drain(task: SpoolDirSourceTask, polls: int = 20) -> list[SourceRecord]:
    """Poll until a poll after some records comes back empty (or ``polls`` polls)."""
    out: list[SourceRecord] = []
    for _ in range(polls):
        batch = await task.poll()
        if not batch:
            if out:
                break
            continue
        out.extend(batch)
    return out


async def polled(task: SpoolDirSourceTask) -> list[SourceRecord]:
    """One poll that is expected to return records."""
    records = await task.poll()
    assert records is not None, "the poll returned nothing"
    return records


async def ack(task: SpoolDirSourceTask, records: list[SourceRecord]) -> None:
    reader = task.context.offset_storage_reader
    assert isinstance(reader, FakeOffsets)
    reader.store(records)
    await task.commit()


def run(fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(fn(), 30))


def header(record: SourceRecord, key: str) -> Any:
    h = record.header(key)
    assert h is not None, key
    return h.value


# -- connectors and configs ------------------------------------------------------------------------------------


def test_connectors_registered_with_aliases() -> None:
    from headwater.connect.plugins import PluginRegistry

    registry = PluginRegistry()
    for cls in SPOOLDIR_CONNECTORS:
        assert registry.connector(cls.aliases[0]) is cls
        assert registry.connector(cls.__name__) is cls
    assert registry.connector(JAVA + "SpoolDirCsvSourceConnector") is SpoolDirCsvSourceConnector
    assert registry.connector(JAVA + "SpoolDirSchemaLessJsonSourceConnector") is SpoolDirSchemaLessJsonSourceConnector
    assert registry.connector(JAVA + "SpoolDirLineDelimitedSourceConnector") is SpoolDirLineDelimitedSourceConnector


def test_missing_keys_are_named(dirs: dict[str, Path]) -> None:
    errors = SpoolDirLineDelimitedSourceConnector.validate({"name": "x", "connector.class": "y"})
    for key in ("topic", "input.path", "error.path", "input.file.pattern"):
        assert key in errors and "Missing required configuration" in errors[key][0]
    assert "required when cleanup.policy is MOVE" in errors["finished.path"][0]  # MOVE is the default


def test_directories_must_exist_and_differ(dirs: dict[str, Path], tmp_path: Path) -> None:
    cls = SpoolDirLineDelimitedSourceConnector
    errors = cls.validate(props(dirs) | {"input.path": str(tmp_path / "nope")})
    assert list(errors) == ["input.path"] and "does not exist" in errors["input.path"][0]
    a_file = tmp_path / "plain"
    a_file.write_text("x")
    errors = cls.validate(props(dirs) | {"error.path": str(a_file)})
    assert list(errors) == ["error.path"] and "does not exist" in errors["error.path"][0]
    errors = cls.validate(props(dirs) | {"finished.path": str(dirs["input"])})
    assert list(errors) == ["finished.path"] and "must not be 'input.path'" in errors["finished.path"][0]
    if os.geteuid() != 0:
        dirs["error"].chmod(0o500)
        try:
            errors = cls.validate(props(dirs))
            assert list(errors) == ["error.path"] and "not writable" in errors["error.path"][0]
        finally:
            dirs["error"].chmod(0o700)


def test_finished_path_required_only_when_moving(dirs: dict[str, Path]) -> None:
    cls = SpoolDirLineDelimitedSourceConnector
    no_finished = {k: v for k, v in props(dirs).items() if k != "finished.path"}
    for policy in ("MOVE", "movebydate"):
        errors = cls.validate(no_finished | {"cleanup.policy": policy})
        assert list(errors) == ["finished.path"] and "required" in errors["finished.path"][0]
    for policy in ("DELETE", "NONE"):
        assert cls.validate(no_finished | {"cleanup.policy": policy}) == {}
    errors = cls.validate(props(dirs) | {"cleanup.policy": "SHRED"})
    assert list(errors) == ["cleanup.policy"]


def test_other_invalid_values(dirs: dict[str, Path]) -> None:
    cls = SpoolDirCsvSourceConnector
    bad = {"input.file.pattern": "(", "batch.size": "0", "file.minimum.age.ms": "-1", "halt.on.error": "maybe",
           "file.charset": "klingon", "csv.separator.char": "ab"}
    errors = cls.validate(props(dirs, cls) | bad)
    assert set(errors) == set(bad)
    assert "regular expression" in errors["input.file.pattern"][0]
    config = cls.config_class.model_validate(props(dirs, cls) | {"csv.separator.char": "9"})
    assert config.csv_separator_char == 9
    config = cls.config_class.model_validate(props(dirs, cls) | {"csv.separator.char": ";"})
    assert config.csv_separator_char == ord(";")
    config = cls.config_class.model_validate(props(dirs, cls))
    assert (config.csv_separator_char, config.csv_first_row_as_header, config.batch_size) == (44, True, 1000)
    assert (config.cleanup_policy, config.halt_on_error, config.processing_file_extension) == ("MOVE", True,
                                                                                             ".PROCESSING")


def test_one_task_whatever_tasks_max(dirs: dict[str, Path]) -> None:
    connector = SpoolDirCsvSourceConnector()
    connector.start(SpoolDirCsvSourceConnector.config_class.model_validate(props(dirs, SpoolDirCsvSourceConnector)))
    configs = connector.task_configs(8)
    assert len(configs) == 1
    assert configs[0]["input.path"] == str(dirs["input"]) and configs[0]["csv.separator.char"] == "44"
    assert all(isinstance(v, str) for v in configs[0].values())


def test_task_start_rejects_bad_config(dirs: dict[str, Path], tmp_path: Path) -> None:
    async def main() -> None:
        task = SpoolDirLineDelimitedSourceConnector.task_type()
        task.initialize(FakeContext({}, FakeOffsets()))
        with pytest.raises(ConfigException) as info:
            await task.start(props(dirs) | {"input.path": str(tmp_path / "gone")})
        assert info.value.field == "input.path" and "does not exist" in str(info.value)

    run(main)


# -- reading ------------------------------------------------------------------------------------------------


def test_lines_values_headers_offsets(dirs: dict[str, Path]) -> None:
    path = write(dirs["input"], "a.txt", "one\r\ntwo\n\nfour\rfive", age=5)
    st = path.stat()

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs, batch_size=2))
        batches = [await task.poll() for _ in range(3)]
        assert [len(b or []) for b in batches] == [2, 2, 1]
        records = [r for b in batches for r in b or []]
        assert [r.value for r in records] == ["one", "two", "", "four", "five"]
        assert {(r.topic, r.value_schema, r.key, r.key_schema) for r in records} == {("t", STRING_SCHEMA, None, None)}
        modified = st.st_mtime_ns // 1_000_000
        assert [r.source_offset for r in records] == [{"offset": n, "length": st.st_size, "lastModified": modified}
                                                      for n in range(1, 6)]
        assert all(r.source_partition == {"fileName": "a.txt"} for r in records)
        r = records[2]
        assert [h.key for h in r.headers] == ["file.name", "file.path", "file.length", "file.offset",
                                              "file.last.modified"]
        assert header(r, "file.name") == "a.txt"
        assert header(r, "file.path") == str(path.absolute())
        assert header(r, "file.length") == st.st_size
        assert header(r, "file.offset") == 3
        last_modified = r.header("file.last.modified")
        assert last_modified is not None and last_modified.schema is not None
        assert last_modified.schema.name == "org.apache.kafka.connect.data.Timestamp"
        assert header(r, "file.last.modified") == dt.datetime.fromtimestamp(modified / 1000, dt.UTC)
        assert (dirs["input"] / "a.txt.PROCESSING").exists()
        task.stop()

    run(main)


def test_schemaless_json(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "e.json", '{"id": 1, "tags": ["a"]}\n\n  {"id": 2, "n": null}\n[1, 2]\n"s"\n')

    async def main() -> None:
        task = await start_task(SpoolDirSchemaLessJsonSourceConnector, props(dirs))
        records = await drain(task)
        assert [r.value for r in records] == [{"id": 1, "tags": ["a"]}, {"id": 2, "n": None}, [1, 2], "s"]
        assert all(r.value_schema is None for r in records)
        assert [r.source_offset["offset"] for r in records] == [1, 2, 3, 4]
        task.stop()

    run(main)


def test_csv_struct_from_header(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "p.csv", 'id,name,note\n1,Ann,"a, b"\n2,Bob,"two\nlines"\n\n3,,x\n')

    async def main() -> None:
        task = await start_task(SpoolDirCsvSourceConnector, props(dirs, SpoolDirCsvSourceConnector))
        records = await drain(task)
        assert len(records) == 3
        schema = records[0].value_schema
        assert schema is not None
        assert schema.type is SchemaType.STRUCT and [f.name for f in schema.fields] == ["id", "name", "note"]
        assert all(f.schema.type is SchemaType.STRING and f.schema.optional for f in schema.fields)
        assert all(isinstance(r.value, Struct) for r in records)
        assert [r.value.to_dict() for r in records] == [
            {"id": "1", "name": "Ann", "note": "a, b"}, {"id": "2", "name": "Bob", "note": "two\nlines"},
            {"id": "3", "name": "", "note": "x"}]
        assert [r.source_offset["offset"] for r in records] == [1, 2, 3]
        task.stop()

    run(main)


def test_csv_separator_and_no_header(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "t.csv", "a\tb\n1\t2\n")

    async def main() -> None:
        config = props(dirs, SpoolDirCsvSourceConnector, **{"csv.separator.char": "9",
                                                            "csv.first.row.as.header": "false"})
        task = await start_task(SpoolDirCsvSourceConnector, config)
        records = await drain(task)
        assert [r.value.to_dict() for r in records] == [{"column1": "a", "column2": "b"},
                                                        {"column1": "1", "column2": "2"}]
        task.stop()

    run(main)


def test_oldest_file_first_and_pattern(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "new.txt", "new\n", age=10)
    write(dirs["input"], "old.txt", "old\n", age=100)
    write(dirs["input"], "skip.log", "not matching\n", age=1000)
    write(dirs["input"], "x.txt.PROCESSING.txt", "odd name, but matches\n", age=50)

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs))
        seen = []
        for _ in range(20):
            batch = await task.poll()
            if batch:
                seen += [r.value for r in batch]
                await ack(task, batch)
            if len(seen) == 3:
                break
        assert seen == ["old", "odd name, but matches", "new"]
        assert (dirs["input"] / "skip.log").exists()
        assert sorted(p.name for p in dirs["finished"].iterdir()) == ["new.txt", "old.txt", "x.txt.PROCESSING.txt"]
        task.stop()

    run(main)


def test_minimum_age(dirs: dict[str, Path]) -> None:
    path = write(dirs["input"], "young.txt", "hello\n")

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector,
                                props(dirs, **{"file.minimum.age.ms": "60000", "empty.poll.wait.ms": "50"}))
        assert await task.poll() is None
        assert await task.poll() is None
        assert not (dirs["input"] / "young.txt.PROCESSING").exists()
        t = time.time() - 61
        os.utime(path, (t, t))
        assert [r.value for r in await drain(task)] == ["hello"]
        task.stop()

    run(main)


def test_minimum_age_shortens_the_idle_wait(dirs: dict[str, Path]) -> None:
    path = write(dirs["input"], "soon.txt", "ready\n")
    t = time.time() - 0.7
    os.utime(path, (t, t))

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector,
                                props(dirs, **{"file.minimum.age.ms": "1000", "empty.poll.wait.ms": "10000"}))
        started = time.monotonic()
        records = await drain(task)
        assert [r.value for r in records] == ["ready"]
        assert time.monotonic() - started < 5  # half the 10 s idle wait
        task.stop()

    run(main)


# -- cleanup after commit ---------------------------------------------------------------------------------------


def test_move_only_after_offsets_committed(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "m.txt", "1\n2\n3\n")

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs, batch_size=2))
        first = await polled(task)
        second = await polled(task)
        assert [r.value for r in first + second] == ["1", "2", "3"]
        await task.commit()  # nothing stored yet
        await ack(task, first)  # only part of the file is acknowledged
        assert (dirs["input"] / "m.txt").exists() and (dirs["input"] / "m.txt.PROCESSING").exists()
        assert await task.poll() is None  # the file is not read again while it waits
        await ack(task, second)
        assert not (dirs["input"] / "m.txt").exists() and not (dirs["input"] / "m.txt.PROCESSING").exists()
        assert (dirs["finished"] / "m.txt").read_text() == "1\n2\n3\n"
        task.stop()

    run(main)


def test_a_batch_holding_the_last_record_finishes_the_file(dirs: dict[str, Path]) -> None:
    """A file of exactly batch.size records is finished by the poll that returns them: the commit of that poll
    cleans it up, with no empty poll in between (exactly-once delivery commits only after non-empty ones). A
    value that fails to parse when read ahead fails the poll that would take it."""
    write(dirs["input"], "a.txt", "1\n2\n", age=20)
    write(dirs["input"], "b.json", '{"ok": 1}\n{"ok": 2}\n{"broken": \n', age=10)

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector,
                                props(dirs, batch_size=2, input_file_pattern=r"a\.txt"))
        records = await polled(task)
        assert [r.value for r in records] == ["1", "2"]
        await ack(task, records)
        assert os.listdir(dirs["finished"]) == ["a.txt"] and os.listdir(dirs["input"]) == ["b.json"]
        task.stop()
        task = await start_task(SpoolDirSchemaLessJsonSourceConnector, props(dirs, batch_size=2))
        records = await polled(task)
        assert [r.value for r in records] == [{"ok": 1}, {"ok": 2}]
        assert (dirs["input"] / "b.json").exists()  # the parse error is not this poll's
        with pytest.raises(ConnectException, match="Failed to parse record 3 of .*b.json"):
            await task.poll()
        assert os.listdir(dirs["error"]) == ["b.json"]
        task.stop()

    run(main)


def test_delete_policy(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "d.txt", "x\n")

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs, **{"cleanup.policy": "DELETE"}))
        records = await drain(task)
        assert (dirs["input"] / "d.txt").exists()
        await ack(task, records)
        assert os.listdir(dirs["input"]) == [] and os.listdir(dirs["finished"]) == []
        task.stop()

    run(main)


def test_none_policy_leaves_file_and_does_not_reread(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "n.txt", "x\ny\n")

    async def main() -> None:
        config = props(dirs, **{"cleanup.policy": "NONE", "empty.poll.wait.ms": "20"})
        task = await start_task(SpoolDirLineDelimitedSourceConnector, config)
        records = await drain(task)
        await ack(task, records)
        for _ in range(5):
            assert await task.poll() is None
        assert os.listdir(dirs["input"]) == ["n.txt"]
        task.stop()
        # A new run re-opens it, skips what the stored offset covers and emits nothing.
        task2 = await start_task(SpoolDirLineDelimitedSourceConnector, config, task.context.offset_storage_reader)
        for _ in range(5):
            assert await task2.poll() is None
        assert os.listdir(dirs["input"]) == ["n.txt"]
        task2.stop()

    run(main)


def test_move_by_date(dirs: dict[str, Path]) -> None:
    path = write(dirs["input"], "b.txt", "x\n")
    t = dt.datetime(2024, 2, 29, 12, 0).timestamp()
    os.utime(path, (t, t))

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs, **{"cleanup.policy": "MOVEBYDATE"}))
        await ack(task, await drain(task))
        assert (dirs["finished"] / "2024-02-29" / "b.txt").exists()
        task.stop()

    run(main)


def test_empty_file_is_cleaned_up_at_once(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "empty.txt", "")

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs, **{"empty.poll.wait.ms": "20"}))
        for _ in range(3):
            assert not await task.poll()
        assert (dirs["finished"] / "empty.txt").exists() and os.listdir(dirs["input"]) == []
        task.stop()

    run(main)


# -- errors ---------------------------------------------------------------------------------------------


def test_bad_file_moved_to_error_path_and_task_fails(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "bad.json", '{"ok": 1}\n{"broken": \n{"ok": 3}\n')

    async def main() -> None:
        task = await start_task(SpoolDirSchemaLessJsonSourceConnector, props(dirs))
        with pytest.raises(ConnectException, match="bad.json"):
            await task.poll()
        assert (dirs["error"] / "bad.json").exists()
        assert os.listdir(dirs["input"]) == []
        task.stop()

    run(main)


def test_bad_file_skipped_when_not_halting(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "1-bad.csv", "a,b\n1,2\n3\n", age=20)
    write(dirs["input"], "2-good.csv", "a,b\n5,6\n", age=10)

    async def main() -> None:
        config = props(dirs, SpoolDirCsvSourceConnector, **{"halt.on.error": "false"})
        task = await start_task(SpoolDirCsvSourceConnector, config)
        records: list[SourceRecord] = []
        for _ in range(10):
            records += await task.poll() or []
        # the record before the bad row is still delivered, then the next file is read
        assert [(r.source_partition["fileName"], r.value.to_dict()) for r in records] == [
            ("1-bad.csv", {"a": "1", "b": "2"}), ("2-good.csv", {"a": "5", "b": "6"})]
        assert os.listdir(dirs["error"]) == ["1-bad.csv"]
        await ack(task, records)
        assert os.listdir(dirs["finished"]) == ["2-good.csv"] and os.listdir(dirs["input"]) == []
        task.stop()

    run(main)


def test_bad_csv_header(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "h.csv", "a,a\n1,2\n")

    async def main() -> None:
        task = await start_task(SpoolDirCsvSourceConnector, props(dirs, SpoolDirCsvSourceConnector))
        with pytest.raises(ConnectException, match="repeated column"):
            await task.poll()
        assert os.listdir(dirs["error"]) == ["h.csv"]
        task.stop()

    run(main)


# -- restarts -----------------------------------------------------------------------------------------------


def test_resume_from_stored_offset_without_duplicates(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "r.txt", "".join(f"line{i}\n" for i in range(1, 11)))

    async def main() -> None:
        config = props(dirs, batch_size=3)
        task = await start_task(SpoolDirLineDelimitedSourceConnector, config)
        first, _lost = await polled(task), await task.poll()
        await ack(task, first)  # the second batch is lost in the crash: never acknowledged
        reader = task.context.offset_storage_reader
        task.watch.stop()  # a crash: no stop(), so the marker is left behind
        assert task.current is not None and task.current.handle is not None
        task.current.handle.close()
        assert (dirs["input"] / "r.txt.PROCESSING").exists()

        task2 = await start_task(SpoolDirLineDelimitedSourceConnector, config, reader)
        records = await drain(task2)
        assert [r.value for r in records] == [f"line{i}" for i in range(4, 11)]
        assert [r.source_offset["offset"] for r in records] == list(range(4, 11))
        assert [h.value for r in records for h in r.headers if h.key == "file.offset"] == list(range(4, 11))
        await ack(task2, records)
        assert (dirs["finished"] / "r.txt").exists() and os.listdir(dirs["input"]) == []
        task2.stop()

    run(main)


def test_fully_read_but_uncleaned_file_is_cleaned_on_restart(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "c.txt", "a\nb\n")

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs), FakeOffsets({"c.txt": 2}))
        assert not await task.poll()
        assert (dirs["finished"] / "c.txt").exists() and os.listdir(dirs["input"]) == []
        task.stop()

    run(main)


def test_a_later_file_of_the_same_name_is_read_from_the_start(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "daily.txt", "a\nb\nc\n", age=100)

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs))
        first = await drain(task)
        await ack(task, first)
        assert (dirs["finished"] / "daily.txt").exists()
        write(dirs["input"], "daily.txt", "d\n", age=50)  # a new day's file, shorter than the stored offset
        second = await drain(task)
        assert [r.value for r in second] == ["d"] and second[0].source_offset["offset"] == 1
        await task.commit()  # the stored offset {"offset": 3} belongs to the old file: not done yet
        assert (dirs["input"] / "daily.txt").exists()
        await ack(task, second)
        assert (dirs["finished"] / "daily.txt").read_text() == "d\n"
        task.stop()

    run(main)


def test_legacy_offset_without_file_identity_is_trusted(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "old.txt", "a\nb\nc\n")

    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs), FakeOffsets({"old.txt": 2}))
        records = await drain(task)
        assert [r.value for r in records] == ["c"]
        task.stop()

    run(main)


# -- file-system events ----------------------------------------------------------------------------------------


def test_watchdog_wakes_an_idle_poll(dirs: dict[str, Path]) -> None:
    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs, **{"empty.poll.wait.ms": "10000"}))
        started = time.monotonic()
        polling = asyncio.ensure_future(task.poll())
        await asyncio.sleep(0.2)
        assert not polling.done()  # waiting: nothing to read yet
        write(dirs["input"], "late.txt", "hi\n")
        records = (await asyncio.wait_for(polling, 5)) or []
        while not records:
            more: list[SourceRecord] | None = await asyncio.wait_for(task.poll(), 5)
            records = more or []
        assert [r.value for r in records] == ["hi"]
        assert time.monotonic() - started < 5  # half the 10 s idle wait
        task.stop()

    run(main)


def test_stop_ends_an_idle_poll(dirs: dict[str, Path]) -> None:
    async def main() -> None:
        task = await start_task(SpoolDirLineDelimitedSourceConnector, props(dirs, **{"empty.poll.wait.ms": "10000"}))
        polling = asyncio.ensure_future(task.poll())
        await asyncio.sleep(0.1)
        started = time.monotonic()
        task.stop()
        assert await asyncio.wait_for(polling, 5) is None
        assert time.monotonic() - started < 5  # half the 10 s idle wait

    run(main)


def test_records_are_json_friendly(dirs: dict[str, Path]) -> None:
    write(dirs["input"], "j.json", '{"a": 1}\n')

    async def main() -> None:
        task = await start_task(SpoolDirSchemaLessJsonSourceConnector, props(dirs))
        (record,) = await drain(task)
        assert json.loads(json.dumps(record.value)) == {"a": 1}
        assert json.dumps(record.source_partition) and json.dumps(record.source_offset)
        task.stop()

    run(main)
