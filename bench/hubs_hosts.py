"""The tables of bench/hubs-hosts.sh, from the records it wrote in OUT_DIR.

    python3 bench/hubs_hosts.py OUT_DIR

Reads the JSON lines of zhub (crates/ictus-net/examples/zhub), udp_pingpong and
net_throughput (bench/c/); a row whose record is missing or failed says so.
Prints Markdown; never judges.
"""

import json
import os
import sys

out = sys.argv[1]
env = os.environ


def load(name):
    """The record `name` in OUT_DIR, or None."""
    try:
        with open(os.path.join(out, name)) as f:
            line = f.read().strip()
        return json.loads(line) if line else None
    except (OSError, ValueError):
        return None


def why(name):
    """Why `name` has no record: its exit status."""
    try:
        rc = open(os.path.join(out, name + ".rc")).read().strip()
    except OSError:
        return "not run"
    return f"failed (exit {rc}, see {name}.err)"


def fig(v):
    """Three significant figures (whole numbers from 100), without an exponent above 1."""
    return f"{v:.0f}" if v >= 99.5 else f"{v:.3g}"


def us(ns):
    return "-" if ns is None else f"{ns / 1000:.1f}"


def lat(r):
    """A zhub record's latency summary, or the C tools' flat or nested one."""
    if r is None:
        return None
    return r.get("latency", r)


rounds = int(env.get("ROUNDS", "2"))
links = env.get("LINKS", "plain secure").split()
LINK_NAME = {"plain": "Zenoh TCP", "secure": "Zenoh QUIC, mutual TLS"}
sizes = [int(s) for s in env.get("SIZES", "1 64 1024 4096 32768").split()]

print("### Table 2: the semaphore loop (one round trip per iteration, us)")
print()
print("| placement | round trips | p50 | p99 | max | loops/s | p50 / UDP p50 | max / UDP max | p50 / Zenoh p50 | wire bytes per round trip |")
print("|---|---|---|---|---|---|---|---|---|---|")


def sem_row(label, r, udp=None, wire=None, zping=None):
    if r is None:
        print(f"| {label} | - | - | - | - | - | - | - | - | - |")
        return
    s = lat(r)
    ratio50 = ratiomax = ratioz = "-"
    if udp is not None:
        ratio50 = f"{s['p50_ns'] / udp['p50_ns']:.2f}x"
        ratiomax = f"{s['max_ns'] / udp['max_ns']:.2f}x"
    if zping is not None:
        ratioz = f"{s['p50_ns'] / zping['p50_ns']:.2f}x"
    w = f"{wire / s['count']:.0f}" if wire is not None else "-"
    rate = f"{r['loops_per_s']:.0f}" if "loops_per_s" in r else f"{1e9 / r['mean_ns']:.0f}"
    print(f"| {label} | {s['count']} | {us(s['p50_ns'])} | {us(s['p99_ns'])} | {us(s['max_ns'])} | {rate} | {ratio50} | {ratiomax} | {ratioz} | {w} |")


cpu_a, cpu_b = env.get("CPU_A", "0"), env.get("CPU_B", "1")
sem_row(f"one core (CPU {cpu_a})", load("sem-core.json"))
sem_row(f"across cores (CPU {cpu_a}, {cpu_b})", load("sem-cores.json"))
sem_row(f"across processes (CPU {cpu_a}, {cpu_b})", load("sem-processes.json"))
for r in range(1, rounds + 1):
    udp = load(f"udp-{r}.json")
    size = udp["size"] if udp else env.get("SEM_UDP_SIZE", "64")
    if udp is None:
        print(f"| bare UDP round trip, {size} B, host 1 -> 2 (round {r}) | failed | | | | | | | | |")
    else:
        sem_row(f"bare UDP round trip, {size} B, host 1 -> 2 (round {r})", udp)
    zping = load(f"zping-{r}.json")
    if zping is None:
        print(f"| Zenoh round trip (zping, TCP), {size} B (round {r}) | failed | | | | | | | | |")
    else:
        sem_row(f"Zenoh round trip (zping, TCP), {size} B (round {r})", zping, udp)
    for link in links:
        name = f"sem-hosts-{link}-{r}.json"
        label = f"across hosts, {LINK_NAME.get(link, link)} (round {r})"
        hosts = load(name)
        if hosts is None:
            print(f"| {label} | {why(name)} | | | | | | | | |")
            continue
        try:
            wire = int(open(os.path.join(out, f"sem-hosts-{link}-{r}.wire")).read())
        except (OSError, ValueError):
            wire = None
        sem_row(label, hosts, udp, wire, zping)
print()
print("Loops/s is the seed's 'maximum task interactions per second' (recorded round trips over")
print("their span). The ratios divide the across-host loop by the bare UDP round trip and by")
print("Zenoh's own round trip (64 B, plain TCP, no hubs) measured just before it; wire bytes:")
print("both hosts' eth0 tx bytes (Zenoh, TCP or QUIC, IP, Ethernet) over the whole across-host")
print("run, warm-up and joining included, per recorded round trip.")
print()

print("### Figures 6-7: port throughput by payload (MB/s, 10^6 bytes of payload per second)")
print()
cols = [
    ("port, one core", "port-core-{}.json"),
    ("port, across cores", "port-cores-{}.json"),
    ("port, across processes", "port-processes-{}.json"),
] + [(f"port, across hosts ({LINK_NAME.get(l, l)})", f"port-hosts-{l}-{{}}.json") for l in links] + [
    ("TCP stream", "tcp-stream-{}.json"),
    ("TCP + reply", "tcp-sync-{}.json"),
    ("UDP + reply", "udp-sync-{}.json"),
    ("UDP blast (lost)", "udp-blast-{}.json"),
]
print("| bytes | " + " | ".join(c for c, _ in cols) + f" | port across hosts ({LINK_NAME.get(links[0], links[0]) if links else '-'}) / UDP + reply |")
print("|---" * (len(cols) + 2) + "|")
for size in sizes:
    row = [str(size)]
    for label, pattern in cols:
        r = load(pattern.format(size))
        if r is None:
            row.append("-")
            continue
        cell = fig(r['bytes_per_s'] / 1e6)
        if "blast" in pattern:
            cell += f" ({r['lost']} of {r['count']})"
        row.append(cell)
    ph = load(f"port-hosts-{links[0]}-{size}.json") if links else None
    us_ = load(f"udp-sync-{size}.json")
    row.append(f"{fig(ph['bytes_per_s'] / us_['bytes_per_s'])}x" if ph and us_ else "-")
    print("| " + " | ".join(row) + " |")
print()
print("### Across hosts, per message (us): port receive to receive; TCP and UDP send to reply")
print()
heads = [f"port ({LINK_NAME.get(l, l)})" for l in links] + ["TCP + reply", "UDP + reply"]
print("| bytes | " + " | ".join(f"{h} p50 | p99 | max" for h in heads) + " | messages (port / references) |")
print("|---" * (3 * len(heads) + 2) + "|")
for size in sizes:
    row = [str(size)]
    counts = []
    names = [f"port-hosts-{l}-{size}.json" for l in links] + [f"tcp-sync-{size}.json", f"udp-sync-{size}.json"]
    for name in names:
        s = lat(load(name))
        if s is None or "p50_ns" not in s:
            row += ["-", "-", "-"]
        else:
            row += [us(s["p50_ns"]), us(s["p99_ns"]), us(s["max_ns"])]
            if str(s["count"]) not in counts:
                counts.append(str(s["count"]))
    row.append(" / ".join(counts) or "-")
    print("| " + " | ".join(row) + " |")
print()
print("A port's send returns once the receiver has copied the message, so each message is one")
print("hand-over: TCP and UDP + reply are its bare analogues (one message, one one-byte reply);")
print("TCP stream and UDP blast are the links' asynchronous bounds (UDP blast: the receiver's")
print("rate, first datagram to last; lost datagrams are not retried). In one host the port's")
print("threads are on CPU_A and CPU_B as in Table 2.")
