"""ictus.recording against recordings ictus wrote: the committed run.mcap and, with
ICTUS set, one made now, cell by cell, checked against the run's own record. Needs the
`mcap` package: without it here, test_recording.py runs this file with a Python
that has it (ICTUS_PYTHON_MCAP, or target/py-mcap/bin/python, which .ci/run makes
with mcap==1.6.0 pinned)."""

import shutil
import tempfile
import unittest
from pathlib import Path

from samples import DATA, fresh, has

import ictus
from ictus.recording import RecordingError, open_recording


def setUpModule():
    # Not listed as skipped: test_recording.py runs this file with a Python that has
    # mcap, or says that none does.
    if not has("mcap.reader"):
        raise unittest.SkipTest("mcap is not importable by this Python: test_recording.py runs this file with one that has it")


class RecordingChecks:
    def check_stress_recording(self, path, run_json):
        """What holds for any recording of the stress example with its record."""
        sut = open_recording(path)
        info = sut.info
        self.assertEqual(info.format, 1)
        self.assertEqual(info.subsystems, ["A", "B", "C"])
        self.assertEqual(info.recorded, ["A", "B", "C"])
        self.assertEqual(info.tick_ns, 10_000_000)
        self.assertIsNotNone(sut.end, "the recording ended")
        self.assertEqual(set(sut.end.dropped.values()), {0})
        self.assertEqual(sut.channels["cells/A"], ("ictus/A", "ros2msg", "cdr"))
        self.assertEqual(sut.channels["frames"], ("ictus/frame", "jsonschema", "json"))
        self.assertEqual(sum(sut.message_counts.values()), sut.end.records)

        cells = list(sut.cells())
        self.assertEqual(len(cells), sum(n for t, n in sut.message_counts.items() if t.startswith("cells/")))
        element_names = [e["name"] for e in info.cell("A")["elements"]]
        for m in cells:
            self.assertEqual(list(m.values), element_names)
            self.assertEqual(len(m.values["int200"]), 200)
            # The ring: each subsystem writes the next cell, one more than it read.
            self.assertEqual(m.cell, "ABC"[(m.slot + 1) % 3])
            self.assertEqual(m.subsystem, "ABC"[m.slot])
            self.assertLessEqual(m.values["int"], m.frame + 1)
        # What each subsystem read is the latest publication before its frame (zeros
        # before the first).
        latest = {}
        inputs = list(sut.inputs())
        self.assertTrue(inputs)
        by_frame = sorted(cells + inputs, key=lambda m: (m.frame, m.kind == "cells"))
        for m in by_frame:
            if m.kind == "cells":
                latest[m.cell] = m.values
            else:
                self.assertEqual(m.cell, m.subsystem)
                expected = latest.get(m.cell)
                if expected is None:
                    self.assertEqual(m.values["int"], 0)
                else:
                    self.assertEqual(m.values, expected, f"{m.subsystem} at frame {m.frame}")
        # The run's own record agrees: its final value is the largest counter recorded.
        record = ictus.load_record(run_json)
        stress = record.measurements_named("stress")[0].metrics
        self.assertEqual(max(m.values["int"] for m in cells), stress["final_value"])

        frames = sut.rows("frames")
        self.assertEqual(len(frames), sut.message_counts["frames"])
        self.assertEqual({f["subsystem"] for f in frames}, {"A", "B", "C"})
        for f in frames:
            self.assertEqual(f["lateness_ns"], f["woke_ns"] - f["deadline_ns"])
        self.assertEqual(sut.rows("events")[0]["kind"], "state")
        rows = sut.rows("cells/B")
        self.assertEqual(list(rows[0])[:4], ["frame", "subsystem", "slot", "log_time_ns"])
        self.assertEqual(len(rows), sut.message_counts["cells/B"])
        if has("pandas"):
            self.assertEqual(len(sut.to_pandas("frames")), len(frames))
        return sut, cells


class CommittedRecordingTests(unittest.TestCase, RecordingChecks):
    def test_the_committed_recording_decodes_cell_by_cell(self):
        sut, cells = self.check_stress_recording(DATA / "run.mcap", DATA / "run.json")
        # Nothing was lost in it: the counters grew by one a frame.
        self.assertEqual([m.values["int"] for m in cells], [m.frame + 1 for m in cells])
        self.assertEqual(sut.info.run, "pysample")
        self.assertIn('name = "pysample"', sut.info.schedule)

    def test_one_cell_or_one_subsystem_can_be_asked_for(self):
        sut = open_recording(DATA / "run.mcap")
        self.assertEqual({m.cell for m in sut.cells("B")}, {"B"})
        self.assertEqual({(m.subsystem, m.cell) for m in sut.inputs("C")}, {("C", "C")})
        with self.assertRaisesRegex(KeyError, "no cell 'Q' .*A, B, C"):
            list(sut.cells("Q"))


class FreshRecordingTests(unittest.TestCase, RecordingChecks):
    @classmethod
    def setUpClass(cls):
        cls.made = fresh(f"{__name__}.{cls.__name__}")

    def test_a_recording_made_now_decodes_cell_by_cell(self):
        self.check_stress_recording(self.made["recording"], self.made["run"])


class RefusalTests(unittest.TestCase):
    def setUp(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.dir = Path(d.name)

    def test_a_file_that_is_not_mcap_is_refused_in_words(self):
        path = self.dir / "x.mcap"
        shutil.copy(DATA / "run.json", path)
        with self.assertRaisesRegex(RecordingError, r"x\.mcap: not an MCAP file"):
            open_recording(path)

    def test_a_cut_recording_is_refused(self):
        path = self.dir / "cut.mcap"
        path.write_bytes((DATA / "run.mcap").read_bytes()[:-100])
        with self.assertRaisesRegex(RecordingError, r"cut\.mcap: "):
            open_recording(path)

    def test_an_mcap_file_of_another_tool_is_refused(self):
        from mcap.writer import Writer

        path = self.dir / "other.mcap"
        with open(path, "wb") as f:
            w = Writer(f)
            w.start()
            w.add_metadata("other", {"k": "v"})
            w.finish()
        with self.assertRaisesRegex(RecordingError, "without ictus metadata"):
            open_recording(path)

    def test_a_schema_that_disagrees_with_the_layout_is_refused(self):
        from mcap.reader import make_reader
        from mcap.writer import Writer

        with open(DATA / "run.mcap", "rb") as f:
            meta = {m.name: dict(m.metadata) for m in make_reader(f).iter_metadata()}
        path = self.dir / "lying.mcap"
        with open(path, "wb") as f:
            w = Writer(f)
            w.start()
            w.add_metadata("ictus", meta["ictus"])
            schema = w.register_schema("ictus/A", "ros2msg", b"int64 int\n")
            channel = w.register_channel("cells/A", "cdr", schema)
            w.add_message(channel, 0, b"\x00\x01\x00\x00" + bytes(8), 0, 0)
            w.finish()
        with self.assertRaisesRegex(RecordingError, "cells/A's schema does not match the recorded layout of cell A"):
            open_recording(path)


if __name__ == "__main__":
    unittest.main()
