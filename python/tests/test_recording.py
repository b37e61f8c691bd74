"""ictus.cells against bytes built by hand from docs/recording.md, and what opening a
recording says without the `mcap` package. Standard library only: the recordings
themselves are read in test_recording_mcap.py, by this Python where it has `mcap`,
else (from here) by one that has: ICTUS_PYTHON_MCAP or target/py-mcap/bin/python."""

import os
import subprocess
import struct
import sys
import unittest

from samples import DATA, HERE, has, python_with_mcap, skip

import ictus
from ictus.cells import cdr_offsets, decode_cdr, ros2msg_schema
from ictus.recording import open_recording

# docs/recording.md's example cell.
DOC_CELL = {
    "name": "A",
    "elements": [
        {"name": "int", "type": "i32", "len": 1},
        {"name": "int12", "type": "i32", "len": 12},
        {"name": "short5", "type": "i16", "len": 5},
        {"name": "double", "type": "f64", "len": 1},
        {"name": "char4", "type": "u8", "len": 4},
    ],
}


class CdrTests(unittest.TestCase):
    def test_the_docs_cell_has_the_docs_offsets(self):
        # "int at body offset 0, int12 at 4, short5 at 52, double at 64 (62 rounded up
        # to 8), char4 at 72: the message is 4 + 76 bytes."
        self.assertEqual(cdr_offsets(DOC_CELL), ([0, 4, 52, 64, 72], 76))

    def test_a_message_built_by_hand_decodes_by_name(self):
        body = (
            struct.pack("<i", -7)
            + struct.pack("<12i", *range(12))
            + struct.pack("<5h", *range(5))
            + b"\x00\x00"  # padding to 64
            + struct.pack("<d", 2.5)
            + b"abcd"
        )
        sut = decode_cdr(DOC_CELL, b"\x00\x01\x00\x00" + body)
        self.assertEqual(
            sut,
            {"int": -7, "int12": list(range(12)), "short5": list(range(5)), "double": 2.5, "char4": list(b"abcd")},
        )

    def test_bools_and_chars_decode_as_python_values(self):
        cell = {"name": "X", "elements": [{"name": "on", "type": "bool", "len": 2}, {"name": "c", "type": "char", "len": 2}]}
        message = b"\x00\x01\x00\x00" + b"\x01\x00" + b"\x00\x00" + struct.pack("<2I", ord("é"), 0xD800)
        self.assertEqual(decode_cdr(cell, message), {"on": [True, False], "c": ["é", "\ufffd"]})

    def test_a_message_of_another_size_or_header_is_refused(self):
        good = b"\x00\x01\x00\x00" + bytes(76)
        self.assertEqual(decode_cdr(DOC_CELL, good)["int"], 0)
        for bad in (good[:-1], good + b"\x00", b"\x00\x00\x00\x00" + bytes(76)):
            with self.subTest(size=len(bad)), self.assertRaises(ValueError):
                decode_cdr(DOC_CELL, bad)

    def test_the_schema_is_the_docs(self):
        self.assertEqual(
            ros2msg_schema(DOC_CELL),
            "int32 int\nint32[12] int12\nint16[5] short5\nfloat64 double\nuint8[4] char4\n",
        )


class RecordingsTests(unittest.TestCase):
    def test_the_recordings_are_read_by_a_python_with_mcap(self):
        if has("mcap.reader"):
            raise unittest.SkipTest("this Python has mcap: test_recording_mcap.py runs here")
        python = python_with_mcap()
        if python is None:
            skip(
                self,
                "no Python with mcap: recordings are not read (pip install './python[mcap]', "
                "set ICTUS_PYTHON_MCAP, or make target/py-mcap as .ci/run does)",
            )
        out = subprocess.run(
            [python, "-m", "unittest", "discover", "-s", str(HERE), "-p", "test_recording_mcap.py"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        self.assertEqual(out.returncode, 0, f"{python}: {out.stderr}")
        ran = [line for line in out.stderr.splitlines() if line.startswith("Ran ")]
        print(f"\ntest_recording_mcap.py with {python}: {ran[-1] if ran else '?'}, OK", file=sys.stderr)


class WithoutMcapTests(unittest.TestCase):
    def test_without_mcap_the_error_names_what_to_install(self):
        if has("mcap.reader"):
            skip(self, "mcap is installed here: the message for its absence is checked where it is not")
        with self.assertRaises(ictus.MissingPart) as caught:
            open_recording(DATA / "run.mcap")
        self.assertEqual(
            str(caught.exception),
            "reading MCAP recordings needs the mcap package (not installed): pip install 'mcap==1.6.0', "
            "or from the ictus repository pip install './python[mcap]'",
        )
        self.assertIsInstance(caught.exception, ImportError)


if __name__ == "__main__":
    unittest.main()
