"""ictus.survey against results directories ictus wrote: the committed smoke survey
(tests/data/survey/, two of its records kept) and, with ICTUS set, a results
directory made now (records, doctor.json, the reports). Standard library only."""

import json
import shutil
import tempfile
import unittest
from pathlib import Path

from samples import DATA, fresh, has

from ictus.survey import RecordError, SurveyError, load_survey

SURVEY = DATA / "survey"


class CommittedSurveyTests(unittest.TestCase):
    def setUp(self):
        self.sut = load_survey(SURVEY)

    def test_the_manifest_names_every_step_with_its_outcome(self):
        m = self.sut.manifest
        self.assertEqual(m.profile, "smoke")
        self.assertEqual(m.target["cores"], 1)
        self.assertTrue(m.provenance.hostname)
        self.assertGreater(len(m.steps), 20)
        for s in m.steps:
            with self.subTest(step=s.id):
                self.assertIn(s.status, ("done", "skipped", "failed", "not-run"))
                self.assertTrue(s.id.startswith(f"{s.probe}-"), s.id)
                self.assertIn(f"-{s.class_}-", s.id)
                self.assertIn(s.class_, ("normal-unpinned", "rt-pinned", "shielded"))
                if s.status == "done":
                    self.assertEqual(s.file, f"{s.id}.json")
                if s.status in ("skipped", "failed"):
                    self.assertTrue(s.reason)

    def test_the_verdict_leads_in_one_line(self):
        v = self.sut.manifest.verdict
        self.assertIsNotNone(v)
        self.assertTrue(v.line.startswith(("Yes: ", "No: ")), v.line)
        self.assertEqual(v.holds, v.line.startswith("Yes: "))
        self.assertTrue(v.evidence)

    def test_each_record_is_its_steps(self):
        self.assertEqual(len(self.sut.records), 2)
        by_file = {s.file: s for s in self.sut.manifest.steps if s.file}
        for name, record in self.sut.records.items():
            with self.subTest(record=name):
                step = by_file[name]
                self.assertEqual(step.status, "done")
                self.assertEqual(record.probe, step.probe)
                self.assertIs(self.sut.record(step), record)
                self.assertIs(self.sut.record(step.id), record)

    def test_steps_without_a_record_here_say_why(self):
        missing = dict((s.id, why) for s, why in self.sut.missing())
        steps = self.sut.manifest.steps
        self.assertEqual(len(missing), len(steps) - 2)
        for s in steps:
            if s.status == "done" and s.file not in self.sut.records:
                self.assertEqual(missing[s.id], f"missing: {s.file} not found")
            elif s.status == "skipped":
                self.assertEqual(missing[s.id], f"skipped: {s.reason}")

    def test_the_audit_is_read(self):
        checks = self.sut.doctor["checks"]
        self.assertTrue(all({"id", "status"} <= c.keys() for c in checks))

    def test_the_tables_have_a_row_per_step_and_per_latency(self):
        steps = self.sut.rows("steps")
        self.assertEqual([r["step"] for r in steps], [s.id for s in self.sut.manifest.steps])
        done = [r for r in steps if r["file"] in self.sut.records]
        self.assertTrue(all(r["max_ns"] is not None for r in done if self.sut.records[r["file"]].merged))
        latency = self.sut.rows("latency")
        self.assertEqual(
            len(latency), sum(len(list(r.latencies())) for r in self.sut.records.values())
        )
        self.assertTrue(all(r["class"] and r["load"] for r in latency))
        if has("pandas"):
            self.assertEqual(len(self.sut.to_pandas("steps")), len(steps))


class FreshSurveyTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.made = fresh(f"{__name__}.{cls.__name__}")

    def test_a_results_directory_made_now_reads_whole(self):
        sut = load_survey(self.made["results"])
        self.assertIsNone(sut.manifest)
        self.assertEqual(sorted(sut.records), ["run.json", "timer.json"])
        self.assertEqual(sut.records["timer.json"].probe, "timer")
        self.assertEqual(sut.records["run.json"].probe, "run")
        self.assertTrue(sut.doctor["checks"])
        self.assertEqual(sorted(sut.reports), ["report.html", "report.md"])
        self.assertEqual(sut.missing(), [])
        # Without a manifest, a record's step is its file stem.
        self.assertEqual({r["step"] for r in sut.rows("latency")}, {"timer"})
        self.assertEqual({r["step"] for r in sut.rows("measurements")}, {"run"})


class RefusalTests(unittest.TestCase):
    def copy(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        dst = Path(d.name) / "results"
        shutil.copytree(SURVEY, dst)
        return dst

    def test_a_file_is_not_a_directory(self):
        with self.assertRaisesRegex(SurveyError, "not a directory .*load_record"):
            load_survey(SURVEY / "survey.json")

    def test_an_empty_directory_is_not_a_results_directory(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        with self.assertRaisesRegex(SurveyError, "not a results directory"):
            load_survey(d.name)

    def test_a_foreign_json_file_is_refused_naming_it(self):
        dst = self.copy()
        (dst / "notes.json").write_text('{"mine": true}')
        with self.assertRaisesRegex(RecordError, r"notes\.json: schema None"):
            load_survey(dst)

    def test_a_manifest_of_another_version_is_refused(self):
        dst = self.copy()
        m = json.loads((dst / "survey.json").read_text())
        (dst / "survey.json").write_text(json.dumps({**m, "schema_version": 2}))
        with self.assertRaisesRegex(SurveyError, r"survey\.json: schema_version 2"):
            load_survey(dst)

    def test_a_truncated_manifest_is_refused_with_its_place(self):
        dst = self.copy()
        text = (dst / "survey.json").read_text()
        (dst / "survey.json").write_text(text[: len(text) // 2])
        with self.assertRaisesRegex(SurveyError, r"survey\.json:\d+:\d+: not JSON"):
            load_survey(dst)


if __name__ == "__main__":
    unittest.main()
