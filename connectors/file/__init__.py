"""File connectors: FileStreamSource (tail a file), FileStreamSink, and a spool-directory source."""

from headwater.connect.api import hookimpl

from .sink import FileStreamSinkConnector, FileStreamSinkTask
from .source import FileStreamSourceConnector, FileStreamSourceTask
from .spooldir import SPOOLDIR_CONNECTORS

__all__ = ["FileStreamSinkConnector", "FileStreamSinkTask", "FileStreamSourceConnector", "FileStreamSourceTask"]


@hookimpl
def headwater_connectors() -> list[type]:
    return [FileStreamSourceConnector, FileStreamSinkConnector, *SPOOLDIR_CONNECTORS]
