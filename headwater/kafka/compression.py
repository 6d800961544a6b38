"""Record-batch compression codecs (attributes bits 0-2), a thin layer over cramjam.

Snappy arrives in two framings: the Java/Python clients wrap raw snappy blocks in the
xerial stream format (magic ``\\x82SNAPPY\\0``), librdkafka sends one raw block. Both
are accepted on decode; we encode xerial, which every client reads.

``decompress`` takes an optional ``max_size``: a payload that would expand past it raises
``DecompressedTooLarge`` having produced at most about that many bytes, never the whole of it (a
1 MB zstd batch of zeros expands to gigabytes). Snappy states its length up front (each xerial block
too), so it is checked before anything is expanded; gzip, lz4 and zstd are expanded into a buffer of
bounded size (grown fourfold from a first guess, or from the size an lz4 or zstd frame declares),
which cramjam fills no further than its end.
"""

from __future__ import annotations

import struct

import cramjam

__all__ = ["CODEC_NAMES", "CompressionError", "DecompressedTooLarge", "compress", "decompress"]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_FIRST_GUESS = 64 * 1024  # the smallest buffer a bounded expansion starts with
_BUFFER_FULL = "failed to write whole buffer"  # cramjam's *_into: the output buffer is too small


class CompressionError(ValueError):
    """The payload cannot be decoded with the codec its batch names."""


class DecompressedTooLarge(CompressionError):
    """The payload expands past the caller's limit (found without expanding it further)."""

    def __init__(self, codec: int, limit: int) -> None:
        super().__init__(f"{CODEC_NAMES[codec]} payload expands to more than {limit} bytes")
        self.limit = limit


def _xerial_blocks(data: bytes) -> list[bytes]:
    blocks = []
    pos = _XERIAL_HEADER.size
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise CompressionError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CompressionError("truncated xerial snappy block")
        blocks.append(data[pos : pos + size])
        pos += size
    return blocks


def _xerial_decode(data: bytes, max_size: int | None = None) -> bytes:
    blocks = _xerial_blocks(data)
    if max_size is not None and sum(cramjam.snappy.decompress_raw_len(b) for b in blocks) > max_size:
        raise DecompressedTooLarge(SNAPPY, max_size)  # each block states its length: nothing expanded
    return b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks)


def _xerial_encode(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK])))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def decompress(codec: int, data: bytes | memoryview, max_size: int | None = None) -> bytes:
    """``data`` expanded; CompressionError if it does not decode, DecompressedTooLarge if it would
    expand past ``max_size`` (None: no limit)."""
    data = bytes(data)
    try:
        if codec == NONE:
            return data
        if max_size is not None and codec in _BOUNDED:
            return _bounded(codec, data, max_size)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            if data[:8] == _XERIAL_MAGIC:
                return _xerial_decode(data, max_size)
            if max_size is not None and cramjam.snappy.decompress_raw_len(data) > max_size:
                raise DecompressedTooLarge(codec, max_size)
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


def _zstd_declared_size(data: bytes) -> int | None:
    """The content size a zstd frame header declares (librdkafka sets it; streaming writers, as Java's,
    do not), or None."""
    if len(data) < 6 or data[:4] != _ZSTD_MAGIC:
        return None
    descriptor = data[4]
    single_segment = bool(descriptor & 0x20)
    size_len = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    if not size_len:
        return None
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    if pos + size_len > len(data):
        return None
    size = int.from_bytes(data[pos : pos + size_len], "little")
    return size + 256 if size_len == 2 else size


def _lz4_declared_size(data: bytes) -> int | None:
    """The content size an lz4 frame header declares (its FLG bit 3), or None."""
    if len(data) < 14 or data[:4] != _LZ4_MAGIC or not data[4] & 0x08:
        return None
    return int.from_bytes(data[6:14], "little")


_BOUNDED = {
    GZIP: (cramjam.gzip.decompress_into, None),
    LZ4: (cramjam.lz4.decompress_into, _lz4_declared_size),
    ZSTD: (cramjam.zstd.decompress_into, _zstd_declared_size),
}


def _bounded(codec: int, data: bytes, max_size: int) -> bytes:
    """Expand into a buffer of at most ``max_size`` bytes; a payload that fills it whole is expanded again
    into one four times larger, until ``max_size`` is reached."""
    into, declared_size = _BOUNDED[codec]
    declared = declared_size(data) if declared_size is not None else None
    if declared is not None and declared > max_size:  # a bomb that says so is refused unopened
        raise DecompressedTooLarge(codec, max_size)
    size = min(max_size, declared or max(4 * len(data), _FIRST_GUESS))
    while True:
        out = bytearray(size)
        try:
            n = into(data, out)
        except Exception as exc:
            if _BUFFER_FULL not in str(exc):
                raise
            if size >= max_size:
                raise DecompressedTooLarge(codec, max_size) from None
            size = min(max_size, size * 4)
            continue
        return bytes(memoryview(out)[:n])


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
