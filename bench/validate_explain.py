"""Injects known causes and counts how many misses ictus names (see validate-explain.sh)."""

import json
import os
import subprocess
import sys
import tempfile
import time

ICTUS = os.environ["ICTUS"]
DURATION = int(os.environ["DURATION"])
CAUSES = os.environ["CAUSES"].split()
OUT = os.environ["OUT_DIR"]
CPU = max(int(c) for c in os.sched_getaffinity(0))

# Each burst's start and end (CLOCK_MONOTONIC ns) on stdout: the misses it made are
# those whose window overlaps one.
BURNER = ("import time,sys\nend=time.monotonic()+{secs}\nwhile time.monotonic()<end:\n"
          " t=time.monotonic_ns()\n while time.monotonic_ns()-t<5000000: pass\n"
          " print(t, time.monotonic_ns(), flush=True)\n time.sleep(0.5)")
SPINNER = "import time\nend=time.monotonic()+{secs}\nwhile time.monotonic()<end: pass"
# Each burst: 2,000 fresh anonymous pages touched (one minor fault each, about 5 ms on
# this VM), then 500 ms asleep; its start, end and fault count on stdout.
FAULTER = ("import mmap,resource,time\nend=time.monotonic()+{secs}\nwhile time.monotonic()<end:\n"
           " f=resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n t=time.monotonic_ns()\n"
           " m=mmap.mmap(-1,2000*4096)\n for i in range(0,2000*4096,4096): m[i]=1\n"
           " m.close()\n print(t, time.monotonic_ns(),"
           " resource.getrusage(resource.RUSAGE_SELF).ru_minflt-f, flush=True)\n time.sleep(0.5)")


def timer(tag, extra=(), cpu=CPU):
    path = f"{OUT}/timer-{tag}.json"
    cmd = [ICTUS, "probe", "timer", "--cpus", str(cpu), "--mlock", "--duration",
           f"{DURATION}s", "--output", path, *extra]
    print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)


def spawn(prio, code, stdout=None):
    return subprocess.Popen(["chrt", "-f", str(prio), "taskset", "-c", str(CPU),
                             "python3", "-c", code], stdout=stdout)


def end(p):
    p.kill()
    p.wait()


def disk_irq_busiest(path):
    """Writes 4 KiB blocks with O_DIRECT|O_DSYNC for a second; the line that moved most."""
    def counts():
        out = {}
        with open("/proc/interrupts") as f:
            for line in f.readlines()[1:]:
                label, _, rest = line.partition(":")
                if label.strip().isdigit():
                    out[label.strip()] = sum(int(w) for w in rest.split() if w.isdigit())
        return out
    before = counts()
    disk_write(path, 1.0)
    after = counts()
    moved = sorted(((after[k] - before.get(k, 0), k) for k in after), reverse=True)
    return moved[0][1] if moved and moved[0][0] > 100 else None


def disk_write(path, secs):
    import mmap
    block = mmap.mmap(-1, 4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT | os.O_DSYNC, 0o600)
    end_at = time.monotonic() + secs
    n = 0
    try:
        while time.monotonic() < end_at:
            os.pwrite(fd, block, (n % 4096) * 4096)
            n += 1
    finally:
        os.close(fd)


def saw_line(ev, irq):
    """Whether the miss's window saw interrupt line `irq` fire on its CPU (a reason or
    only seen)."""
    for c in ev.get("causes", []) + ev.get("seen", []):
        for line, n in c.get("lines", []):
            if line.split(":")[0] == irq and n > 0:
                return True
    return False


def disk_case(cause):
    """Direct disk writes with their interrupt on the measured CPU (`irq`), or, the
    control (`irq-away`), away from it: steered to another CPU, or, where the kernel
    manages the line's affinity (a virtio queue's), the timer measured on another CPU
    than the line's. The misses both runs have are the writes' other costs (on a VM,
    the host serving them: the vCPU stopped), not the interrupt's."""
    with tempfile.TemporaryDirectory(dir=OUT) as d:
        scratch = os.path.join(d, "scratch")
        irq = disk_irq_busiest(scratch)
        if irq is None:
            print(f"| disk interrupts ({cause}) | - | - | - | - | - | - | direct writes raised no interrupt |")
            return
        other = min(c for c in os.sched_getaffinity(0) if c != CPU)
        target, measured = (CPU if cause == "irq" else other), CPU
        aff = f"/proc/irq/{irq}/smp_affinity_list"
        with open(aff) as f:
            before = f.read().strip()
        cpu_note = ""
        try:
            with open(aff, "w") as f:
                f.write(str(target))
        except OSError:
            with open(f"/proc/irq/{irq}/effective_affinity_list") as f:
                served = f.read().strip()
            cpu_note = f"; managed IRQ, served on CPU {served}"
            if cause == "irq-away":
                measured = other if served == str(CPU) else CPU
        try:
            import threading
            t = threading.Thread(target=disk_write, args=(scratch, DURATION + 1))
            t.start()
            time.sleep(0.2)
            rec = timer(cause, ["--explain-threshold", "50us"], cpu=measured)
            t.join()
        finally:
            try:
                with open(aff, "w") as f:
                    f.write(before)
            except OSError:
                pass
    made, b = share(rec, 50_000)
    with_line = [ev for ev in made if saw_line(ev, irq)]
    stalls = sum(1 for ev in made
                 if any(c.get("cause") == "host-stall" for c in ev.get("causes", [])))
    line_ns = sum(c.get("accounts_ns", 0) for ev in with_line for c in ev.get("causes", []) + ev.get("seen", [])
                  if c.get("cause") == "interrupts")
    long = sorted(ev["at_ns"] for ev in made if ev["lateness_ns"] >= 1_000_000)
    gaps = sorted(b2 - a for a, b2 in zip(long, long[1:]))
    every = f", every {gaps[len(gaps) // 2] / 1e6:.0f} ms (median gap)" if gaps else ""
    where = (f"on the measured CPU {measured}" if cause == "irq"
             else f"away from the measured CPU {measured} (control)")
    row(f"disk interrupts (IRQ {irq}) {where}", made, f'"{irq}:', b,
        f"releases 50 us or more late, {len(long)} of them 1 ms or more{every}; "
        f"{len(with_line)} saw IRQ {irq} fire in their window "
        f"(the interrupts' accounted time in them: {line_ns / 1000:.0f} us in all); "
        f"{stalls} named a host stall{cpu_note}")


def named(ev, needle):
    """The reason (a cause named for the miss) whose JSON holds `needle`, if any."""
    for c in ev.get("causes", []):
        if needle in json.dumps(c):
            return c
    return None


def timed(made, needle):
    """Of the misses a cause made: how many name it as a reason, how many of those with a
    time within 0.5x to 1.5x of their lateness, and the median of time over lateness."""
    ratios = []
    for ev in made:
        c = named(ev, needle)
        if c is not None:
            ratios.append(c.get("accounts_ns", 0) / max(ev["lateness_ns"], 1))
    within = sum(1 for r in ratios if 0.5 <= r <= 1.5)
    ratios.sort()
    median = ratios[len(ratios) // 2] if ratios else None
    return len(ratios), within, median


def share(rec, min_late_ns):
    e = rec.get("explanation") or {}
    events = [ev for ev in e.get("events", []) if ev["lateness_ns"] >= min_late_ns]
    return events, e.get("breakdown", {})


def accounted(events):
    """The misses' accounted shares: median, and how many have half their lateness
    accounted for by the guest's counters."""
    shares = sorted(ev.get("accounted_share", 0.0) for ev in events)
    if not shares:
        return "-"
    half = sum(1 for s in shares if s >= 0.5)
    return (f"median {100 * shares[len(shares) // 2]:.0f} %, "
            f"{half} of {len(shares)} at least half")


def row(cause, made, needle, breakdown, note=""):
    n = len(made)
    hits, within, median = timed(made, needle) if needle else (0, 0, None)
    pct = f"{100 * hits / n:.0f} %" if n and needle else "-"
    time = (f"{within} of {hits} within 0.5x-1.5x (median {median:.2f}x)"
            if hits else "-")
    by = ", ".join(f"{c} {p}" for p, c in breakdown.get("by_cause", []))
    print(f"| {cause} | {n} | {hits} | {pct} | {time} | {accounted(made)} | {by or '-'} | "
          f"{note} |", flush=True)


def burst_case(tag, code):
    """Runs `code` at FIFO 99 on the measured CPU (it prints each burst's start and end,
    CLOCK_MONOTONIC ns, and maybe more) while the timer runs: the misses whose window
    overlaps a burst, the explanation, and the bursts."""
    bursts_path = f"{OUT}/{tag}-bursts.txt"
    with open(bursts_path, "w") as log:
        p = spawn(99, code.format(secs=DURATION + 2), stdout=log)
        try:
            time.sleep(0.3)
            rec = timer(tag)
        finally:
            end(p)
    with open(bursts_path) as f:
        bursts = [tuple(map(int, l.split())) for l in f if l.strip()]
    e = rec.get("explanation") or {}
    t0 = e.get("clock_start_ns", 0)
    made = [ev for ev in e.get("events", [])
            if any(b[0] <= t0 + ev["at_ns"] + ev["lateness_ns"] and b[1] >= t0 + ev["at_ns"]
                   for b in bursts)]
    return made, e, bursts


def main():
    print(f"# Injected causes named: `ictus probe timer` on CPU {CPU}, FIFO 95, 1 ms, "
          f"{DURATION} s per cause, CPU latency QoS held\n")
    print("| cause injected | misses it made | named as it (a reason) | share | its time against "
          "the lateness | accounted shares | breakdown (cause accounting for most) | note |")
    print("|---|---|---|---|---|---|---|---|")
    for cause in CAUSES:
        if cause == "none":
            rec = timer("none")
            e = rec.get("explanation") or {}
            b = e.get("breakdown", {})
            row("none", e.get("events", []), None, b,
                f"what the machine does by itself; {b.get('events', 0)} misses in all")
        elif cause == "burner":
            made, e, bursts = burst_case("burner", BURNER)
            row("FIFO 99 burner, 5 ms every 500 ms", made, '"comm": "python3"',
                e.get("breakdown", {}),
                f"misses whose window overlaps one of its {len(bursts)} bursts")
        elif cause == "faults":
            made, e, bursts = burst_case("faults", FAULTER)
            faults = sorted(int(b[2]) for b in bursts)
            row("another process's page faults (FIFO 99, 2,000 pages a burst, every 500 ms)",
                made, '"comm": "python3"', e.get("breakdown", {}),
                f"misses whose window overlaps one of its {len(bursts)} bursts "
                f"(median {faults[len(faults) // 2] if faults else 0} faults a burst); "
                "named as the process that faulted, with its run time")
        elif cause == "throttle":
            p = spawn(50, SPINNER.format(secs=DURATION + 2))
            try:
                time.sleep(0.3)
                rec = timer("throttle")
            finally:
                end(p)
            made, b = share(rec, 20_000_000)
            row("busy FIFO 50 spinner (RT throttling)", made, '"rt-throttling"', b,
                "misses 20 ms or more late")
        elif cause in ("irq", "irq-away"):
            disk_case(cause)
    print(f"\nrecords in {OUT}")


if __name__ == "__main__":
    main()
