"""File connectors: FileStreamSource (tail a file), FileStreamSink, and a spool-directory source."""

from headwater.connect.api import hookimpl

from .sink import FileStreamSinkConnector, FileStreamSinkTask
from .source import FileStreamSourceConnector, FileStreamSourceTask

__all__ = ["FileStreamSinkConnector", "FileStreamSinkTask", "FileStreamSourceConnector", "FileStreamSourceTask"]


def _connectors() -> list[type]:
    found: list[type] = [FileStreamSourceConnector, FileStreamSinkConnector]
    try:
        from .spooldir import SPOOLDIR_CONNECTORS
    except ImportError:  # the spool-directory source is optional while it is being built
        return found
    return found + list(SPOOLDIR_CONNECTORS)


@hookimpl
def headwater_connectors() -> list[type]:
    return _connectors()
