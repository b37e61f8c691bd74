"""The decoders of ictus.live (ictus_zenoh before 0.2) against bytes built by hand
from docs/wire.md.

Standard library only (no Zenoh): run with ``python -m unittest discover python/tests``
from the repository root.
"""

import doctest
import struct
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ictus.live  # noqa: E402
import ictus_zenoh  # noqa: E402
from ictus.live import (  # noqa: E402
    END_FRAME,
    NO_STOP,
    Publication,
    check_layout,
    decode_elements,
    decode_publication,
    decode_tick,
    merge_publication,
)

# docs/wire.md's example publication: host 1, clock offset -1234 ns, stamp
# 987654321 ns, two ranges: 4 bytes at 0 (i32 7) and 2 bytes at 852 (i16 7).
EXAMPLE_PUBLICATION = bytes.fromhex(
    "0100 2efbffffffffffff b168de3a00000000 0200"
    " 00000000 04000000 07000000"
    " 54030000 02000000 0700"
)
# docs/wire.md's example tick: frame 422, deadline 10 s, sent 12.345 us later,
# state RUN -> RUN from frame 0, stop frame 1251.
EXAMPLE_TICK = bytes.fromhex(
    "a601000000000000 00e40b5402000000 39140c5402000000"
    " 0000000000000202 e304000000000000"
)


def element(name, ty, n, offset, width):
    return {"name": name, "type": ty, "len": n, "offset": offset, "bytes": n * width}


class PublicationTests(unittest.TestCase):
    def test_the_docs_example_reads_field_by_field(self):
        sut = decode_publication(EXAMPLE_PUBLICATION)
        self.assertEqual(len(EXAMPLE_PUBLICATION), 42)
        self.assertEqual((sut.host, sut.offset_ns, sut.stamp_ns), (1, -1234, 987654321))
        self.assertEqual(
            sut.ranges, ((0, struct.pack("<i", 7)), (852, struct.pack("<h", 7)))
        )
        self.assertEqual(sut.stamp_on_main_clock(), 987654321 + 1234)

    def test_initial_values_have_no_stamp(self):
        sut = decode_publication(struct.pack("<HqQH", 0, 0, 0, 0))
        self.assertEqual(sut.ranges, ())
        self.assertIsNone(sut.stamp_on_main_clock())

    def test_a_publication_cut_anywhere_is_refused(self):
        for cut in range(len(EXAMPLE_PUBLICATION)):
            with self.subTest(cut=cut), self.assertRaises(ValueError):
                decode_publication(EXAMPLE_PUBLICATION[:cut])

    def test_a_byte_after_the_last_range_is_refused(self):
        with self.assertRaises(ValueError):
            decode_publication(EXAMPLE_PUBLICATION + b"\x00")

    def test_a_range_longer_than_what_follows_is_refused(self):
        lying = struct.pack("<HqQH", 1, 0, 1, 1) + struct.pack("<II", 0, 100) + b"\x01" * 8
        with self.assertRaisesRegex(ValueError, "cut"):
            decode_publication(lying)

    def test_more_ranges_announced_than_present_is_refused(self):
        lying = struct.pack("<HqQH", 1, 0, 1, 3) + struct.pack("<II", 0, 1) + b"\x01"
        with self.assertRaises(ValueError):
            decode_publication(lying)


class TickTests(unittest.TestCase):
    def test_the_docs_example_reads_field_by_field(self):
        sut = decode_tick(EXAMPLE_TICK)
        self.assertEqual(sut.frame, 422)
        self.assertEqual(sut.deadline_ns, 10_000_000_000)
        self.assertEqual(sut.sent_ns - sut.deadline_ns, 12_345)
        self.assertEqual((sut.state_previous, sut.state_next, sut.state_from_frame), (2, 2, 0))
        self.assertEqual(sut.stop, 1251)
        self.assertFalse(sut.is_end)

    def test_the_state_word_splits_into_previous_next_and_frame(self):
        word = (1 << 56) | (3 << 48) | 0xABCDEF
        sut = decode_tick(struct.pack("<5Q", 0, 0, 0, word, NO_STOP))
        fields = (sut.state_previous, sut.state_next, sut.state_from_frame)
        self.assertEqual(fields, (1, 3, 0xABCDEF))
        self.assertEqual(sut.stop, 2**64 - 1)

    def test_the_last_tick_carries_the_end_frame(self):
        self.assertTrue(decode_tick(struct.pack("<5Q", END_FRAME, 1, 1, 0, 9)).is_end)

    def test_anything_but_40_bytes_is_refused(self):
        for n in (0, 8, 39, 41, 80):
            with self.subTest(n=n), self.assertRaises(ValueError):
                decode_tick(bytes(n))


# One element of every type, then arrays: 1+2+4+8 + 1+2+4+8 + 4+8 + 1+4 = 47 bytes,
# then [i16; 3] (6) and [char; 2] (8) and [bool; 2] (2): 63 bytes.
ALL_TYPES = {
    "name": "T",
    "bytes": 63,
    "elements": [
        element("i8", "i8", 1, 0, 1),
        element("i16", "i16", 1, 1, 2),
        element("i32", "i32", 1, 3, 4),
        element("i64", "i64", 1, 7, 8),
        element("u8", "u8", 1, 15, 1),
        element("u16", "u16", 1, 16, 2),
        element("u32", "u32", 1, 18, 4),
        element("u64", "u64", 1, 22, 8),
        element("f32", "f32", 1, 30, 4),
        element("f64", "f64", 1, 34, 8),
        element("bool", "bool", 1, 42, 1),
        element("char", "char", 1, 43, 4),
        element("shorts", "i16", 3, 47, 2),
        element("chars", "char", 2, 53, 4),
        element("flags", "bool", 2, 61, 1),
    ],
}


def all_types_bytes():
    return (
        struct.pack("<b", -8)
        + struct.pack("<h", -300)
        + struct.pack("<i", -70000)
        + struct.pack("<q", -(2**40))
        + bytes([200])
        + struct.pack("<H", 60000)
        + struct.pack("<I", 4_000_000_000)
        + struct.pack("<Q", 2**63)
        + struct.pack("<f", 1.5)
        + struct.pack("<d", -0.25)
        + bytes([7])
        + struct.pack("<I", ord("é"))
        + struct.pack("<3h", 1, -2, 3)
        + struct.pack("<2I", 0xD800, 0x110000)
        + bytes([0, 1])
    )


class ElementTests(unittest.TestCase):
    def test_every_type_decodes_little_endian_at_its_offset(self):
        sut = decode_elements(ALL_TYPES, all_types_bytes())
        self.assertEqual(
            sut,
            {
                "i8": -8,
                "i16": -300,
                "i32": -70000,
                "i64": -(2**40),
                "u8": 200,
                "u16": 60000,
                "u32": 4_000_000_000,
                "u64": 2**63,
                "f32": 1.5,
                "f64": -0.25,
                "bool": True,
                "char": "é",
                "shorts": [1, -2, 3],
                # Not Unicode scalar values: U+FFFD, as ictus decodes them.
                "chars": ["\ufffd", "\ufffd"],
                "flags": [False, True],
            },
        )

    def test_a_buffer_not_of_the_cells_size_is_refused(self):
        for n in (0, 62, 64):
            with self.subTest(n=n), self.assertRaises(ValueError):
                decode_elements(ALL_TYPES, bytes(n))

    def test_a_layout_that_does_not_hold_together_is_refused(self):
        for bad in (
            element("x", "i32", 1, 2, 4),  # past the end of a 4-byte cell
            {"name": "x", "type": "i32", "len": 1, "offset": 0, "bytes": 2},  # wrong size
            element("x", "f16", 1, 0, 2),  # no such type
        ):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                decode_elements({"name": "C", "bytes": 4, "elements": [bad]}, bytes(4))


class MergeTests(unittest.TestCase):
    CELL = {
        "name": "A",
        "bytes": 8,
        "elements": [element("a", "i32", 1, 0, 4), element("b", "i32", 1, 4, 4)],
    }

    def test_two_writers_ranges_make_the_cell(self):
        buffer = bytearray(8)
        merge_publication(buffer, Publication(1, 0, 5, ((0, struct.pack("<i", 11)),)), [[0, 4]])
        merge_publication(buffer, Publication(2, 0, 5, ((4, struct.pack("<i", 22)),)), [[4, 8]])
        self.assertEqual(decode_elements(self.CELL, buffer), {"a": 11, "b": 22})

    def test_a_range_past_the_cell_or_outside_the_claims_changes_nothing(self):
        buffer = bytearray(8)
        past = Publication(1, 0, 5, ((0, b"\x01" * 4), (6, b"\x02" * 4)))
        other = Publication(1, 0, 5, ((0, b"\x01" * 4), (4, b"\x02" * 4)))
        with self.assertRaisesRegex(ValueError, "past"):
            merge_publication(buffer, past)
        with self.assertRaisesRegex(ValueError, "claims"):
            merge_publication(buffer, other, [[0, 4]])
        self.assertEqual(buffer, bytearray(8))


class LayoutTests(unittest.TestCase):
    LAYOUT = {
        "wire": 1,
        "run": "r",
        "hosts": ["h1", "h2"],
        "tick_ns": 4_000_000,
        "byte_order": "little-endian",
        "cells": [MergeTests.CELL],
    }

    def test_version_1_of_the_run_asked_for_is_taken(self):
        self.assertIs(check_layout(self.LAYOUT, "r"), self.LAYOUT)

    def test_another_version_run_or_shape_is_refused(self):
        for change in (
            {"wire": 2},
            {"byte_order": "big-endian"},
            {"run": "other"},
            {"cells": [{"name": "A"}]},
            {"hosts": None},
        ):
            with self.subTest(change=change), self.assertRaises(ValueError):
                check_layout({**self.LAYOUT, **change}, "r")
        with self.assertRaises(ValueError):
            check_layout([1, 2], "r")


class FormerNameTests(unittest.TestCase):
    def test_ictus_zenoh_is_ictus_live_under_its_former_name(self):
        for name in ictus.live.__all__:
            with self.subTest(name=name):
                self.assertIs(getattr(ictus_zenoh, name), getattr(ictus.live, name))


def load_tests(loader, tests, ignore):
    # The module's own examples.
    tests.addTests(doctest.DocTestSuite(ictus.live))
    return tests


if __name__ == "__main__":
    unittest.main()
