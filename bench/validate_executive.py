"""Measures the cyclic executive against the timer probe (see validate-executive.sh)."""

import glob
import json
import os
import re
import subprocess
import sys

ICTUS = os.environ["ICTUS"]
ROOT = os.environ["ROOT"]
CPU = int(os.environ["CPU"])
PRIORITY = int(os.environ["PRIORITY"])
ROUNDS = max(1, int(os.environ["ROUNDS"]))
JITTER_DURATION = int(os.environ["JITTER_DURATION"])
WAITS = os.environ["WAITS"].split()
MLOCK = os.environ["MLOCK"] not in ("", "0", "no")
DURATION = int(os.environ["DURATION"])
TICKS = os.environ["TICKS"].split()
OVERHEAD_DURATION = int(os.environ["OVERHEAD_DURATION"])
OVERHEAD_COUNTS = [int(n) for n in os.environ["OVERHEAD_COUNTS"].split()]
OVERHEAD_WAIT = os.environ["OVERHEAD_WAIT"]
PARTS = os.environ["PARTS"].split()
OUT = os.environ["OUT_DIR"]
PCTS = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)]

failures = []


def fifo_permitted():
    """Whether this user may use SCHED_FIFO at PRIORITY (tried in a child process)."""
    code = ("import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(%d))" % PRIORITY)
    return subprocess.run([sys.executable, "-c", code], stderr=subprocess.DEVNULL).returncode == 0


FIFO = fifo_permitted()


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(cmd):
    print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    if r.returncode != 0:
        failures.append(f"{' '.join(cmd)}: exit {r.returncode}")
    return r.returncode == 0


def read(path):
    with open(path) as f:
        return json.load(f)


def rank(count, q):
    # Nearest rank, as ictus computes it.
    return max(1, -(-count * round(q * 100000) // 100000))


class Dist:
    """A latency distribution in nanoseconds, merged over rounds from record histograms
    (percentiles of merged rounds are read from the merged buckets; min and max are exact)."""

    def __init__(self, name):
        self.name, self.buckets, self.count, self.min, self.max = name, {}, 0, None, 0
        self.missed, self.steal_ns, self.margins = 0, 0, []

    def add_latency(self, lat):
        s = lat["summary"]
        for b in lat["histogram"]["buckets"]:
            self.buckets[b["value_ns"]] = self.buckets.get(b["value_ns"], 0) + b["count"]
        self.count += s["count"]
        if s["count"]:
            self.min = s["min_ns"] if self.min is None else min(self.min, s["min_ns"])
            self.max = max(self.max, s["max_ns"])
        self.missed += lat.get("missed", 0)

    def pct(self, q):
        if not self.count:
            return None
        r, seen = rank(self.count, q), 0
        for v, c in sorted(self.buckets.items()):
            seen += c
            if seen >= r:
                return v
        return self.max

    def summary(self):
        s = {"samples": self.count, "min": self.min, "max": self.max, "missed": self.missed}
        for label, q in PCTS:
            s[label] = self.pct(q)
        return s


def us(v):
    if v is None:
        return "-"
    return f"{v / 1000:.1f}" if v >= 1000 else f"{v / 1000:.3f}"


def steal(rec):
    return ((rec.get("environment") or {}).get("steal") or {}).get("total_ns", 0)


def measurement(rec, name, subsystem=None):
    for m in rec["measurements"]:
        if m["name"] == name and (subsystem is None or m["labels"].get("subsystem") == subsystem):
            return m
    return None


def class_lines():
    if FIFO:
        return f'class = "rt1"\npriority = {PRIORITY}\n'
    return 'class = "normal"\n'


def idle_schedule(name, count, wait, tick="1ms"):
    text = (f'name = "{name}"\ntick = "{tick}"\nmajor_frame = 1\nwait = "{wait}"\n'
            f'initial_state = "run"\n')
    for k in range(count):
        text += (f'\n[[subsystem]]\nname = "s{k}"\nstart = 0\nperiod = 1\ncpu = {CPU}\n'
                 f'{class_lines()}builtin = "idle"\n')
    path = f"{OUT}/{name}.toml"
    with open(path, "w") as f:
        f.write(text)
    return path


def ictus_run(schedule, seconds, out, extra=()):
    return run([ICTUS, "run", schedule, "--duration", f"{seconds}s", "--quiet", "-o", out, *extra])


# --- (a+b) release jitter against the timer probe --------------------------------------

def probe_round(dist, seconds, wait, tag):
    path = f"{OUT}/probe-{tag}.json"
    policy = ["--policy", "fifo", "--priority", str(PRIORITY)] if FIFO else ["--policy", "other"]
    cmd = [ICTUS, "probe", "timer", "--cpus", str(CPU), "--interval", "1ms",
           "--duration", f"{seconds}s", "--warmup", "0s", "--mode", wait, *policy]
    if MLOCK:
        cmd.append("--mlock")
    if not run(cmd + ["-o", path]):
        return
    rec = read(path)
    dist.add_latency(rec["merged"])
    dist.steal_ns += steal(rec)
    m = rec["threads"][0]["config"].get("hybrid_margin_ns")
    if m:
        dist.margins.append(m)


def executive_round(dist, seconds, schedule, tag):
    path = f"{OUT}/run-{tag}.json"
    if not ictus_run(schedule, seconds, path):
        return
    rec = read(path)
    j = measurement(rec, "release-jitter", "s0")
    dist.add_latency(j["latency"])
    dist.steal_ns += steal(rec)
    m = j["metrics"].get("hybrid_margin_ns")
    if m:
        dist.margins.append(int(m))


def jitter_part():
    seg = max(1, JITTER_DURATION // ROUNDS)
    cls = f"SCHED_FIFO {PRIORITY}" if FIFO else "the normal class (SCHED_FIFO refused)"
    print(f"\n## (a+b) Release jitter of a 1 kHz subsystem against the timer probe\n")
    print(f"CPU {CPU}, {cls}, 1 ms, {ROUNDS} alternating rounds of {seg} s per tool and wait "
          f"mode; probe: `ictus probe timer --cpus {CPU} --interval 1ms --duration {seg}s "
          f"--warmup 0s --mode WAIT{' --mlock' if MLOCK else ''}`; executive: `ictus run` of "
          f"one `idle` subsystem (start 0, period 1) on CPU {CPU}, same class, same wait. "
          f"Both measure wake-up time minus deadline; 'missed' is the probe's missed periods "
          f"and the executive's overruns (both skipped, not measured).")
    for wait in WAITS:
        sched = idle_schedule(f"vx-jitter-{wait}", 1, wait)
        pr, ex = Dist("timer probe"), Dist("executive")
        load = loadavg()
        for r in range(ROUNDS):
            print(f"{wait} round {r + 1}/{ROUNDS}: {seg} s each", file=sys.stderr)
            probe_round(pr, seg, wait, f"{wait}-{r}")
            executive_round(ex, seg, sched, f"jitter-{wait}-{r}")
        sp, se = pr.summary(), ex.summary()
        print(f"\n### wait {wait} (load average before: {load})\n")
        print("| figure | timer probe (us) | executive (us) | ratio executive / probe |")
        print("|---|---|---|---|")
        for key in ["samples", "missed", "min", "p50", "p90", "p99", "p99.9", "max"]:
            a, b = sp[key], se[key]
            if key in ("samples", "missed"):
                print(f"| {key} | {a} | {b} | |")
            else:
                ratio = f"{b / a:.2f}" if a and b is not None else "-"
                print(f"| {key} | {us(a)} | {us(b)} | {ratio} |")
        if pr.margins or ex.margins:
            print(f"\nhybrid margins (calibrated per run): probe "
                  f"{', '.join(us(m) for m in pr.margins)} us; executive "
                  f"{', '.join(us(m) for m in ex.margins)} us")
        print(f"\nsteal time: probe runs {pr.steal_ns / 1e6:.1f} ms, executive runs "
              f"{ex.steal_ns / 1e6:.1f} ms")


# --- (c) the stress test ------------------------------------------------------------------

def stress_schedule():
    src = f"{ROOT}/examples/stress/schedule.toml"
    if FIFO and CPU == 1 and PRIORITY == 80:
        return src
    with open(src) as f:
        text = f.read()
    text = re.sub(r"(?m)^cpu = \d+$", f"cpu = {CPU}", text)
    text = re.sub(r'(?m)^class = "rt1"\npriority = \d+\n', class_lines(), text)
    text = text.replace('cells = "cells.toml"', f'cells = "{ROOT}/examples/stress/cells.toml"')
    path = f"{OUT}/stress.toml"
    with open(path, "w") as f:
        f.write(text)
    return path


def stress_part():
    sched = stress_schedule()
    print(f"\n## (c) The seed 003 stress test, {DURATION} s per tick\n")
    print(f"`ictus run {os.path.relpath(sched, ROOT)} --duration {DURATION}s --tick TICK`: "
          f"A and C in-process, B in its own process (ictus subsystem), all on CPU {CPU}"
          f"{f', SCHED_FIFO {PRIORITY}' if FIFO else ', normal class'}, hybrid wait; "
          f"missed frames = frames in RUN - the largest final counter.\n")
    print("| tick | frames in RUN | final value | missed frames | incoherent cells | overruns "
          "A/B/C | lost | jitter p50 / p99 / max (us, worst subsystem) | exec p50 A (us) | "
          "steal (ms) | load before |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for tick in TICKS:
        load = loadavg()
        print(f"stress at {tick}: {DURATION} s", file=sys.stderr)
        path = f"{OUT}/stress-{tick}.json"
        if not ictus_run(sched, DURATION, path, ["--tick", tick]):
            continue
        rec = read(path)
        st = measurement(rec, "stress")
        if st is None:
            failures.append(f"stress {tick}: no stress measurement in {path}")
            continue
        m = st["metrics"]
        if m["incoherent_cells"]:
            failures.append(f"stress {tick}: {int(m['incoherent_cells'])} incoherent cells")
        ovr, lost, jit, exa = [], 0, {"p50": 0, "p99": 0, "max": 0}, None
        for name in ("A", "B", "C"):
            j = measurement(rec, "release-jitter", name)
            ovr.append(str(int(j["metrics"]["overruns"])))
            lost += int(j["metrics"]["lost_frames"])
            if j.get("latency"):
                s = j["latency"]["summary"]
                jit["p50"] = max(jit["p50"], s["p50_ns"] or 0)
                jit["p99"] = max(jit["p99"], s["p99_ns"] or 0)
                jit["max"] = max(jit["max"], s["max_ns"] or 0)
            if name == "A":
                e = measurement(rec, "execution-time", "A")
                exa = e["latency"]["summary"]["p50_ns"] if e.get("latency") else None
        print(f"| {tick} | {int(m['run_frames'])} | {int(m['final_value'])} | "
              f"**{int(m['missed_frames'])}** | {int(m['incoherent_cells'])} | {'/'.join(ovr)} | "
              f"{lost} | {us(jit['p50'])} / {us(jit['p99'])} / {us(jit['max'])} | {us(exa)} | "
              f"{steal(rec) / 1e6:.1f} | {load} |")
    print("\nexec p50 A: A's frame, wake-up to outputs published: copy cell A in (4872 B, "
          "seqlock read), add one to each of its 1,265 values, publish cell B (4872 B, "
          "seqlock write). Jitter: the largest p50, p99 and max of the three subsystems.")


# --- (d) overhead -------------------------------------------------------------------------

def overhead_part():
    print(f"\n## (d) Executive overhead: N idle subsystems released together at 1 kHz on CPU "
          f"{CPU}, {OVERHEAD_DURATION} s each, wait {OVERHEAD_WAIT}\n")
    print("Execution time: wake-up to outputs published for a subsystem that does nothing, "
          "i.e. the executive's own work per release (the state read, the empty input and "
          "output copies, the acknowledgement, the closing clock read). Release jitter: "
          "wake-up minus deadline; all N share one deadline and one CPU, so the k-th to "
          "wake also waits for the k-1 before it. 'added per subsystem' = (highest "
          "jitter p50 - lowest jitter p50 among the N) / (N - 1), within one run: what one more "
          "subsystem in the same frame costs those after it (its wake-up, its frame, a "
          "context switch).\n")
    print("| N | exec p50, median over subsystems (us) | exec p99, worst (us) | jitter p50, "
          "lowest (us) | jitter p50, highest (us) | jitter p99, worst (us) | added per "
          "subsystem (us) | overruns | steal (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in OVERHEAD_COUNTS:
        sched = idle_schedule(f"vx-overhead-{n}", n, OVERHEAD_WAIT)
        path = f"{OUT}/overhead-{n}.json"
        print(f"overhead: {n} subsystems, {OVERHEAD_DURATION} s", file=sys.stderr)
        if not ictus_run(sched, OVERHEAD_DURATION, path):
            continue
        rec = read(path)
        ex50, ex99, j50, j99, ovr = [], [], [], [], 0
        for k in range(n):
            j = measurement(rec, "release-jitter", f"s{k}")
            e = measurement(rec, "execution-time", f"s{k}")
            ovr += int(j["metrics"]["overruns"])
            if j.get("latency") and e.get("latency"):
                ex50.append(e["latency"]["summary"]["p50_ns"])
                ex99.append(e["latency"]["summary"]["p99_ns"])
                j50.append(j["latency"]["summary"]["p50_ns"])
                j99.append(j["latency"]["summary"]["p99_ns"])
        if not ex50:
            continue
        med = sorted(ex50)[len(ex50) // 2]
        first, last = min(j50), max(j50)
        added = f"{(last - first) / 1000 / (n - 1):.2f}" if n > 1 else "-"
        print(f"| {n} | {us(med)} | {us(max(ex99))} | {us(first)} | {us(last)} | "
              f"{us(max(j99))} | {added} | {ovr} | {steal(rec) / 1e6:.1f} |")


def main():
    print(f"# Cyclic executive validation, CPU {CPU}, "
          f"{f'SCHED_FIFO {PRIORITY}' if FIFO else 'normal class (SCHED_FIFO refused)'}")
    print(f"records in {OUT}", file=sys.stderr)
    if not FIFO:
        print("\nSCHED_FIFO was refused: everything runs in the normal class. Run as root (or "
              "grant CAP_SYS_NICE, or raise RLIMIT_RTPRIO) to measure the real-time classes.")
    with open("/proc/cpuinfo") as f:
        model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    print(f"\n{os.cpu_count()} CPUs ({model}), kernel {os.uname().release}, "
          f"load average at start {loadavg()}")
    if "jitter" in PARTS:
        jitter_part()
    if "stress" in PARTS:
        stress_part()
    if "overhead" in PARTS:
        overhead_part()
    # Only this script's runs (other programs may hold segments of their own).
    left = glob.glob("/dev/shm/ictus-stress*") + glob.glob("/dev/shm/ictus-vx-*")
    if left:
        failures.append(f"segments left behind: {' '.join(left)}")
    if failures:
        print("\n## Failures\n")
        for f in failures:
            print(f"- {f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
