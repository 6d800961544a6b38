"""``decompress`` with a limit (headwater/kafka/compression.py): every codec is refused past it, having
expanded no more than about the limit, and decodes as before below it."""

from __future__ import annotations

import os

import lz4.frame
import pytest
import zstandard

from headwater.kafka.compression import (
    GZIP,
    LZ4,
    SNAPPY,
    ZSTD,
    CompressionError,
    DecompressedTooLarge,
    compress,
    decompress,
)

DATA = os.urandom(5000) + bytes(200_000) + b"abc" * 10_000
CODECS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_the_limit_is_exact(codec: int) -> None:
    payload = compress(codec, DATA)
    assert decompress(codec, payload, len(DATA)) == DATA == decompress(codec, payload)
    with pytest.raises(DecompressedTooLarge, match=f"expands to more than {len(DATA) - 1} bytes"):
        decompress(codec, payload, len(DATA) - 1)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_a_truncated_payload_is_corrupt_not_too_large(codec: int) -> None:
    payload = compress(codec, DATA)
    with pytest.raises(CompressionError) as refused:
        decompress(codec, payload[: len(payload) // 2], len(DATA))
    assert not isinstance(refused.value, DecompressedTooLarge)


def test_frames_that_declare_their_size_are_refused_unopened() -> None:
    zstd_frame = zstandard.ZstdCompressor().compress(DATA)  # one-shot: the content size is in the header
    lz4_frame = lz4.frame.compress(DATA, store_size=True)
    for codec, payload in ((ZSTD, zstd_frame), (LZ4, lz4_frame)):
        assert decompress(codec, payload, len(DATA)) == DATA
        with pytest.raises(DecompressedTooLarge):
            decompress(codec, payload, 1000)
    # lz4 frames with linked blocks and no size, as kafka-python writes them
    linked = lz4.frame.compress(DATA, store_size=False, block_linked=True)
    assert decompress(LZ4, linked, len(DATA)) == DATA


def test_snappy_in_both_framings_is_checked_by_its_stated_lengths() -> None:
    import cramjam

    raw = bytes(cramjam.snappy.compress_raw(DATA))  # librdkafka's framing
    xerial = compress(SNAPPY, DATA)  # the Java clients'
    for payload in (raw, xerial):
        assert decompress(SNAPPY, payload, len(DATA)) == DATA
        with pytest.raises(DecompressedTooLarge):
            decompress(SNAPPY, payload, len(DATA) - 1)


def test_a_4_gib_bomb_is_refused_at_the_limit() -> None:
    zc = zstandard.ZstdCompressor().compressobj()
    bomb = b"".join([zc.compress(bytes(1 << 24)) for _ in range(256)] + [zc.flush()])  # 4 GiB of zeros
    assert len(bomb) < 200_000
    with pytest.raises(DecompressedTooLarge):
        decompress(ZSTD, bomb, 1 << 20)
