"""``python -m ictus show`` on the committed files, and the one line a missing part
or a bad file gives, for it and for ``python -m ictus.live`` (``ictus_zenoh``)."""

import os
import subprocess
import sys
import unittest

from samples import DATA, REPO, has, skip


def python_m(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=60
    )


class ShowTests(unittest.TestCase):
    def test_a_record_and_a_results_directory_are_shown(self):
        out = python_m("ictus", "show", str(DATA / "run.json"), str(DATA / "survey"))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("run.json: record: run,", out.stdout)
        self.assertIn("measurements: release-jitter x3, execution-time x3", out.stdout)
        self.assertIn("survey: results directory, 2 record(s)", out.stdout)
        self.assertIn("  verdict: ", out.stdout)

    def test_a_recording_is_shown_or_the_missing_part_named_in_one_line(self):
        out = python_m("ictus", "show", str(DATA / "run.mcap"))
        if has("mcap.reader"):
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("recording of run pysample on here, tick 10.00 ms, ended", out.stdout)
            return
        self.assertEqual(out.returncode, 1)
        self.assertEqual(
            out.stderr,
            "python -m ictus: reading MCAP recordings needs the mcap package (not installed): "
            "pip install 'mcap==1.6.0', or from the ictus repository pip install './python[mcap]'\n",
        )

    def test_a_file_that_is_not_a_record_is_one_line(self):
        out = python_m("ictus", "show", str(REPO / "examples" / "stress" / "schedule.toml"))
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r"^python -m ictus: .*schedule\.toml:1:1: not JSON \(Expecting value\)\n$")


class LiveTests(unittest.TestCase):
    def test_both_names_of_the_live_reader_answer(self):
        for module in ("ictus.live", "ictus_zenoh"):
            with self.subTest(module=module):
                out = python_m(module, "--help")
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn(f"python -m {module}", out.stdout)

    def test_without_zenoh_the_live_reader_names_what_to_install(self):
        if has("zenoh"):
            skip(self, "zenoh is installed here: the message for its absence is checked where it is not")
        out = python_m(
            "ictus.live", "read", "--endpoint", "quic/127.0.0.1:1", "--keys", "k",
            "--reader", "r", "--run", "x", "A",
        )
        self.assertEqual(out.returncode, 1)
        self.assertEqual(
            out.stderr,
            "python -m ictus.live: reading a live run over Zenoh needs the eclipse-zenoh package "
            "(not installed): pip install 'eclipse-zenoh==1.10.2', or from the ictus repository "
            "pip install './python[live]'\n",
        )


if __name__ == "__main__":
    unittest.main()
