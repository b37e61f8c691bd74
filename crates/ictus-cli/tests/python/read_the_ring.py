"""Driven by crates/ictus-cli/tests/python.rs while seed 003's ring runs on three hosts:
reads cells A, B and C with ictus.live as a reader of the run, tries to write (cells
under the name of the hosts that write them, a tick that would stop the run at frame
1), and prints what it saw as one JSON object.

    python read_the_ring.py ENDPOINT KEYS READER RUN
"""

import json
import struct
import sys
import time

import zenoh

from ictus.live import Run, connect

endpoint, keys, reader, name = sys.argv[1:5]
session = connect(endpoint, keys, reader, timeout=10)
try:
    run = Run(session, name)
    layout = run.layout(timeout=10)
    ticks = []
    tick_sub = run.subscribe_ticks(lambda t: ticks.append(t.frame))
    first = {c: run.read(c, timeout=5) for c in "ABC"}
    # The view's ticks come 20 times a second: a few of them (bounded).
    until = time.monotonic() + 2
    while len(ticks) < 3 and time.monotonic() < until:
        time.sleep(0.02)
    tick_sub.undeclare()

    # Writes a reader may not make: each cell's counter at 10^9 under the name of
    # the host that writes it (B and C are read by the ring's subsystems, so a value
    # that got in would carry on round the ring), and a tick with stop frame 1.
    def forged(host):
        head = struct.pack("<HqQH", host, 0, 1, 1)
        return head + struct.pack("<II", 0, 4) + struct.pack("<i", 10**9)

    attempts = [
        (run.key("cell/A/h2"), forged(1)),
        (run.key("cell/B/h2"), forged(1)),
        (run.key("cell/C/h3"), forged(2)),
        (run.key("tick"), struct.pack("<5Q", 5, 0, 0, 0, 1)),
        # And the readers' view, which other readers read.
        (run.key("view/cell/B/h2"), forged(1)),
        (run.key("view/tick"), struct.pack("<5Q", 5, 0, 0, 0, 1)),
    ]
    put_errors = []
    for _ in range(20):
        for key, payload in attempts:
            try:
                # To the run only: this session's own subscribers are not the run.
                session.put(key, payload, allowed_destination=zenoh.Locality.REMOTE)
            except Exception as e:  # Reported, not raised.
                put_errors.append(f"{key}: {e}")
        time.sleep(0.01)

    # Read again until every counter moved on (bounded).
    second = first
    until = time.monotonic() + 5
    while time.monotonic() < until:
        second = {c: run.read(c, timeout=5) for c in "ABC"}
        if all(second[c]["int"] > first[c]["int"] for c in "ABC"):
            break
        time.sleep(0.05)
    out = {
        "layout": layout,
        "first": first,
        "second": second,
        "ticks": ticks,
        "alive": run.alive(),
        "refused": run.refused,
        "put_errors": put_errors,
    }
    print(json.dumps(out))
finally:
    session.close()
