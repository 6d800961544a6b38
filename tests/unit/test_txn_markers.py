"""Transaction markers as Kafka encodes them: a control batch of one record (key: version, type; value:
version, coordinator epoch)."""

import struct

from headwater.broker.log.control import marker_batch, read_marker
from headwater.kafka.records import decode_batch_records, validate_batch


def test_a_marker_is_a_transactional_control_batch_of_the_producer() -> None:
    batch = marker_batch(7, 3, True, 5, timestamp_ms=1000)
    header = validate_batch(batch)
    assert header.is_control and header.attributes & 0x10 and header.record_count == 1
    assert (header.producer_id, header.producer_epoch) == (7, 3)
    record = decode_batch_records(batch)[1][0]
    assert struct.unpack(">hh", record.key or b"") == (0, 1)  # commit
    assert struct.unpack(">hi", record.value or b"") == (0, 5)


def test_markers_read_back() -> None:
    assert read_marker(marker_batch(1, 0, True, 9)) == (True, 9)
    assert read_marker(marker_batch(1, 0, False, 0)) == (False, 0)
