"""MirrorMaker 2 in Headwater: MirrorSourceConnector, MirrorCheckpointConnector and
MirrorHeartbeatConnector (also under their Java names ``org.apache.kafka.connect.mirror.*``), MM2's
internal topic formats, offset translation exact to the record, RemoteClusterUtils, and MM2's
dedicated mode (``headwater mirror mm2.properties``)."""

from headwater.connect.api import hookimpl

from .checkpoint import MirrorCheckpointConnector, MirrorCheckpointTask
from .client import RemoteClusterUtils
from .heartbeat import MirrorHeartbeatConnector, MirrorHeartbeatTask
from .source import MirrorSourceConnector, MirrorSourceTask

__all__ = ["MirrorCheckpointConnector", "MirrorCheckpointTask", "MirrorHeartbeatConnector", "MirrorHeartbeatTask",
           "MirrorSourceConnector", "MirrorSourceTask", "RemoteClusterUtils"]


@hookimpl
def headwater_connectors() -> list[type]:
    return [MirrorSourceConnector, MirrorCheckpointConnector, MirrorHeartbeatConnector]
