"""Spool-directory sources in the spirit of jcustenborder's kafka-connect-spooldir.

Files matching ``input.file.pattern`` (a full match on the file name) that are at least
``file.minimum.age.ms`` old are read one at a time, oldest (mtime) first, while a
``<name>.PROCESSING`` marker sits next to them. Each record carries the source partition
``{"fileName": name}`` and the offset ``{"offset": n, "length": bytes, "lastModified": ms}``
(n = record number, from 1, so a stored offset n means "the first n records are done"), plus
the headers ``file.name``, ``file.path``, ``file.length``, ``file.offset`` and
``file.last.modified``. The length and modification time tell a later file of the same name
from the one the stored offset belongs to: such a file is read from its first record (an
offset without them, e.g. jcustenborder's ``{"offset": n}``, is trusted as it is).

A fully read file is cleaned up (``cleanup.policy``: MOVE to ``finished.path``, MOVEBYDATE
to ``finished.path/yyyy-MM-dd``, DELETE, or NONE) only in ``commit()``, once the stored
offset of its partition covers its last record. A crash before that leaves it in
``input.path``; the next task skips the records the stored offset covers (all of them
when the crash came after the last commit: the file is then only cleaned up). That is
at-least-once with periodic offset commits, and exactly once (``exactly.once.support``,
KIP-618) when the worker writes each offset in the transaction of its records. A file
that fails to parse is moved to ``error.path``; with ``halt.on.error`` (default) the task
then fails. New files are noticed through
file-system events (the worker's one file-watching service, ``watch.py``) as well as by rescanning every
``empty.poll.wait.ms`` (the only way when the kernel refuses more inotify watches).

One task owns an ``input.path``: on start it removes markers left by a previous run.
"""

from __future__ import annotations

import codecs
import csv
import datetime as _dt
import json
import logging
import os
import re
import shutil
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any, ClassVar

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from headwater.connect.api import (
    ConfigException,
    ConnectException,
    DataException,
    ExactlyOnceSupport,
    Header,
    Schema,
    SchemaBuilder,
    SchemaType,
    SourceConnector,
    SourceConnectorConfig,
    SourceRecord,
    SourceTask,
    Struct,
    check_path,
)
from headwater.connect.api.config import field_errors
from headwater.connect.api.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA

from .watch import FolderWatch

__all__ = [
    "SPOOLDIR_CONNECTORS", "CleanupPolicy", "SpoolDirCsvSourceConfig", "SpoolDirCsvSourceConnector",
    "SpoolDirCsvSourceTask", "SpoolDirLineDelimitedSourceConnector", "SpoolDirLineDelimitedSourceTask",
    "SpoolDirSchemaLessJsonSourceConnector", "SpoolDirSchemaLessJsonSourceTask", "SpoolDirSourceConfig",
    "SpoolDirSourceTask",
]

log = logging.getLogger(__name__)

_JAVA_PACKAGE = "com.github.jcustenborder.kafka.connect.spooldir."
TIMESTAMP_SCHEMA = Schema(SchemaType.INT64, name="org.apache.kafka.connect.data.Timestamp", version=1)
CSV_VALUE_SCHEMA_NAME = "com.github.jcustenborder.kafka.connect.model.Value"


class CleanupPolicy(StrEnum):
    NONE = "NONE"
    DELETE = "DELETE"
    MOVE = "MOVE"
    MOVEBYDATE = "MOVEBYDATE"


def _check_dir(key: str, value: str) -> str:
    if not value:
        raise ValueError(f"'{key}' must name a directory")
    path = Path(value)
    if not path.is_dir():
        raise ValueError(f"Directory for '{key}' '{value}' does not exist")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"Directory for '{key}' '{value}' is not writable")
    return value


def _same_dir(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _char_code(key: str, value: Any) -> Any:
    """Connect's int form (44 for ',', 9 for tab) or a single character."""
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        if value in ("\\t", "\t"):
            return 9
        if len(value) == 1:
            return ord(value)
        raise ValueError(f"'{key}' must be one character or its code (e.g. 44 for ',', 9 for tab)")
    return value


class SpoolDirSourceConfig(SourceConnectorConfig):
    """Keys every spool-directory connector has (AbstractSourceConnectorConfig)."""

    topic: str = Field(alias="topic", min_length=1, description="The Kafka topic to write the data to.")
    input_path: str = Field(alias="input.path", description="The directory to read files that will be processed. "
                                                            "It must exist and be writable.")
    input_file_pattern: str = Field(alias="input.file.pattern",
                                    description="Regular expression a file name must fully match to be processed.")
    error_path: str = Field(alias="error.path", description="The directory to place files in which have error(s). "
                                                            "It must exist and be writable.")
    cleanup_policy: CleanupPolicy = Field(CleanupPolicy.MOVE, alias="cleanup.policy",
                                          description="What to do with a file once it is processed: NONE leaves "
                                                      "it, DELETE removes it, MOVE moves it to finished.path, "
                                                      "MOVEBYDATE to finished.path/yyyy-MM-dd.")
    finished_path: str = Field("", alias="finished.path", validate_default=True,
                               description="The directory to place files that have been successfully processed "
                                           "(required by MOVE and MOVEBYDATE).")
    file_minimum_age_ms: int = Field(0, alias="file.minimum.age.ms", ge=0,
                                     description="The amount of time in milliseconds after the file was last "
                                                 "written to before the file can be processed.")
    batch_size: int = Field(1000, alias="batch.size", ge=1, description="The number of records returned per poll.")
    halt_on_error: bool = Field(True, alias="halt.on.error",
                                description="Fail the task when a file cannot be parsed (it is moved to "
                                            "error.path either way); false: log and go on with the next file.")
    processing_file_extension: str = Field(".PROCESSING", alias="processing.file.extension", min_length=1,
                                           description="Extension of the marker created next to the file being "
                                                       "processed.")
    empty_poll_wait_ms: int = Field(500, alias="empty.poll.wait.ms", ge=1, le=60000,
                                    description="The most a poll waits for a new file (file-system events end "
                                                "the wait early).")
    file_charset: str = Field("UTF-8", alias="file.charset", description="Character set of the files.")

    @field_validator("cleanup_policy", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("input_path")
    @classmethod
    def _input_dir(cls, value: str) -> str:
        return _check_dir("input.path", value)

    @field_validator("error_path")
    @classmethod
    def _error_dir(cls, value: str, info: ValidationInfo) -> str:
        _check_dir("error.path", value)
        if "input_path" in info.data and _same_dir(value, info.data["input_path"]):
            raise ValueError("'error.path' must not be 'input.path'")
        return value

    @field_validator("finished_path")
    @classmethod
    def _finished_dir(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("cleanup_policy") not in (CleanupPolicy.MOVE, CleanupPolicy.MOVEBYDATE):
            return value
        if not value:
            raise ValueError(f"'finished.path' is required when cleanup.policy is {info.data['cleanup_policy']}")
        _check_dir("finished.path", value)
        if "input_path" in info.data and _same_dir(value, info.data["input_path"]):
            raise ValueError("'finished.path' must not be 'input.path'")
        return value

    @model_validator(mode="after")
    def _bounded(self) -> SpoolDirSourceConfig:
        """Files are read, marked, moved and deleted in input.path and moved into the other two."""
        check_path("input.path", self.input_path, "write")
        check_path("error.path", self.error_path, "write")
        if self.cleanup_policy in (CleanupPolicy.MOVE, CleanupPolicy.MOVEBYDATE):
            check_path("finished.path", self.finished_path, "write")
        return self

    @field_validator("input_file_pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return value

    @field_validator("file_charset")
    @classmethod
    def _charset(cls, value: str) -> str:
        try:
            codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown character set {value!r}") from None
        return value


class SpoolDirCsvSourceConfig(SpoolDirSourceConfig):
    csv_first_row_as_header: bool = Field(True, alias="csv.first.row.as.header",
                                          description="The first row holds the field names; false: fields are "
                                                      "named column1, column2, ...")
    csv_separator_char: int = Field(44, alias="csv.separator.char", ge=1, lt=0x110000,
                                    description="The field separator, as a character code (44 ',', 9 tab) or "
                                                "one character.")
    csv_quote_char: int = Field(34, alias="csv.quote.char", ge=1, lt=0x110000,
                                description="The quote character, as a character code (34 '\"') or one character.")

    @field_validator("csv_separator_char", mode="before")
    @classmethod
    def _separator(cls, value: Any) -> Any:
        return _char_code("csv.separator.char", value)

    @field_validator("csv_quote_char", mode="before")
    @classmethod
    def _quote(cls, value: Any) -> Any:
        return _char_code("csv.quote.char", value)


# -- the task -------------------------------------------------------------------------------------


@dataclass
class _InputFile:
    """The file being read (or read to its end and waiting for its offsets to be committed)."""

    path: Path
    name: str
    size: int
    mtime_ns: int
    marker: Path
    partition: dict[str, Any]
    headers: tuple[Header, Header, Header, Header]  # name, path, length, last.modified
    skip: int = 0
    count: int = 0  # records parsed so far (skipped ones included)
    handle: IO[str] | None = None
    values: Iterator[tuple[Schema | None, Any]] = field(default_factory=lambda: iter(()))
    ahead: list[tuple[Schema | None, Any] | Exception] = field(default_factory=list)  # read after a full batch


class SpoolDirSourceTask(SourceTask):
    """Shared by every format; subclasses implement ``parse``."""

    config_class: ClassVar[type[SpoolDirSourceConfig]] = SpoolDirSourceConfig
    newline: ClassVar[str | None] = None  # passed to open(); csv wants ""

    def parse(self, handle: IO[str]) -> Iterator[tuple[Schema | None, Any]]:
        raise NotImplementedError

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self, config: dict[str, str]) -> None:
        try:
            self.config = self.config_class.model_validate(config)
        except ValidationError as exc:
            errors = field_errors(exc, self.config_class)
            key = next(iter(errors), None)
            raise ConfigException("; ".join(m for ms in errors.values() for m in ms), key) from None
        cfg = self.config
        self.input = Path(cfg.input_path)
        self.pattern = re.compile(cfg.input_file_pattern)
        self.ext = cfg.processing_file_extension
        self.encoding = "utf-8-sig" if codecs.lookup(cfg.file_charset).name == "utf-8" else cfg.file_charset
        self.current: _InputFile | None = None
        self.pending: dict[str, _InputFile] = {}  # read to the end, cleaned up once committed
        self.done: dict[str, tuple[int, int]] = {}  # name -> (size, mtime_ns) not to read again
        self.queue: deque[str] = deque()
        self.young_until: float | None = None
        self.stopped = False
        self._remove_stale_markers()
        self.watch = FolderWatch(self.input)
        self.watch.start()

    def stop(self) -> None:
        self.stopped = True
        watch = getattr(self, "watch", None)
        if watch is not None:
            watch.wake()
            watch.stop()
        current = getattr(self, "current", None)
        if current is not None:
            self._close(current)
            _unlink(current.marker)
            self.current = None
        for pending in getattr(self, "pending", {}).values():
            _unlink(pending.marker)  # commit() may still clean them up; otherwise the next run resumes them

    def _remove_stale_markers(self) -> None:
        with os.scandir(self.input) as it:
            stale = [entry for entry in it if entry.name.endswith(self.ext) and entry.is_file()]
        for entry in stale:
            log.warning("removing %s, left by an earlier run; its file is read again from the stored offset",
                        entry.path)
            _unlink(Path(entry.path))

    # -- polling ----------------------------------------------------------------------------------------

    async def poll(self) -> list[SourceRecord] | None:
        if self.stopped:
            return None
        if self.current is None:
            self._open_next()
            if self.current is None:
                await self.watch.wait(self._idle_wait())
                return None
        return self._read_batch() or None

    def _idle_wait(self) -> float:
        wait = self.config.empty_poll_wait_ms / 1000
        if self.young_until is not None:
            wait = min(wait, max(self.young_until - time.time(), 0.005))
        return wait

    def _scan(self) -> None:
        """Queue the eligible files, oldest first; note when the next too-young one becomes old enough."""
        now = time.time()
        min_age = self.config.file_minimum_age_ms / 1000
        self.young_until = None
        with os.scandir(self.input) as it:
            entries = list(it)
        names = {e.name for e in entries}
        found: list[tuple[int, str]] = []
        for entry in entries:
            name = entry.name
            if (name.endswith(self.ext) or name + self.ext in names or name in self.pending
                    or not self.pattern.fullmatch(name)):
                continue
            try:
                if not entry.is_file():
                    continue
                st = entry.stat()
            except OSError:
                continue
            if self.done.get(name) == (st.st_size, st.st_mtime_ns):
                continue
            if now - st.st_mtime < min_age:
                ready = st.st_mtime + min_age
                self.young_until = ready if self.young_until is None else min(self.young_until, ready)
                continue
            found.append((st.st_mtime_ns, name))
        found.sort()
        self.queue = deque(name for _, name in found)

    def _open_next(self) -> None:
        if not self.queue:
            self._scan()
        min_age = self.config.file_minimum_age_ms / 1000
        while self.queue and self.current is None:
            name = self.queue.popleft()
            path = self.input / name
            marker = path.with_name(name + self.ext)
            try:
                st = path.stat()
                if time.time() - st.st_mtime < min_age:  # written to since the scan
                    continue
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except FileExistsError:
                log.info("skipping %s: %s exists (another task is reading it)", path, marker)
                continue
            except OSError:
                continue  # gone since the scan
            last_modified = _dt.datetime.fromtimestamp(st.st_mtime_ns // 1_000_000 / 1000, _dt.UTC)
            src = _InputFile(path, name, st.st_size, st.st_mtime_ns, marker, {"fileName": name}, (
                Header("file.name", name, STRING_SCHEMA),
                Header("file.path", str(path.absolute()), STRING_SCHEMA),
                Header("file.length", st.st_size, INT64_SCHEMA),
                Header("file.last.modified", last_modified, TIMESTAMP_SCHEMA)))
            stored = self.context.offset_storage_reader.offset(src.partition)
            if stored and stored.get("offset") is not None:
                if self._same_file(src, stored):
                    src.skip = int(stored["offset"])
                else:
                    log.info("%s is not the file of that name read before (length %s, modified %s); reading it "
                             "from the start", path, stored.get("length"), stored.get("lastModified"))
            try:
                src.handle = open(path, encoding=self.encoding, newline=self.newline)  # noqa: SIM115
            except OSError as exc:
                log.error("cannot open %s: %s", path, exc)
                _unlink(marker)
                continue
            src.values = self.parse(src.handle)
            self.current = src
            log.info("reading %s%s", path, f" from record {src.skip + 1}" if src.skip else "")

    def _read_batch(self) -> list[SourceRecord]:
        src = self.current
        assert src is not None
        out: list[SourceRecord] = []
        topic, partition, limit = self.config.topic, src.partition, self.config.batch_size
        h_name, h_path, h_length, h_modified = src.headers
        size, modified = src.size, src.mtime_ns // 1_000_000
        try:
            while len(out) < limit:
                item = self._next(src)
                if item is None:
                    self._end_of_file(src)
                    break
                src.count += 1
                n = src.count
                if n <= src.skip:
                    continue
                schema, value = item
                out.append(SourceRecord(topic, value, None, None, None, schema, None,
                                        [h_name, h_path, h_length, Header("file.offset", n, INT64_SCHEMA), h_modified],
                                        partition, {"offset": n, "length": size, "lastModified": modified}))
            else:
                self._look_ahead(src)
        except Exception as exc:
            self._failed(src, exc)
        return out

    @staticmethod
    def _next(src: _InputFile) -> tuple[Schema | None, Any] | None:
        if src.ahead:
            item = src.ahead.pop()
            if isinstance(item, Exception):
                raise item
            return item
        return next(src.values, None)

    def _look_ahead(self, src: _InputFile) -> None:
        """After a full batch, read one value ahead: when the batch holds the file's last record the file is
        finished now, and cleaned up at the commit of this batch. (An empty poll is not always followed by a
        commit: with exactly-once delivery a commit needs something to commit.) A value that fails to parse
        fails where it is taken, at the next poll."""
        try:
            item = next(src.values, None)
        except Exception as exc:
            src.ahead.append(exc)
            return
        if item is None:
            self._end_of_file(src)
        else:
            src.ahead.append(item)

    # -- finishing a file ----------------------------------------------------------------------------

    def _end_of_file(self, src: _InputFile) -> None:
        self._close(src)
        self.current = None
        log.info("read %d record(s) from %s", src.count, src.path)
        if src.count <= src.skip:
            self._clean_up(src)  # nothing was emitted: the stored offset already covers the whole file
        else:
            self.pending[src.name] = src

    def _failed(self, src: _InputFile, exc: Exception) -> None:
        self._close(src)
        self.current = None
        target = Path(self.config.error_path) / src.name
        log.error("failed to parse record %d of %s; moving it to %s", src.count + 1, src.path, target, exc_info=exc)
        try:
            shutil.move(src.path, target)
        except OSError as move_exc:
            log.error("cannot move %s to %s: %s", src.path, target, move_exc)
            self.done[src.name] = (src.size, src.mtime_ns)
        _unlink(src.marker)
        if self.config.halt_on_error:
            raise ConnectException(f"Failed to parse record {src.count + 1} of {src.path} (moved to "
                                   f"{self.config.error_path}): {exc}") from exc

    async def commit(self) -> None:
        """Offsets of acknowledged records were stored: clean up the files they complete."""
        reader = self.context.offset_storage_reader
        for name, src in list(self.pending.items()):
            stored = reader.offset(src.partition)
            if stored is not None and int(stored.get("offset", -1)) >= src.count and self._same_file(src, stored):
                del self.pending[name]
                self._clean_up(src)

    @staticmethod
    def _same_file(src: _InputFile, stored: dict[str, Any]) -> bool:
        """Whether a stored offset belongs to this version of the file (legacy offsets: assume so)."""
        length, modified = stored.get("length"), stored.get("lastModified")
        return ((length is None or int(length) == src.size)
                and (modified is None or int(modified) == src.mtime_ns // 1_000_000))

    def _clean_up(self, src: _InputFile) -> None:
        policy = self.config.cleanup_policy
        try:
            if policy is CleanupPolicy.DELETE:
                log.info("deleting %s", src.path)
                src.path.unlink(missing_ok=True)
            elif policy in (CleanupPolicy.MOVE, CleanupPolicy.MOVEBYDATE):
                folder = Path(self.config.finished_path)
                if policy is CleanupPolicy.MOVEBYDATE:
                    folder = folder / time.strftime("%Y-%m-%d", time.localtime(src.mtime_ns / 1e9))
                    folder.mkdir(exist_ok=True)
                log.info("moving %s to %s", src.path, folder)
                shutil.move(src.path, folder / src.name)
            else:
                self.done[src.name] = (src.size, src.mtime_ns)
        except OSError as exc:
            log.error("cleaning up %s (%s) failed: %s", src.path, policy, exc)
            self.done[src.name] = (src.size, src.mtime_ns)
        _unlink(src.marker)

    @staticmethod
    def _close(src: _InputFile) -> None:
        if src.handle is not None:
            src.handle.close()
            src.handle = None


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot remove %s: %s", path, exc)


# -- formats ----------------------------------------------------------------------------------------


class SpoolDirLineDelimitedSourceTask(SpoolDirSourceTask):
    """Each line (``\\n``, ``\\r\\n`` or ``\\r``) is a STRING value."""

    def parse(self, handle: IO[str]) -> Iterator[tuple[Schema | None, Any]]:
        for line in handle:
            yield STRING_SCHEMA, line[:-1] if line.endswith("\n") else line


class SpoolDirSchemaLessJsonSourceTask(SpoolDirSourceTask):
    """JSON Lines: each non-blank line is one JSON value, emitted schemaless (dicts, lists, scalars)."""

    def parse(self, handle: IO[str]) -> Iterator[tuple[Schema | None, Any]]:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    yield None, json.loads(line)
                except ValueError as exc:
                    raise DataException(f"line {number} is not JSON: {exc}") from None


class SpoolDirCsvSourceTask(SpoolDirSourceTask):
    """Rows become Structs of optional STRING fields named by the header row."""

    config_class: ClassVar[type[SpoolDirSourceConfig]] = SpoolDirCsvSourceConfig
    newline: ClassVar[str | None] = ""

    def parse(self, handle: IO[str]) -> Iterator[tuple[Schema | None, Any]]:
        cfg = self.config
        assert isinstance(cfg, SpoolDirCsvSourceConfig)
        reader = csv.reader(handle, delimiter=chr(cfg.csv_separator_char), quotechar=chr(cfg.csv_quote_char))
        schema: Schema | None = None
        names: list[str] = []
        if cfg.csv_first_row_as_header:
            header = next(reader, None)
            if header is None:
                return
            names = [n.strip() for n in header]
            if any(not n for n in names) or len(set(names)) != len(names):
                raise DataException(f"the header row {header} has an empty or repeated column name")
            schema = _csv_schema(names)
        for row in reader:
            if not row:
                continue  # a blank line
            if schema is None:
                names = [f"column{i}" for i in range(1, len(row) + 1)]
                schema = _csv_schema(names)
            if len(row) != len(names):
                raise DataException(f"line {reader.line_num} has {len(row)} field(s), expected {len(names)}")
            yield schema, Struct(schema, dict(zip(names, row, strict=True)))


def _csv_schema(names: list[str]) -> Schema:
    builder = SchemaBuilder.struct().name(CSV_VALUE_SCHEMA_NAME)
    for name in names:
        builder.field(name, OPTIONAL_STRING_SCHEMA)
    return builder.build()


# -- connectors -----------------------------------------------------------------------------------------


class AbstractSpoolDirSourceConnector(SourceConnector):
    """One task per connector: files are taken in order by a single reader."""

    config_class: ClassVar[type[SpoolDirSourceConfig]] = SpoolDirSourceConfig
    task_type: ClassVar[type[SpoolDirSourceTask]] = SpoolDirSourceTask

    def start(self, config: SpoolDirSourceConfig) -> None:
        self.config = config

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport | None:
        """Exactly once: each record's offset (its number in the file, with the file's length and modification
        time) is written in the transaction of the record, and a file is cleaned up only once the committed
        offset covers its last record; a file still in input.path after a crash is read again skipping the
        records its committed offset covers (all of them, when the crash came between commit and move)."""
        return ExactlyOnceSupport.SUPPORTED

    def task_class(self) -> type[SourceTask]:
        return self.task_type

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.config.originals()]


class SpoolDirLineDelimitedSourceConnector(AbstractSpoolDirSourceConnector):
    task_type = SpoolDirLineDelimitedSourceTask
    aliases: ClassVar[tuple[str, ...]] = (_JAVA_PACKAGE + "SpoolDirLineDelimitedSourceConnector",)


class SpoolDirSchemaLessJsonSourceConnector(AbstractSpoolDirSourceConnector):
    task_type = SpoolDirSchemaLessJsonSourceTask
    aliases: ClassVar[tuple[str, ...]] = (_JAVA_PACKAGE + "SpoolDirSchemaLessJsonSourceConnector",)


class SpoolDirCsvSourceConnector(AbstractSpoolDirSourceConnector):
    config_class = SpoolDirCsvSourceConfig
    task_type = SpoolDirCsvSourceTask
    aliases: ClassVar[tuple[str, ...]] = (_JAVA_PACKAGE + "SpoolDirCsvSourceConnector",)


SPOOLDIR_CONNECTORS: list[type[SourceConnector]] = [
    SpoolDirLineDelimitedSourceConnector, SpoolDirSchemaLessJsonSourceConnector, SpoolDirCsvSourceConnector,
]
