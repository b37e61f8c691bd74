"""ictus.record against records ictus wrote (tests/data/, and with ICTUS set, records
made now): every figure where docs/result-schema.md says it is, and files that are
not records refused naming the file. Standard library only."""

import json
import tempfile
import unittest
from pathlib import Path

from samples import DATA, fresh, has, skip

import ictus
from ictus.record import SUMMARY_KEYS, Histogram, Record, RecordError, load_record

SURVEY = DATA / "survey"
PERCENTILES = {"p50_ns": 50, "p90_ns": 90, "p99_ns": 99, "p999_ns": 99.9, "p9999_ns": 99.99, "p99999_ns": 99.999}


def committed_timer() -> Path:
    return sorted(SURVEY.glob("timer-*.json"))[0]


class TimerChecks:
    """What holds for every timer record."""

    def check_timer(self, path):
        sut = load_record(path)
        self.assertEqual(sut.probe, "timer")
        self.assertTrue(sut.complete)
        self.assertEqual(sut.provenance.tool, "ictus")
        self.assertTrue(sut.provenance.hostname)
        self.assertTrue(sut.provenance.start_time.endswith("Z"), sut.provenance.start_time)
        self.assertIn(sut.provenance.preemption.get("model"), ("none", "voluntary", "full", "lazy", "rt", "unknown"))
        self.assertEqual(len(sut.threads), len(sut.parameters["cpus"]))
        self.assertEqual([t.thread for t in sut.threads], list(range(len(sut.threads))))
        for t in sut.threads:
            # docs/result-schema.md: count + missed == loops for every complete thread.
            self.assertEqual(t.latency.summary.count + t.latency.missed, sut.parameters["loops"])
        self.assertEqual(sut.merged.summary.count, sum(t.latency.summary.count for t in sut.threads))
        self.check_latencies(sut)
        self.assertIsNotNone(sut.explanation)
        b = sut.explanation.breakdown
        self.assertEqual(sum(n for _, n in b.by_cause), b.events, b)
        self.assertEqual(sut.explanation.threshold_ns, sut.parameters["interval_ns"])
        rows = sut.rows("latency")
        self.assertEqual([r["who"] for r in rows], [f"thread {t.thread}" for t in sut.threads] + ["merged"])
        self.assertEqual(list(rows[0])[1 : 1 + len(SUMMARY_KEYS)], list(SUMMARY_KEYS))
        histogram = sut.rows("histogram")
        self.assertEqual(sum(r["count"] for r in histogram if r["who"] == "merged"), sut.merged.summary.count)
        self.assertEqual(sut.raw["schema"], "ictus.run-record")
        return sut

    def check_latencies(self, record, some=True):
        """Every latency's buckets add up to its count, and its percentiles are the
        buckets' nearest rank clamped to the exact min and max, as ictus computes
        them; with ``some``, the record has at least one."""
        latencies = list(record.latencies()) + [(m.name, m.latency) for m in record.measurements if m.latency]
        if some:
            self.assertTrue(latencies)
        for who, lat in latencies:
            s = lat.summary
            self.assertEqual(lat.histogram.count, s.count, who)
            if s.count == 0:
                continue
            self.assertLessEqual(s.min_ns, s.p50_ns)
            self.assertLessEqual(s.p50_ns, s.max_ns)
            for key, p in PERCENTILES.items():
                with self.subTest(who=who, key=key):
                    clamped = min(max(lat.histogram.percentile(p), s.min_ns), s.max_ns)
                    self.assertEqual(clamped, getattr(s, key))


class RunChecks:
    """What holds for every record of `ictus run` of the stress example."""

    def check_run(self, path):
        sut = load_record(path)
        self.assertEqual(sut.probe, "run")
        self.assertEqual(sut.threads, [])
        jitter = sut.measurements_named("release-jitter")
        self.assertEqual(sorted(m.labels["subsystem"] for m in jitter), ["A", "B", "C"])
        for m in jitter + sut.measurements_named("execution-time"):
            self.assertIsNotNone(m.latency, m)
            self.assertGreater(m.metrics["frames_run"], 0)
        stress = sut.measurements_named("stress")[0].metrics
        self.assertEqual(stress["incoherent_cells"], 0)
        self.assertGreater(stress["run_frames"], 0)
        self.assertTrue(sut.headline.startswith("stress: "), sut.headline)
        self.check_latencies(sut)
        rows = sut.rows("measurements")
        self.assertEqual(len(rows), len(sut.measurements))
        first = next(r for r in rows if r["name"] == "release-jitter")
        self.assertIn("subsystem", first)
        self.assertIn("frames_run", first)
        self.assertIn("p99_ns", first)
        self.assertEqual(sut.rows("warnings"), [{"id": w.id, "message": w.message, "advice": w.advice} for w in sut.warnings])
        return sut


class CommittedRecordTests(unittest.TestCase, TimerChecks, RunChecks):
    def test_a_timer_record_loads_with_every_figure_in_place(self):
        self.check_timer(committed_timer())

    def test_a_run_record_loads_its_measurements_by_name(self):
        sut = self.check_run(DATA / "run.json")
        # The committed run lost nothing: 15 frames at 10 ms, each counted.
        self.assertEqual(sut.measurements_named("stress")[0].metrics["final_value"], 15)
        self.assertEqual(sut.parameters["tick_ns"], 10_000_000)

    def test_every_record_of_the_survey_reads(self):
        for path in sorted(SURVEY.glob("*.json")):
            if path.name in ("survey.json", "doctor.json"):
                continue
            with self.subTest(path=path.name):
                sut = load_record(path)
                # memlat's points have figures, not distributions.
                self.check_latencies(sut, some=sut.probe != "memlat")
                self.assertTrue(sut.measurements or sut.threads)


class FreshRecordTests(unittest.TestCase, TimerChecks, RunChecks):
    @classmethod
    def setUpClass(cls):
        cls.made = fresh(f"{__name__}.{cls.__name__}")

    def test_a_timer_record_made_now_loads(self):
        self.check_timer(self.made["timer"])

    def test_a_run_record_made_now_loads(self):
        self.check_run(self.made["run"])


class RefusalTests(unittest.TestCase):
    def write(self, text):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        path = Path(d.name) / "r.json"
        path.write_text(text)
        return path

    def good(self):
        return json.loads((DATA / "run.json").read_text())

    def test_a_file_that_is_not_json_is_refused_with_its_place(self):
        path = self.write('{"schema": "ictus.run-record",\n  oops')
        with self.assertRaisesRegex(RecordError, r"r\.json:2:3: not JSON"):
            load_record(path)

    def test_another_schema_is_refused_naming_it(self):
        path = self.write(json.dumps({"schema": "ictus.survey", "schema_version": 1}))
        with self.assertRaisesRegex(RecordError, r"r\.json: schema 'ictus.survey', expected 'ictus.run-record'"):
            load_record(path)

    def test_another_version_is_refused_naming_it(self):
        path = self.write(json.dumps({**self.good(), "schema_version": 2}))
        with self.assertRaisesRegex(RecordError, "schema_version 2; this package reads version 1"):
            load_record(path)

    def test_a_record_without_its_probe_is_refused(self):
        d = self.good()
        del d["probe"]
        with self.assertRaisesRegex(RecordError, "not a whole result record \\(no 'probe'\\)"):
            Record.from_dict(d, "x.json")

    def test_keys_a_newer_ictus_adds_are_kept_not_refused(self):
        sut = Record.from_dict({**self.good(), "new_key": [1, 2]})
        self.assertEqual(sut.raw["new_key"], [1, 2])

    def test_a_table_that_does_not_exist_is_named_with_those_that_do(self):
        with self.assertRaisesRegex(ValueError, "latency, histogram, measurements, warnings"):
            load_record(DATA / "run.json").rows("nope")


class HistogramTests(unittest.TestCase):
    def test_percentiles_are_the_nearest_rank(self):
        sut = Histogram(1, 3_600_000_000_000, 3, [])
        self.assertIsNone(sut.percentile(50))
        sut.buckets.extend(ictus.record.Bucket(v, 1) for v in range(1, 101))
        self.assertEqual([sut.percentile(p) for p in (0, 1, 50, 99, 99.9, 100)], [1, 1, 50, 99, 100, 100])
        with self.assertRaises(ValueError):
            sut.percentile(101)


class PandasTests(unittest.TestCase):
    def test_tables_become_dataframes_where_pandas_is(self):
        record = load_record(DATA / "run.json")
        if not has("pandas"):
            with self.assertRaisesRegex(ictus.MissingPart, r"pip install 'pandas'.*\./python\[pandas\]"):
                record.to_pandas("measurements")
            skip(self, "pandas is not installed: only the message naming it was checked")
        sut = record.to_pandas("measurements")
        self.assertEqual(len(sut), len(record.measurements))
        self.assertIn("subsystem", sut.columns)


if __name__ == "__main__":
    unittest.main()
