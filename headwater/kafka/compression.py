"""Record-batch compression codecs (attributes bits 0-2), a thin layer over cramjam.

Snappy arrives in two framings: the Java/Python clients wrap raw snappy blocks in the
xerial stream format (magic ``\\x82SNAPPY\\0``), librdkafka sends one raw block. Both
are accepted on decode; we encode xerial, which every client reads.
"""

from __future__ import annotations

import struct

import cramjam

__all__ = ["CODEC_NAMES", "CompressionError", "compress", "decompress"]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024


class CompressionError(ValueError):
    """The payload cannot be decoded with the codec its batch names."""


def _xerial_decode(data: bytes) -> bytes:
    out = bytearray()
    pos = _XERIAL_HEADER.size
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise CompressionError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CompressionError("truncated xerial snappy block")
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + size]))
        pos += size
    return bytes(out)


def _xerial_encode(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK])))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    data = bytes(data)
    try:
        if codec == NONE:
            return data
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            if data[:8] == _XERIAL_MAGIC:
                return _xerial_decode(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CompressionError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError and ValueError
        raise CompressionError(f"{CODEC_NAMES[codec]} payload does not decode: {exc}") from None
    raise CompressionError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes | memoryview) -> bytes:
    data = bytes(data)
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_encode(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CompressionError(f"unknown compression codec {codec}")
