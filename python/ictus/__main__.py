"""``python -m ictus show PATH...``: what a record, a results directory or a
recording holds, in a few lines each, through this package (a check that it reads
them, and a first look).

    python -m ictus show timer.json ictus-results/vm-20261129-024959 run.mcap

A file or directory it cannot read, or a missing optional part, prints one line on
stderr (``python -m ictus: ...``) and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import List, Optional

from ._need import MissingPart
from .record import Record, load_record
from .recording import open_recording
from .survey import load_survey

PROG = "python -m ictus"


def _time(ns: Optional[float]) -> str:
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def show_record(r: Record) -> List[str]:
    p = r.provenance
    out = [
        f"record: {r.probe}{'' if r.complete else ' (INCOMPLETE)'}, ictus {p.tool_version} "
        f"on {p.hostname} ({p.kernel_release}), {p.start_time}"
    ]
    if r.headline:
        out.append(f"  {r.headline}")
    for who, lat in r.latencies():
        s = lat.summary
        out.append(
            f"  {who}: {s.count} samples, p50 {_time(s.p50_ns)}, p99 {_time(s.p99_ns)}, "
            f"max {_time(s.max_ns)}, {lat.missed} missed"
        )
    if r.measurements:
        names = Counter(m.name for m in r.measurements)
        out.append("  measurements: " + ", ".join(f"{n} x{c}" for n, c in names.items()))
    if r.explanation is not None:
        b = r.explanation.breakdown
        causes = ", ".join(f"{c} {n}" for c, n in b.by_cause) or "none"
        out.append(f"  misses explained: {b.events} ({causes})")
    if r.warnings:
        out.append("  warnings: " + ", ".join(r.warning_ids()))
    return out


def show(path: Path) -> List[str]:
    if path.is_dir():
        s = load_survey(path)
        out = [f"{path}: results directory, {len(s.records)} record(s)"]
        if s.manifest is not None:
            m = s.manifest
            statuses = Counter(step.status for step in m.steps)
            out.append(
                f"  survey ({m.profile}{'' if m.complete else ', INCOMPLETE'}): "
                + ", ".join(f"{n} {st}" for st, n in statuses.items())
            )
            out.append(f"  verdict: {m.verdict.line if m.verdict else 'none (the loop probe did not run)'}")
        if s.doctor is not None:
            out.append(f"  doctor: {len(s.doctor.get('checks', []))} checks")
        if s.reports:
            out.append("  reports: " + ", ".join(s.reports))
        for name, r in s.records.items():
            out.append(f"  {name}: {r.probe}, {len(r.threads)} thread(s), {len(r.measurements)} measurement(s)")
        return out
    if path.suffix == ".mcap":
        rec = open_recording(path)
        i = rec.info
        ended = (
            f"ended, {rec.end.records} records, {sum(rec.end.dropped.values())} dropped"
            if rec.end
            else "NOT ENDED (no ictus.end)"
        )
        out = [
            f"{path}: recording of run {i.run} on {i.host}, tick {_time(i.tick_ns)}, {ended}",
            f"  subsystems: {', '.join(i.subsystems)}; cells recorded: {', '.join(i.recorded)}",
        ]
        out += [f"  {t}: {n} message(s)" for t, n in sorted(rec.message_counts.items())]
        return out
    r = load_record(path)
    out = show_record(r)
    out[0] = f"{path}: {out[0]}"
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Read what ictus writes.")
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser("show", help="what records, results directories and recordings hold")
    cmd.add_argument("paths", nargs="+", metavar="PATH", type=Path)
    args = parser.parse_args(argv)
    for path in args.paths:
        try:
            lines = show(path)
        except (MissingPart, ValueError, OSError) as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return 1
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
