"""Results directories (``ictus survey``'s ``ictus-results/HOST-YYYYMMDD-HHMMSS/``, or
any folder of records that ``ictus report`` reads): every record in it, the survey's
manifest (``survey.json``: its steps, verdict and target), the platform audit
(``doctor.json``) and the reports beside them (``report.md``, ``report.html``).
Standard library only.

    >>> s = load_survey("ictus-results/vm-20261129-024959")  # doctest: +SKIP
    >>> print(s.manifest.verdict.line)  # doctest: +SKIP
    >>> for step in s.manifest.steps:  # doctest: +SKIP
    ...     print(step.id, step.status, s.record(step) and s.record(step).merged.summary.p99_ns)

As ``ictus report`` reads one: every ``*.json`` file other than ``survey.json`` and
``doctor.json`` is a result record, and one that is not is an error naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from ._need import need
from .record import Provenance, Record, RecordError, check_schema_version, load_record

__all__ = [
    "MANIFEST_FILE",
    "DOCTOR_FILE",
    "REPORT_FILES",
    "MANIFEST_SCHEMA",
    "MANIFEST_VERSION",
    "SurveyError",
    "Step",
    "Verdict",
    "Manifest",
    "Survey",
    "load_survey",
]

#: The survey's manifest in a results directory.
MANIFEST_FILE = "survey.json"
#: The platform audit (``ictus doctor --json``) in a results directory.
DOCTOR_FILE = "doctor.json"
#: The reports ``ictus survey`` and ``ictus report`` write beside the records.
REPORT_FILES = ("report.md", "report.html")
#: The manifest's ``schema``.
MANIFEST_SCHEMA = "ictus.survey"
#: The manifest's ``schema_version`` this package reads.
MANIFEST_VERSION = 1


class SurveyError(RecordError):
    """A results directory, or a file in it, that this package cannot read; the
    message names it."""


def load_name(load: Any) -> str:
    """A step's load as ictus names it in step ids: ``idle``, ``all-loads``, or the
    kind (``cpu``, ``disk``, ...) for ``{"one": KIND}``::

        >>> load_name("idle"), load_name({"one": "cpu"}), load_name("all")
        ('idle', 'cpu', 'all-loads')
    """
    if isinstance(load, dict) and "one" in load:
        return str(load["one"])
    if load == "all":
        return "all-loads"
    return str(load)


@dataclass(frozen=True)
class Step:
    """One step of a survey: a probe in a configuration, with its outcome."""

    #: Stable id, also the record's file stem: ``timer-rt-pinned-idle``.
    id: str
    probe: str
    #: Scheduling class: ``normal-unpinned``, ``rt-pinned``, ``shielded``.
    class_: str
    #: Load: ``idle``, a kind (``cpu``, ``disk``, ``net``, ...), ``all-loads``.
    load: str
    #: ``done``, ``skipped``, ``failed``, ``not-run``.
    status: str
    #: The record's file name, when done.
    file: Optional[str] = None
    #: Why skipped or failed.
    reason: Optional[str] = None
    #: The CPUs it measured on, once run.
    cpus: Optional[str] = None
    #: Interrupts those CPUs served while it ran.
    irqs: Optional[int] = None
    #: The step's CPU latency QoS when it is not the default.
    pm_qos: Any = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Step":
        return cls(
            id=d["id"],
            probe=d["probe"],
            class_=d["class"],
            load=load_name(d["load"]),
            status=d["status"],
            file=d.get("file"),
            reason=d.get("reason"),
            cpus=d.get("cpus"),
            irqs=d.get("irqs"),
            pm_qos=d.get("pm_qos"),
        )


@dataclass(frozen=True)
class Verdict:
    """The verdict against the target loop, in plain words first."""

    #: One line: "Yes: ..." or "No: ...".
    line: str
    #: Whether the target holds in at least one configuration.
    holds: bool
    #: The evidence, one sentence each.
    evidence: List[str] = field(default_factory=list)
    #: The same for seed 000's 50 kHz sound loop.
    sound_line: Optional[str] = None
    #: The configuration that held best.
    best: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        return cls(
            d["line"], bool(d["holds"]), list(d.get("evidence", [])), d.get("sound_line"), d.get("best")
        )


@dataclass(frozen=True)
class Manifest:
    """``survey.json``: what the survey ran and concluded."""

    #: False when the survey was stopped early.
    complete: bool
    #: ``smoke``, ``quick``, ``standard``, ``full``.
    profile: str
    #: The target loop: ``frequency_hz``, ``cores``, ``exchange_bytes``.
    target: Dict[str, Any]
    provenance: Provenance
    steps: List[Step]
    #: Absent when stopped before the loop probe ran.
    verdict: Optional[Verdict]
    #: What the survey did to the machine for the shielded configuration, in order.
    shield: List[str]
    #: The manifest as parsed.
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, d: Any, where: str = "survey.json") -> "Manifest":
        if not isinstance(d, dict) or d.get("schema") != MANIFEST_SCHEMA:
            found = d.get("schema") if isinstance(d, dict) else type(d).__name__
            raise SurveyError(f"{where}: schema {found!r}, expected {MANIFEST_SCHEMA!r}")
        check_schema_version(d, where, MANIFEST_VERSION, SurveyError)
        try:
            verdict = d.get("verdict")
            return cls(
                complete=bool(d["complete"]),
                profile=d["profile"],
                target=dict(d["target"]),
                provenance=Provenance.from_dict(d["provenance"]),
                steps=[Step.from_dict(s) for s in d["steps"]],
                verdict=Verdict.from_dict(verdict) if verdict else None,
                shield=list(d.get("shield", [])),
                raw=d,
            )
        except (KeyError, TypeError, ValueError) as e:
            what = f"no {e.args[0]!r}" if isinstance(e, KeyError) else str(e)
            raise SurveyError(f"{where}: not a whole survey manifest ({what})") from None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SurveyError(f"{path}:{e.lineno}:{e.colno}: not JSON ({e.msg})") from None


@dataclass
class Survey:
    """A results directory, loaded (:func:`load_survey`)."""

    path: Path
    #: ``survey.json``, when the directory has one.
    manifest: Optional[Manifest]
    #: ``doctor.json`` as parsed (``checks``, ``verdict``, ...), when present.
    doctor: Optional[Dict[str, Any]]
    #: Every record, file name -> record, in file-name order.
    records: Dict[str, Record]
    #: The reports present, file name -> path.
    reports: Dict[str, Path]

    #: The tables :meth:`rows` and :meth:`to_pandas` make.
    TABLES = ("steps", "latency", "measurements")

    def record(self, step: Union[Step, str]) -> Optional[Record]:
        """The record of a step (a :class:`Step`, or its id or file name), if the
        directory has it."""
        if isinstance(step, Step):
            return self.records.get(step.file) if step.file else None
        if step in self.records:
            return self.records[step]
        return self.records.get(f"{step}.json")

    def missing(self) -> List[Tuple[Step, str]]:
        """The manifest's steps that have no record here, each with why (as the
        report says it): ``skipped: ...``, ``failed: ...``, ``not run: ...``, or
        ``missing: FILE not found`` for a step done whose file is not here."""
        if self.manifest is None:
            return []
        out = []
        for s in self.manifest.steps:
            if s.status == "done" and s.file in self.records:
                continue
            why = s.reason or "no reason given"
            if s.status == "done":
                text = f"missing: {s.file or 'record'} not found"
            elif s.status == "not-run":
                text = "not run: the survey was stopped"
            else:
                text = f"{s.status}: {why}"
            out.append((s, text))
        return out

    def _configs(self) -> List[Tuple[Dict[str, Any], Record]]:
        """Each record with its step's columns: from the manifest, else the file
        name."""
        by_file = {s.file: s for s in self.manifest.steps} if self.manifest else {}
        out = []
        for name, r in self.records.items():
            s = by_file.get(name)
            if s is not None:
                head = {"step": s.id, "probe": s.probe, "class": s.class_, "load": s.load}
            else:
                head = {"step": name[: -len(".json")], "probe": r.probe, "class": None, "load": None}
            out.append((head, r))
        return out

    def rows(self, table: str) -> List[Dict[str, Any]]:
        """A table of the directory as plain rows (dicts), one of :attr:`TABLES`:

        - ``steps``: the manifest's steps (``step``, ``probe``, ``class``, ``load``,
          ``status``, ``file``, ``reason``, ``cpus``), with ``p99_ns`` and ``max_ns``
          of the record's merged latency where it has one;
        - ``latency``: per record, per thread and merged, the step's columns and
          :meth:`Record.rows` ``("latency")``;
        - ``measurements``: per record, the step's columns and its measurements.
        """
        if table == "steps":
            out = []
            for s in self.manifest.steps if self.manifest else []:
                r = self.record(s)
                merged = r.merged.summary if r is not None and r.merged else None
                out.append(
                    {
                        "step": s.id,
                        "probe": s.probe,
                        "class": s.class_,
                        "load": s.load,
                        "status": s.status,
                        "file": s.file,
                        "reason": s.reason,
                        "cpus": s.cpus,
                        "p99_ns": merged.p99_ns if merged else None,
                        "max_ns": merged.max_ns if merged else None,
                    }
                )
            return out
        if table in ("latency", "measurements"):
            return [{**head, **row} for head, r in self._configs() for row in r.rows(table)]
        raise ValueError(f"no table {table!r} in a survey (its tables: {', '.join(self.TABLES)})")

    def to_pandas(self, table: str) -> Any:
        """:meth:`rows` as a pandas DataFrame (needs pandas: ``pip install
        "./python[pandas]"``)."""
        return need("pandas").DataFrame(self.rows(table))


def load_survey(path: Union[str, Path]) -> Survey:
    """Reads a results directory; :class:`SurveyError` naming the file for a file that
    is not what its name says, or a directory with nothing of ictus in it;
    :class:`OSError` when it cannot be read."""
    p = Path(path)
    if not p.is_dir():
        raise SurveyError(
            f"{p}: not a directory (a survey's results directory, "
            "ictus-results/HOST-YYYYMMDD-HHMMSS; for one record use load_record)"
        )
    files = sorted(f.name for f in p.iterdir() if f.name.endswith(".json") and f.is_file())
    manifest = (
        Manifest.from_dict(_json(p / MANIFEST_FILE), str(p / MANIFEST_FILE))
        if MANIFEST_FILE in files
        else None
    )
    doctor = _json(p / DOCTOR_FILE) if DOCTOR_FILE in files else None
    records = {
        name: load_record(p / name) for name in files if name not in (MANIFEST_FILE, DOCTOR_FILE)
    }
    reports = {name: p / name for name in REPORT_FILES if (p / name).is_file()}
    if manifest is None and doctor is None and not records:
        raise SurveyError(f"{p}: no records, no {MANIFEST_FILE}, no {DOCTOR_FILE}: not a results directory")
    return Survey(p, manifest, doctor, records, reports)
