"""Result records (docs/result-schema.md): what ``ictus probe NAME -o FILE.json`` and
``ictus run SCHEDULE -o FILE.json`` write, schema ``ictus.run-record`` version 1,
loaded into plain dataclasses. Standard library only.

    >>> r = load_record("timer.json")  # doctest: +SKIP
    >>> r.probe, r.merged.summary.p99_ns, r.provenance.kernel_release  # doctest: +SKIP
    ('timer', 1234, '6.18.44')
    >>> r.rows("latency")[0]["who"]  # doctest: +SKIP
    'thread 0'

Keys this package does not model stay in :attr:`Record.raw`, the record as parsed; a
newer ictus may add keys without breaking this reader (the schema's own rule).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ._need import need

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "SUMMARY_KEYS",
    "RecordError",
    "Provenance",
    "Summary",
    "Bucket",
    "Histogram",
    "Latency",
    "ThreadResult",
    "Measurement",
    "RecordWarning",
    "Breakdown",
    "Explanation",
    "Record",
    "load_record",
]

#: A result record's ``schema``.
SCHEMA = "ictus.run-record"
#: The ``schema_version`` this package reads.
SCHEMA_VERSION = 1
#: A latency summary's keys, in the record's order.
SUMMARY_KEYS = (
    "count",
    "min_ns",
    "mean_ns",
    "stddev_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p999_ns",
    "p9999_ns",
    "p99999_ns",
    "max_ns",
)

Number = Union[int, float]


class RecordError(ValueError):
    """A file that is not a result record this package reads; the message names the
    file and what was wrong."""


def check_schema_version(
    d: Mapping[str, Any], where: str, version: int, error: type, hint: str = ""
) -> None:
    """Raises ``error`` naming ``where`` unless ``d`` (a record or a manifest) is of
    ``schema_version`` ``version``; ``hint`` follows the message."""
    if d.get("schema_version") != version:
        raise error(
            f"{where}: schema_version {d.get('schema_version')!r}; this package reads "
            f"version {version}{hint}"
        )


def _known(cls: Any, d: Mapping[str, Any]) -> Dict[str, Any]:
    """The entries of ``d`` that are fields of dataclass ``cls``."""
    names = cls.__dataclass_fields__.keys()
    return {k: v for k, v in d.items() if k in names}


@dataclass(frozen=True)
class Provenance:
    """Tool, host and time of a record (``provenance``)."""

    tool: str = "ictus"
    tool_version: str = ""
    argv: List[str] = field(default_factory=list)
    start_time: str = ""
    end_time: Optional[str] = None
    hostname: str = ""
    kernel_release: str = ""
    kernel_version: str = ""
    #: ``{model, dynamic, source}``.
    preemption: Dict[str, Any] = field(default_factory=dict)
    cmdline: str = ""
    cpu_model: Optional[str] = None
    cpu_count: int = 0
    online_cpus: List[int] = field(default_factory=list)
    smt: Optional[bool] = None
    isolated_cpus: List[int] = field(default_factory=list)
    governor: Optional[str] = None
    virtualization: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Provenance":
        return cls(**_known(cls, d))


@dataclass(frozen=True)
class Summary:
    """A latency summary: exact count, min, max, mean and standard deviation; the
    percentiles within 0.1 %. ``None`` values only when ``count`` is 0."""

    count: int
    min_ns: Optional[int] = None
    mean_ns: Optional[float] = None
    stddev_ns: Optional[float] = None
    p50_ns: Optional[int] = None
    p90_ns: Optional[int] = None
    p99_ns: Optional[int] = None
    p999_ns: Optional[int] = None
    p9999_ns: Optional[int] = None
    p99999_ns: Optional[int] = None
    max_ns: Optional[int] = None

    def as_dict(self) -> Dict[str, Optional[Number]]:
        """Key -> value, in the record's order."""
        return {k: getattr(self, k) for k in SUMMARY_KEYS}


@dataclass(frozen=True)
class Bucket:
    """A non-empty bucket of the HDR histogram: every sample in it is within 0.1 % of
    ``value_ns``, the highest value it holds."""

    value_ns: int
    count: int


@dataclass(frozen=True)
class Histogram:
    """The non-empty buckets of a latency's HDR histogram (1 ns to one hour, 3
    significant digits); their counts add up to the summary's ``count``."""

    lowest_ns: int
    highest_ns: int
    significant_digits: int
    buckets: List[Bucket]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Histogram":
        return cls(
            d["lowest_ns"],
            d["highest_ns"],
            d["significant_digits"],
            [Bucket(b["value_ns"], b["count"]) for b in d["buckets"]],
        )

    @property
    def count(self) -> int:
        """The samples in all buckets."""
        return sum(b.count for b in self.buckets)

    def percentile(self, p: float) -> Optional[int]:
        """The nearest-rank percentile ``p`` (0 to 100) from the buckets, as ictus
        computes it (the ``ceil(count * p / 100)``-th smallest sample's bucket); not
        clamped to the exact min and max, which the summary holds. ``None`` when
        empty::

            >>> Histogram(1, 3_600_000_000_000, 3, [Bucket(10, 3), Bucket(20, 1)]).percentile(75)
            10
        """
        if not 0 <= p <= 100:
            raise ValueError(f"percentile {p} is not between 0 and 100")
        total = self.count
        if total == 0:
            return None
        # Integer arithmetic where it can be (p in thousandths), as ceil(count * p).
        rank = max(1, -(-total * round(p * 1000) // 100_000))
        seen = 0
        for b in self.buckets:
            seen += b.count
            if seen >= rank:
                return b.value_ns
        return self.buckets[-1].value_ns


@dataclass(frozen=True)
class Latency:
    """A latency result (``threads[].latency``, ``merged``, ``measurements[].latency``)."""

    summary: Summary
    histogram: Histogram
    max_index: Optional[int] = None
    missed: int = 0
    longest_miss_run: int = 0
    #: Percentiles the sample count does not support (reported, not to be trusted).
    thin_percentiles: List[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Latency":
        return cls(
            summary=Summary(**_known(Summary, d["summary"])),
            histogram=Histogram.from_dict(d["histogram"]),
            max_index=d.get("max_index"),
            missed=d.get("missed", 0),
            longest_miss_run=d.get("longest_miss_run", 0),
            thin_percentiles=list(d.get("thin_percentiles", [])),
        )

    def row(self) -> Dict[str, Any]:
        """The summary's keys, then ``missed`` and ``longest_miss_run``."""
        out: Dict[str, Any] = self.summary.as_dict()
        out["missed"] = self.missed
        out["longest_miss_run"] = self.longest_miss_run
        return out


@dataclass(frozen=True)
class ThreadResult:
    """One measuring thread: its configuration as obtained, and its latency."""

    thread: int
    #: ``tid``, ``pinned_cpu``, ``affinity``, ``policy_requested``, ``policy``,
    #: ``hybrid_margin_ns``.
    config: Dict[str, Any]
    latency: Latency


@dataclass(frozen=True)
class Measurement:
    """One point of a sweep (``measurements[]``): units are in the keys' names."""

    name: str
    labels: Dict[str, Any]
    metrics: Dict[str, Number]
    latency: Optional[Latency] = None


@dataclass(frozen=True)
class RecordWarning:
    """A refusal or an environment shortfall (``warnings[]``)."""

    id: str
    message: str
    advice: Optional[str] = None


@dataclass(frozen=True)
class Breakdown:
    """The misses of a run by cause (``explanation.breakdown``)."""

    #: Misses reported (a stall that skipped releases is one miss).
    events: int = 0
    #: The periods they cover.
    periods: int = 0
    #: Misses not explained (a full ring).
    dropped: int = 0
    #: ``(phrase, count)`` by dominant cause, most first.
    by_cause: List[Tuple[str, int]] = field(default_factory=list)
    #: Misses where nothing moved.
    unexplained: int = 0
    #: ``(cause, count)`` of every cause seen at all.
    seen: List[Tuple[str, int]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Breakdown":
        d = dict(d)
        for k in ("by_cause", "seen"):
            d[k] = [(str(a), int(b)) for a, b in d.get(k, [])]
        return cls(**_known(cls, d))


@dataclass(frozen=True)
class Explanation:
    """Every miss of a run explained (``explanation``: ``timer``, ``loop``, ``run``)."""

    clock_start_ns: int
    threshold_ns: int
    breakdown: Breakdown
    #: The first 1,000 explained misses, as the record has them (dicts).
    events: List[Dict[str, Any]]
    events_not_kept: int
    #: How the sampler ran.
    sampler: Dict[str, Any]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Explanation":
        return cls(
            clock_start_ns=d.get("clock_start_ns", 0),
            threshold_ns=d.get("threshold_ns", 0),
            breakdown=Breakdown.from_dict(d.get("breakdown", {})),
            events=list(d.get("events", [])),
            events_not_kept=d.get("events_not_kept", 0),
            sampler=dict(d.get("sampler", {})),
        )


@dataclass
class Record:
    """A result record, loaded (:func:`load_record`)."""

    #: The probe's name (``timer``, ``loop``, ...), or ``run`` for ``ictus run``.
    probe: str
    #: False when the run was stopped early: the figures cover what ran.
    complete: bool
    provenance: Provenance
    #: The parameters as asked for (keys depend on the probe).
    parameters: Dict[str, Any]
    #: Process-wide settings actually obtained.
    obtained: Dict[str, Any]
    warnings: List[RecordWarning]
    #: ``steal``, ``clock``, ``loads``.
    environment: Dict[str, Any]
    headline: Optional[str]
    threads: List[ThreadResult]
    #: All threads together, where the probe has per-thread latencies.
    merged: Optional[Latency]
    measurements: List[Measurement]
    #: Absent (``None``) with ``--explain off`` and for probes that count no misses.
    explanation: Optional[Explanation]
    #: The record as parsed, every key included.
    raw: Dict[str, Any] = field(repr=False)
    #: The file it was read from, if any.
    path: Optional[Path] = None

    #: The tables :meth:`rows` and :meth:`to_pandas` make.
    TABLES = ("latency", "histogram", "measurements", "warnings")

    @classmethod
    def from_dict(cls, d: Any, path: Optional[Union[str, Path]] = None) -> "Record":
        """A record from its parsed JSON; :class:`RecordError` naming ``path`` (or
        ``the record``) for anything but a version-1 ``ictus.run-record``."""
        where = str(path) if path is not None else "the record"
        if not isinstance(d, dict):
            raise RecordError(f"{where}: not a result record (a JSON object is expected)")
        if d.get("schema") != SCHEMA:
            raise RecordError(
                f"{where}: schema {d.get('schema')!r}, expected {SCHEMA!r} "
                "(an `ictus probe ... -o` or `ictus run ... -o` file)"
            )
        check_schema_version(
            d, where, SCHEMA_VERSION, RecordError, " (a newer ictus needs a newer package)"
        )
        try:
            explanation = d.get("explanation")
            merged = d.get("merged")
            return cls(
                probe=d["probe"],
                complete=bool(d.get("complete", True)),
                provenance=Provenance.from_dict(d.get("provenance", {})),
                parameters=dict(d.get("parameters", {})),
                obtained=dict(d.get("obtained", {})),
                warnings=[RecordWarning(**_known(RecordWarning, w)) for w in d.get("warnings", [])],
                environment=dict(d.get("environment", {})),
                headline=d.get("headline"),
                threads=[
                    ThreadResult(t["thread"], dict(t.get("config", {})), Latency.from_dict(t["latency"]))
                    for t in d.get("threads", [])
                ],
                merged=Latency.from_dict(merged) if merged else None,
                measurements=[
                    Measurement(
                        m["name"],
                        dict(m.get("labels", {})),
                        dict(m.get("metrics", {})),
                        Latency.from_dict(m["latency"]) if m.get("latency") else None,
                    )
                    for m in d.get("measurements", [])
                ],
                explanation=Explanation.from_dict(explanation) if explanation else None,
                raw=d,
                path=Path(path) if path is not None else None,
            )
        except (KeyError, TypeError, ValueError) as e:
            what = f"no {e.args[0]!r}" if isinstance(e, KeyError) else str(e)
            raise RecordError(f"{where}: not a whole result record ({what})") from None

    def measurements_named(self, name: str) -> List[Measurement]:
        """The measurements called ``name`` (``release-jitter``, ``chase``, ...)."""
        return [m for m in self.measurements if m.name == name]

    def warning_ids(self) -> List[str]:
        """The ids of the record's warnings, in order."""
        return [w.id for w in self.warnings]

    def latencies(self) -> Iterable[Tuple[str, Latency]]:
        """``(who, latency)``: each thread (``thread N``), then ``merged``."""
        for t in self.threads:
            yield f"thread {t.thread}", t.latency
        if self.merged is not None:
            yield "merged", self.merged

    def rows(self, table: str) -> List[Dict[str, Any]]:
        """A table of the record as plain rows (dicts), one of :attr:`TABLES`:

        - ``latency``: per thread and merged (``who``), the summary, ``missed`` and
          ``longest_miss_run``;
        - ``histogram``: ``who``, ``value_ns``, ``count`` per bucket;
        - ``measurements``: ``name``, the labels, the metrics, and where the point
          has a latency its ``p50_ns``, ``p99_ns`` and ``max_ns``;
        - ``warnings``: ``id``, ``message``, ``advice``.
        """
        if table == "latency":
            return [{"who": who, **lat.row()} for who, lat in self.latencies()]
        if table == "histogram":
            return [
                {"who": who, "value_ns": b.value_ns, "count": b.count}
                for who, lat in self.latencies()
                for b in lat.histogram.buckets
            ]
        if table == "measurements":
            out = []
            for m in self.measurements:
                row: Dict[str, Any] = {"name": m.name, **m.labels, **m.metrics}
                if m.latency is not None:
                    s = m.latency.summary
                    row.update(p50_ns=s.p50_ns, p99_ns=s.p99_ns, max_ns=s.max_ns)
                out.append(row)
            return out
        if table == "warnings":
            return [{"id": w.id, "message": w.message, "advice": w.advice} for w in self.warnings]
        raise ValueError(f"no table {table!r} in a record (its tables: {', '.join(self.TABLES)})")

    def to_pandas(self, table: str) -> Any:
        """:meth:`rows` as a pandas DataFrame (needs pandas: ``pip install
        "./python[pandas]"``)."""
        return need("pandas").DataFrame(self.rows(table))


def load_record(path: Union[str, Path]) -> Record:
    """Reads a result record file; :class:`RecordError` (a :class:`ValueError`)
    naming the file for anything that is not one, :class:`OSError` when it cannot be
    read."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"{p}:{e.lineno}:{e.colno}: not JSON ({e.msg})") from None
    return Record.from_dict(d, p)
