"""Summarises bench/sinks-cost.sh's runs: per run and subsystem the release jitter
(p50, p99, max, count), execution time p99, overruns, missed frames and the tap's
dropped records; per round the worst subsystem's figures of each sink against plain.

    python3 bench/sinks_cost.py OUT_DIR TICK SECONDS_PER WAIT
"""
import json
import os
import re
import sys


def us(v):
    return "-" if v is None else f"{v / 1000:.1f}"


def from_record(r):
    """(subsystem rows, missed frames, drops) of an `ictus run -o` record."""
    stress = next((m for m in r["measurements"] if m["name"] == "stress"), None)
    missed = int(stress["metrics"]["missed_frames"]) if stress else None
    execs = {m["labels"]["subsystem"]: m["latency"]["summary"] for m in r["measurements"]
             if m["name"] == "execution-time" and m.get("latency")}
    rows = []
    for m in r["measurements"]:
        if m["name"] != "release-jitter" or not m.get("latency"):
            continue
        sub = m["labels"]["subsystem"]
        rows.append((sub, m["latency"]["summary"], execs.get(sub, {}), int(m["metrics"]["overruns"])))
    return rows, missed, r.get("warnings", [])


def from_report(r):
    """The same of a RunReport (the haptic example's --report)."""
    rows = []
    for s in r["subsystems"]:
        o = s.get("outcome") or {}
        j = (o.get("jitter") or {}).get("summary")
        e = (o.get("exec") or {}).get("summary") or {}
        if j:
            rows.append((s["name"], j, e, int(s.get("overruns", 0))))
    return rows, None, r.get("warnings", [])


def dropped(warnings):
    n = 0
    for w in warnings:
        if w.get("id") == "tap-dropped":
            m = re.search(r"(\d+) record", w.get("message", ""))
            n += int(m.group(1)) if m else 0
    return n


def main():
    out, tick, secs, wait = sys.argv[1:5]
    for loop in sorted(os.listdir(out)):
        base = os.path.join(out, loop)
        if not os.path.isdir(base):
            continue
        labels = sorted(os.listdir(base), key=lambda l: (int(l.split("-")[0]), l))
        what = f"the stress schedule at {tick}, wait = {wait}" if loop == "stress" else "the haptic example at 10 kHz"
        print(f"# Sinks against none: {what}, {secs} s per run, alternated\n")
        print("| run | subsystem | samples | jitter p50 us | p99 us | max us | exec p99 us | overruns | missed frames | dropped |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        worst = {}
        for label in labels:
            d = os.path.join(base, label)
            if os.path.exists(os.path.join(d, "record.json")):
                rows, missed, warnings = from_record(json.load(open(os.path.join(d, "record.json"))))
            elif os.path.exists(os.path.join(d, "report.json")):
                rows, missed, warnings = from_report(json.load(open(os.path.join(d, "report.json"))))
            else:
                print(f"| {label} | (no record: see {d}/stderr) | | | | | | | | |")
                continue
            drops = dropped(warnings)
            for sub, s, e, overruns in rows:
                print(f"| {label} | {sub} | {s['count']} | {us(s['p50_ns'])} | {us(s['p99_ns'])} | {us(s['max_ns'])} "
                      f"| {us(e.get('p99_ns'))} | {overruns} | {'-' if missed is None else missed} | {drops} |")
            if rows:
                worst[label] = {k: max(s[k] or 0 for _, s, _, _ in rows) for k in ("p50_ns", "p99_ns", "max_ns")}
        print()
        print("| round | sink | worst p50 sink / plain us | worst p99 sink / plain us | p99 difference us | worst max sink / plain us |")
        print("|---|---|---|---|---|---|")
        for rd in sorted({l.split("-")[0] for l in labels}, key=int):
            p = worst.get(f"{rd}-plain")
            for label in sorted(l for l in worst if l.startswith(f"{rd}-") and not l.endswith("-plain")):
                s = worst[label]
                if not p:
                    continue
                print(f"| {rd} | {label.split('-', 1)[1]} | {us(s['p50_ns'])} / {us(p['p50_ns'])} | {us(s['p99_ns'])} / {us(p['p99_ns'])} "
                      f"| {(s['p99_ns'] - p['p99_ns']) / 1000:+.1f} | {us(s['max_ns'])} / {us(p['max_ns'])} |")
        print()


main()
