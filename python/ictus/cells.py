"""A cell's elements decoded from bytes: the one home of ictus's element types in
Python, for both layouts a cell's bytes come in.

- packed (:func:`decode_elements`): the cell table's own layout, each element at the
  running sum of the sizes before it, as a run across hosts publishes it
  (docs/wire.md) and as the layout's ``offset`` and ``bytes`` say;
- CDR (:func:`decode_cdr`): a recording's ``cells/NAME`` and ``inputs/S/NAME``
  messages (docs/recording.md), a 4-byte encapsulation header, then each element in
  order, each value aligned to its own size counted from the byte after the header.

Standard library only::

    >>> cell = {"name": "A", "bytes": 6, "elements": [
    ...     {"name": "n", "type": "i16", "len": 1, "offset": 0, "bytes": 2},
    ...     {"name": "c", "type": "char", "len": 1, "offset": 2, "bytes": 4}]}
    >>> decode_elements(cell, b"\\x07\\x00A\\x00\\x00\\x00")
    {'n': 7, 'c': 'A'}
    >>> decode_cdr(cell, b"\\x00\\x01\\x00\\x00" + b"\\x07\\x00\\x00\\x00A\\x00\\x00\\x00")
    {'n': 7, 'c': 'A'}
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Mapping, Sequence, Tuple

__all__ = [
    "TYPES",
    "ROS2_TYPES",
    "CDR_HEADER",
    "decode_elements",
    "decode_cdr",
    "cdr_offsets",
    "ros2msg_schema",
]

#: Element types: struct code and bytes of one value (all little-endian).
TYPES: Dict[str, Tuple[str, int]] = {
    "i8": ("b", 1),
    "i16": ("h", 2),
    "i32": ("i", 4),
    "i64": ("q", 8),
    "u8": ("B", 1),
    "u16": ("H", 2),
    "u32": ("I", 4),
    "u64": ("Q", 8),
    "f32": ("f", 4),
    "f64": ("d", 8),
    "bool": ("B", 1),
    "char": ("I", 4),
}

#: Each element type's name in a recording's ros2msg schema (docs/recording.md).
ROS2_TYPES: Dict[str, str] = {
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f32": "float32",
    "f64": "float64",
    "bool": "bool",
    "char": "uint32",
}

#: The encapsulation header of a plain little-endian CDR message.
CDR_HEADER = b"\x00\x01\x00\x00"


def _char(code: int) -> str:
    # As ictus decodes it: a code that is not a Unicode scalar value is U+FFFD.
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return chr(code)


def _type(cell: Mapping[str, Any], e: Mapping[str, Any]) -> Tuple[str, int]:
    ty = e["type"]
    if ty not in TYPES:
        raise ValueError(f"element {cell['name']}.{e['name']}: unknown type {ty!r}")
    return TYPES[ty]


def _values(ty: str, code: str, n: int, buffer: bytes, at: int) -> Any:
    values: List[Any] = list(struct.unpack_from(f"<{n}{code}", buffer, at))
    if ty == "bool":
        values = [v != 0 for v in values]
    elif ty == "char":
        values = [_char(v) for v in values]
    return values[0] if n == 1 else values


def decode_elements(cell: Mapping[str, Any], buffer: bytes) -> Dict[str, Any]:
    """Decodes a cell's bytes by its layout (one entry of the layout's ``cells``, with
    each element's ``offset`` and ``bytes``).

    Returns element name -> value: an ``int``, ``float``, ``bool`` or one-character
    ``str`` (``char``) for an element of length 1, a list of them otherwise.
    :class:`ValueError` when the buffer is not the cell's size or the layout does not
    hold together.
    """
    size = cell["bytes"]
    if len(buffer) != size:
        raise ValueError(f"cell {cell['name']} is {size} bytes, got {len(buffer)}")
    out: Dict[str, Any] = {}
    for e in cell["elements"]:
        name, ty, n, at, nbytes = e["name"], e["type"], e["len"], e["offset"], e["bytes"]
        code, width = _type(cell, e)
        if n < 1 or nbytes != n * width or at < 0 or at + nbytes > size:
            raise ValueError(
                f"element {cell['name']}.{name}: {n} x {ty} in {nbytes} bytes at {at} "
                f"does not fit a cell of {size} bytes"
            )
        out[name] = _values(ty, code, n, buffer, at)
    return out


def cdr_offsets(cell: Mapping[str, Any]) -> Tuple[List[int], int]:
    """Each element's offset in a CDR message's body (after the 4-byte header), and
    the body's size: each value aligned to its own size (docs/recording.md).

    ``cell`` needs only ``name`` and ``elements`` with ``name``, ``type`` and ``len``
    (a recording's ``cells`` metadata)::

        >>> cdr_offsets({"name": "A", "elements": [
        ...     {"name": "int", "type": "i32", "len": 1},
        ...     {"name": "int12", "type": "i32", "len": 12},
        ...     {"name": "short5", "type": "i16", "len": 5},
        ...     {"name": "double", "type": "f64", "len": 1},
        ...     {"name": "char4", "type": "u8", "len": 4}]})
        ([0, 4, 52, 64, 72], 76)
    """
    offsets = []
    at = 0
    for e in cell["elements"]:
        _code, width = _type(cell, e)
        if e["len"] < 1:
            raise ValueError(f"element {cell['name']}.{e['name']}: length {e['len']}")
        at = (at + width - 1) // width * width
        offsets.append(at)
        at += width * e["len"]
    return offsets, at


def decode_cdr(
    cell: Mapping[str, Any], message: bytes, offsets: Sequence[int] = ()
) -> Dict[str, Any]:
    """Decodes a recording's CDR message of a cell by its recorded layout (``name``
    and ``elements`` with ``name``, ``type``, ``len``), as :func:`decode_elements`
    does. ``offsets`` may carry :func:`cdr_offsets`'s, computed once per cell.
    :class:`ValueError` for a message without the little-endian header or of
    another size than the layout's."""
    if not offsets:
        offsets, size = cdr_offsets(cell)
    else:
        last = cell["elements"][-1] if cell["elements"] else None
        size = offsets[-1] + TYPES[last["type"]][1] * last["len"] if last else 0
    if bytes(message[:4]) != CDR_HEADER:
        raise ValueError(
            f"cell {cell['name']}: a message starts with {CDR_HEADER.hex()} "
            f"(little-endian CDR), got {bytes(message[:4]).hex()}"
        )
    body = bytes(message[4:])
    # No padding after the last element (CdrLayout, crates/ictus-capture/src/mcap.rs).
    if len(body) != size:
        raise ValueError(
            f"cell {cell['name']}: its layout makes a {size}-byte body, the message has "
            f"{len(body)}"
        )
    out: Dict[str, Any] = {}
    for e, at in zip(cell["elements"], offsets):
        code, _width = TYPES[e["type"]]
        out[e["name"]] = _values(e["type"], code, e["len"], body, at)
    return out


def ros2msg_schema(cell: Mapping[str, Any]) -> str:
    """The ros2msg schema a recording gives a cell (``TYPE NAME`` or
    ``TYPE[LEN] NAME``, one line each)::

        >>> print(ros2msg_schema({"name": "A", "elements": [
        ...     {"name": "int", "type": "i32", "len": 1},
        ...     {"name": "c8", "type": "char", "len": 8}]}), end="")
        int32 int
        uint32[8] c8
    """
    lines = []
    for e in cell["elements"]:
        _type(cell, e)
        ty = ROS2_TYPES[e["type"]]
        lines.append(f"{ty} {e['name']}" if e["len"] == 1 else f"{ty}[{e['len']}] {e['name']}")
    return "".join(line + "\n" for line in lines)
