"""Driven by crates/ictus-cli/tests/python.rs: a peer whose certificate the reader's
TLS layer accepts but that is none of the run's hosts serves a layout of the run;
a reader (from its own bundle) must take nothing from it. The same server under a
host's certificate is the control: the reader takes its layout. Prints one JSON
object: per server, "layout" when the reader got it, "nothing" when it did not.

Zenoh's TLS layer trusts Mozilla's public roots besides the run's CA, which a test
cannot sign with; a certificate the run's CA signed for a reader (a stolen reader's
key, itself an attack on the other readers) is accepted the same way and carries a
name that is not a host's, as a public CA's would.

    python impostor.py KEYS READER_BUNDLE RUN
"""

import json
import socket
import sys
from pathlib import Path

import zenoh

from ictus.live import Run, connect

keys, bundle, name = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
layout = {
    "wire": 1,
    "byte_order": "little-endian",
    "run": name,
    "hosts": ["h1"],
    "cells": [],
    "tick_ns": 1_000_000,
}


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(cert, key, port):
    """A Zenoh peer on quic/127.0.0.1:PORT with ``cert`` (the run's CA checks its
    clients), answering the run's layout."""
    config = zenoh.Config()
    for path, value in {
        "mode": "peer",
        "listen/endpoints": [f"quic/127.0.0.1:{port}"],
        "scouting/multicast/enabled": False,
        "transport/link/tls/root_ca_certificate": str(keys / "ca.pem"),
        "transport/link/tls/listen_certificate": str(cert),
        "transport/link/tls/listen_private_key": str(key),
        "transport/link/tls/enable_mtls": True,
    }.items():
        config.insert_json5(path, json.dumps(value))
    session = zenoh.open(config)
    body = json.dumps(layout)
    queryable = session.declare_queryable(
        f"ictus/{name}/layout", lambda q: q.reply(q.key_expr, body)
    )
    return session, queryable


seen = {}
for who, cert, key in [
    ("not-a-host", keys / "readers/intruder.pem", keys / "readers/intruder.key"),
    ("h1", keys / "hosts/h1.pem", keys / "hosts/h1.key"),
]:
    port = free_udp_port()
    server, queryable = serve(cert, key, port)
    try:
        session = connect(f"quic/127.0.0.1:{port}", bundle, "python", timeout=5)
        try:
            Run(session, name).layout(timeout=3)
            seen[who] = "layout"
        except TimeoutError:
            seen[who] = "nothing"
        finally:
            session.close()
    finally:
        queryable.undeclare()
        server.close()
print(json.dumps(seen))
