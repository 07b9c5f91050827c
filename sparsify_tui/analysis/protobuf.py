"""The protobuf wire format, read directly (the one reader): what lets a large ``.onnx`` be walked without
parsing, that is copying, every weight (:func:`sparsify_tui.analysis.loading.load_model` with ``map_weights``,
:mod:`sparsify_tui.profiling.loss_protoscan`). Field numbers come from ``onnx.proto3``; the encoding from the
protobuf specification ("Encoding": varints, wire types 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit)."""

from __future__ import annotations

from typing import Iterator, NamedTuple, Optional


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode a protobuf varint at ``pos`` of ``buf`` (bytes, mmap...): ``(value, next position)``.
    Raises ``IndexError`` when ``buf`` ends inside it."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


class WireField(NamedTuple):
    """One field of an encoded message: ``number``, ``wire`` type, ``start`` of its encoding (key included),
    ``value_start`` / ``end`` of its value (a length-delimited value spans ``[value_start, end)``), and ``value``:
    the decoded number of a varint field (wire type 0), else None."""

    number: int
    wire: int
    start: int
    value_start: int
    end: int
    value: Optional[int] = None


def wire_fields(buf, start: int, end: int) -> Iterator[WireField]:
    """The fields of the protobuf message encoded in ``buf[start:end]``, in order. Raises ``ValueError`` for a
    wire type other than 0, 1, 2 or 5 (groups are not used by ONNX)."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value_start = pos
            value, pos = read_varint(buf, pos)
            yield WireField(number, wire, field_start, value_start, pos, value)
        elif wire == 1:
            pos += 8
            yield WireField(number, wire, field_start, pos - 8, pos)
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            yield WireField(number, wire, field_start, pos, pos + n)
            pos += n
        elif wire == 5:
            pos += 4
            yield WireField(number, wire, field_start, pos - 4, pos)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


__all__ = ["read_varint", "WireField", "wire_fields"]
