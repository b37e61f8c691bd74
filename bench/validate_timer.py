"""Runs cyclictest and ictus alternately and compares them (see validate-timer.sh)."""

import json
import os
import subprocess
import sys

ICTUS = os.environ["ICTUS"]
CPU = os.environ["CPU"]
DURATION = int(os.environ["DURATION"])
ROUNDS = max(1, int(os.environ["ROUNDS"]))
HYBRID_DURATION = int(os.environ["HYBRID_DURATION"])
OUT = os.environ["OUT_DIR"]
# The CPU latency QoS settings compared, each at equal settings for both tools: "held"
# (/dev/cpu_dma_latency at 0 for the run: cyclictest's default and ictus's) and "off"
# (cyclictest --laptop, ictus --pm-qos off).
SETTINGS = os.environ.get("PM_QOS", "held off").split()
PCTS = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("p99.99", 0.9999)]


def run(cmd):
    print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def rank(count, q):
    # Nearest rank, as ictus computes it.
    return max(1, -(-count * round(q * 100000) // 100000))


def pct(buckets, count, q):
    """buckets: sorted list of (value, count)."""
    r, seen = rank(count, q), 0
    for v, c in buckets:
        seen += c
        if seen >= r:
            return v
    return buckets[-1][0]


class Dist:
    """A latency distribution in nanoseconds, merged over rounds."""

    def __init__(self, name):
        self.name, self.buckets, self.count, self.min, self.max = name, {}, 0, None, 0
        self.sum, self.missed, self.expected = 0.0, 0, 0

    def add(self, value_ns, count):
        self.buckets[value_ns] = self.buckets.get(value_ns, 0) + count

    def summary(self):
        b = sorted(self.buckets.items())
        s = {"count": self.count, "min": self.min, "mean": self.sum / max(1, self.count), "max": self.max}
        for label, q in PCTS:
            s[label] = pct(b, self.count, q)
        s["missed"] = self.missed
        return s


def cyclictest_round(dist, interval_us, seconds, tag, qos="held"):
    path = f"{OUT}/cyclictest-{tag}.json"
    run(["cyclictest", "-q", "-D", str(seconds), "-i", str(interval_us), "-t", "1", "-m",
         "-p", "95", "-a", CPU, "-h", "100000", f"--json={path}"]
        + (["--laptop"] if qos == "off" else []))
    with open(path) as f:
        t = json.load(f)["thread"]["0"]
    # cyclictest buckets are whole microseconds (latency truncated to us): bucket u
    # holds [u, u+1) us. Overflows beyond -h are counted only in 'cycles' and 'max'.
    in_buckets = 0
    for us, c in t["histogram"].items():
        dist.add(int(us) * 1000, c)
        in_buckets += c
    over = t["cycles"] - in_buckets
    if over > 0:
        dist.add(t["max"] * 1000, over)
    dist.count += t["cycles"]
    dist.sum += t["avg"] * 1000 * t["cycles"]
    dist.min = t["min"] * 1000 if dist.min is None else min(dist.min, t["min"] * 1000)
    dist.max = max(dist.max, t["max"] * 1000)
    expected = seconds * 1_000_000 // interval_us
    dist.expected += expected
    dist.missed += max(0, expected - t["cycles"])  # cyclictest skips missed periods silently


def ictus_round(dist, interval_us, seconds, tag, mode="nanosleep", qos="held", explain="on"):
    path = f"{OUT}/ictus-{tag}.json"
    run([ICTUS, "probe", "timer", "--cpus", CPU, "--policy", "fifo", "--priority", "95",
         "--mlock", "--interval", f"{interval_us}us", "--duration", f"{seconds}s",
         "--warmup", "0s", "--mode", mode, "--output", path,
         "--pm-qos", "0" if qos == "held" else "off", "--explain", explain])
    with open(path) as f:
        rec = json.load(f)
    held = (rec["obtained"].get("pm_qos") or {}).get("held_us")
    if (held is not None) != (qos == "held"):
        print(f"  warning: ictus asked for the QoS {qos} but had {held!r} in force", file=sys.stderr)
    e = rec.get("explanation")
    if e:
        dist.explained = getattr(dist, "explained", []) + [e["breakdown"]]
    for w in rec["warnings"]:
        if w["id"] != "steal-time":
            print(f"  warning: {w['message']}", file=sys.stderr)
    m = rec["merged"]
    s = m["summary"]
    for b in m["histogram"]["buckets"]:
        dist.add(b["value_ns"], b["count"])
    dist.count += s["count"]
    dist.sum += s["mean_ns"] * s["count"]
    dist.min = s["min_ns"] if dist.min is None else min(dist.min, s["min_ns"])
    dist.max = max(dist.max, s["max_ns"])
    dist.missed += m["missed"]
    dist.expected += rec["parameters"]["loops"]
    steal = rec["environment"].get("steal") or {}
    dist.steal_ns = getattr(dist, "steal_ns", 0) + steal.get("total_ns", 0)
    dist.margin = rec["threads"][0]["config"].get("hybrid_margin_ns")


def us(v):
    return f"{v / 1000:.1f}" if v is not None else "-"


def table(a, b, title, floor_b=False):
    sa, sb = a.summary(), b.summary()
    print(f"\n### {title}\n")
    print(f"| figure | {a.name} (us) | {b.name} (us) | ratio {b.name} / {a.name} |")
    print("|---|---|---|---|")
    for key in ["count", "min", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max", "missed"]:
        va, vb = sa[key], sb[key]
        if key in ("count", "missed"):
            print(f"| {key} | {va} | {vb} | |")
            continue
        if floor_b and key != "mean":
            vb = (vb // 1000) * 1000  # same 1 us truncation as cyclictest's histogram
        ratio = f"{vb / va:.2f}" if va else "-"
        print(f"| {key} | {us(va)} | {us(vb)} | {ratio} |")
    return sa, sb


def main():
    seg = max(1, DURATION // ROUNDS)
    print(f"# Timer validation: cyclictest against ictus, CPU {CPU}, SCHED_FIFO 95, mlockall",
          flush=True)
    print(f"records in {OUT}", file=sys.stderr)
    ok = True
    for qos in SETTINGS:
        words = ("CPU latency QoS held at 0 us by both (cyclictest's default, ictus's default)"
                 if qos == "held" else
                 "CPU latency QoS off for both (cyclictest --laptop, ictus --pm-qos off)")
        ct, ic = Dist("cyclictest"), Dist("ictus")
        for r in range(ROUNDS):
            print(f"[{qos}] round {r + 1}/{ROUNDS}: {seg} s each at 1 ms", file=sys.stderr)
            cyclictest_round(ct, 1000, seg, f"1ms-{qos}-{r}", qos)
            ictus_round(ic, 1000, seg, f"1ms-{qos}-{r}", qos=qos)
        sa, sb = table(ct, ic, f"1 ms interval, {words}, {ROUNDS} alternating rounds of "
                       f"{seg} s per tool", floor_b=True)
        print("\nictus values are truncated to whole microseconds like cyclictest's histogram "
              "(mean excepted); cyclictest's 'missed' is the expected period count minus its cycles.")
        p50 = sb["p50"] / sa["p50"] if sa["p50"] else float("nan")
        mx = sb["max"] / sa["max"] if sa["max"] else float("nan")
        this_ok = 0.8 <= p50 <= 1.25
        ok = ok and this_ok
        print(f"\n[{qos}] p50 ratio {p50:.2f} ({'within' if this_ok else 'OUTSIDE'} 0.8 to 1.25); "
              f"max ratio {mx:.2f} ({'within' if mx <= 1.25 else 'above'} 1.25)")
        for b in getattr(ic, "explained", []):
            print(f"[{qos}] ictus explained: {b['events']} misses, by cause {b['by_cause']}")

    # What explaining every miss costs the measuring thread: ictus alone, sampler on
    # against off, alternated, QoS held.
    without, with_ = Dist("explain off"), Dist("explain on")
    for r in range(ROUNDS):
        print(f"[explain] round {r + 1}/{ROUNDS}: {seg} s each at 1 ms", file=sys.stderr)
        ictus_round(without, 1000, seg, f"1ms-explain-off-{r}", explain="off")
        ictus_round(with_, 1000, seg, f"1ms-explain-on-{r}", explain="on")
    se, sx = table(without, with_, f"1 ms, QoS held: ictus without against with the miss sampler, "
                   f"{ROUNDS} alternating rounds of {seg} s")
    print(f"\nsampler cost: p99 {us(sx['p99'] - se['p99'])} us, p50 {us(sx['p50'] - se['p50'])} us "
          "(with minus without)")

    print(f"\nhybrid comparison: {HYBRID_DURATION} s each at 100 us", file=sys.stderr)
    ns, hy, ct100 = Dist("nanosleep"), Dist("hybrid"), Dist("cyclictest")
    cyclictest_round(ct100, 100, HYBRID_DURATION, "100us")
    ictus_round(ns, 100, HYBRID_DURATION, "100us-nanosleep", "nanosleep")
    ictus_round(hy, 100, HYBRID_DURATION, "100us-hybrid", "hybrid")
    table(ct100, ns, "100 us: cyclictest against ictus nanosleep", floor_b=True)
    sn, sh = table(ns, hy, "100 us: ictus nanosleep against ictus hybrid")
    print(f"\nhybrid margin (calibrated): {us(getattr(hy, 'margin', None))} us")
    for label in ["p50", "p99", "p99.9"]:
        if sh[label]:
            print(f"{label}: hybrid cuts nanosleep's {us(sn[label])} us to {us(sh[label])} us "
                  f"(factor {sn[label] / max(1, sh[label]):.0f})")
    steal = sum(getattr(d, "steal_ns", 0) for d in (ic, ns, hy))
    print(f"\nsteal time during the ictus runs: {steal / 1e6:.1f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
