"""Read a running ictus run from Python, over Zenoh (docs/wire.md, wire version 1).

Also importable as ``ictus_zenoh``, its name before version 0.2.

A run across hosts (``ictus run`` on the main host, ``ictus node`` on the others)
publishes its cells, its tick and its hosts' status on Zenoh keys under
``ictus/RUN/``; for readers, each host publishes a view of them (``view/cell/C/H``,
``view/tick``) 20 times a second, the latest values, so that no reader slows the
run. With a reader's certificate of the run (``ictus keys new KEYS --hosts ...
--readers NAME``) a tool connects to any host over TLS, gets the view and the status
and may ask for the layout and the claims; it may never write (the hosts' access
rules refuse it).

The decoders are pure Python and need nothing but the standard library::

    >>> tick = decode_tick(bytes(range(40)))
    >>> tick.frame == int.from_bytes(bytes(range(8)), "little")
    True
    >>> cell = {"name": "A", "bytes": 6, "elements": [
    ...     {"name": "n", "type": "i16", "len": 1, "offset": 0, "bytes": 2},
    ...     {"name": "c", "type": "char", "len": 1, "offset": 2, "bytes": 4}]}
    >>> decode_elements(cell, b"\\x07\\x00A\\x00\\x00\\x00")
    {'n': 7, 'c': 'A'}

:func:`connect` and :class:`Run` need ``eclipse-zenoh==1.10.2`` (the Zenoh of the
hosts: ``pip install "./python[live]"``; without it :func:`connect` raises
:class:`ictus.MissingPart` saying so)::

    session = connect("quic/10.77.0.1:7447", "KEYS", "python")
    run = Run(session, "stress")
    print(run.read("A")["int"])
    session.close()
"""

from __future__ import annotations

import json
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .._need import need
from ..cells import decode_elements

__all__ = [
    "WIRE_VERSION",
    "TICK_BYTES",
    "END_FRAME",
    "NO_STOP",
    "Publication",
    "Tick",
    "decode_publication",
    "decode_tick",
    "decode_elements",
    "merge_publication",
    "check_layout",
    "host_names",
    "access_rules",
    "connect",
    "Run",
]

#: The version of the wire format this module reads (the layout's ``wire``).
WIRE_VERSION = 1
#: The size of an encoded tick.
TICK_BYTES = 40
#: The frame of the tick that ends a run's stream of ticks.
END_FRAME = 2**64 - 1
#: A tick's stop frame while the run has none yet.
NO_STOP = 2**64 - 1

# Publication: host u16, clock offset i64, stamp u64, range count u16.
_PUBLICATION_HEAD = struct.Struct("<HqQH")
# Each range: offset u32, length u32, then its bytes.
_RANGE_HEAD = struct.Struct("<II")
# Tick: frame, deadline, sent, state, stop, each u64.
_TICK = struct.Struct("<5Q")
_FRAME_MASK = (1 << 48) - 1


@dataclass(frozen=True)
class Publication:
    """One host's elements of one cell, as published on ``ictus/RUN/cell/C/H``
    (to the hosts) and ``ictus/RUN/view/cell/C/H`` (to readers)."""

    #: The writer's index in the layout's ``hosts``.
    host: int
    #: The writer's clock minus the main host's, ns (0 on the main host).
    offset_ns: int
    #: When its subsystems wrote, on the writer's CLOCK_MONOTONIC, ns; 0 for the
    #: initial values (published before anything was written).
    stamp_ns: int
    #: ``(offset in the cell, bytes)`` per range.
    ranges: Tuple[Tuple[int, bytes], ...]

    def stamp_on_main_clock(self) -> Optional[int]:
        """The stamp on the main host's clock, ns; ``None`` for initial values."""
        return None if self.stamp_ns == 0 else self.stamp_ns - self.offset_ns


@dataclass(frozen=True)
class Tick:
    """One tick of the main host, as published on ``ictus/RUN/tick`` (to the hosts)
    and ``ictus/RUN/view/tick`` (to readers, the latest, 20 times a second)."""

    #: The frame it releases (:data:`END_FRAME`: the run ended).
    frame: int
    #: The frame's deadline on the main host's CLOCK_MONOTONIC, ns.
    deadline_ns: int
    #: When it was sent, on the same clock, ns.
    sent_ns: int
    #: The state word in force: previous state in bits 56..63, next in 48..55, the
    #: frame the change takes effect from in bits 0..47.
    state: int
    #: The run's stop frame (:data:`NO_STOP`: none yet).
    stop: int

    @property
    def is_end(self) -> bool:
        """Whether this is the last tick of the run."""
        return self.frame == END_FRAME

    @property
    def state_previous(self) -> int:
        """The state before the change (0 OFF, 1 PAUSE, 2 RUN, then the modes)."""
        return self.state >> 56

    @property
    def state_next(self) -> int:
        """The state from :attr:`state_from_frame` on."""
        return (self.state >> 48) & 0xFF

    @property
    def state_from_frame(self) -> int:
        """The frame from which :attr:`state_next` holds."""
        return self.state & _FRAME_MASK


def decode_publication(data: bytes) -> Publication:
    """Reads a cell publication; :class:`ValueError` unless it is exactly one."""
    b = bytes(data)
    head = _PUBLICATION_HEAD.size
    if len(b) < head:
        raise ValueError(f"a publication starts with {head} bytes, got {len(b)}")
    host, offset, stamp, count = _PUBLICATION_HEAD.unpack_from(b, 0)
    at = head
    ranges = []
    for i in range(count):
        if len(b) < at + _RANGE_HEAD.size:
            raise ValueError(f"range {i} of {count}: its header is cut at byte {len(b)}")
        start, length = _RANGE_HEAD.unpack_from(b, at)
        at += _RANGE_HEAD.size
        if len(b) < at + length:
            raise ValueError(
                f"range {i} of {count} ({length} bytes at {start}) is cut at byte {len(b)}"
            )
        ranges.append((start, b[at : at + length]))
        at += length
    if at != len(b):
        raise ValueError(f"{len(b) - at} byte(s) after the last of {count} range(s)")
    return Publication(host, offset, stamp, tuple(ranges))


def decode_tick(data: bytes) -> Tick:
    """Reads a tick; :class:`ValueError` for anything but its 40 bytes."""
    if len(data) != TICK_BYTES:
        raise ValueError(f"a tick is {TICK_BYTES} bytes, got {len(data)}")
    return Tick(*_TICK.unpack(bytes(data)))


def merge_publication(
    buffer: bytearray,
    publication: Publication,
    claimed: Optional[Sequence[Sequence[int]]] = None,
) -> None:
    """Copies a publication's ranges into a buffer of its cell's size.

    With ``claimed`` (the writer's ``[start, end)`` byte ranges of this cell, from
    its claims), every range must lie inside one of them, as the hosts check.
    :class:`ValueError` (and nothing copied) for a range past the cell or outside
    the claims.
    """
    for start, data in publication.ranges:
        end = start + len(data)
        if end > len(buffer):
            raise ValueError(f"bytes {start}..{end} past a cell of {len(buffer)} bytes")
        if claimed is not None and not any(a <= start and end <= b for a, b in claimed):
            raise ValueError(f"bytes {start}..{end} are not among its writer's claims")
    for start, data in publication.ranges:
        buffer[start : start + len(data)] = data


def check_layout(layout: Any, run: Optional[str] = None) -> Dict[str, Any]:
    """Checks a layout (the JSON of ``ictus/RUN/layout``, parsed) is one this module
    reads: wire version 1, little-endian, cells with elements. Returns it;
    :class:`ValueError` otherwise."""
    if not isinstance(layout, dict):
        raise ValueError("the layout is not a JSON object")
    wire = layout.get("wire")
    if wire != WIRE_VERSION:
        raise ValueError(
            f"the run speaks wire version {wire}; this module reads version {WIRE_VERSION}"
        )
    if layout.get("byte_order") != "little-endian":
        raise ValueError(f"byte order {layout.get('byte_order')!r}, expected little-endian")
    if run is not None and layout.get("run") != run:
        raise ValueError(f"the layout is of run {layout.get('run')!r}, not {run!r}")
    for key, kind in (("hosts", list), ("cells", list), ("tick_ns", int)):
        if not isinstance(layout.get(key), kind):
            raise ValueError(f"the layout has no {key}")
    for c in layout["cells"]:
        if not isinstance(c, dict) or not {"name", "bytes", "elements"} <= c.keys():
            raise ValueError(f"a cell of the layout lacks name, bytes or elements: {c!r}")
    return layout


def _file(path: Path, what: str, keys: Path, reader: str) -> str:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no {what} (make a reader's certificate with "
            f"`ictus keys new {keys} --hosts ... --readers {reader}`)"
        )
    return str(path.resolve())


#: Every message Zenoh's access control knows: a reader's session allows them all
#: with the run's hosts (what a reader may do is the hosts' rules to judge) and none
#: with any other peer.
_ACL_MESSAGES = [
    "put",
    "delete",
    "declare_subscriber",
    "query",
    "declare_queryable",
    "reply",
    "liveliness_token",
    "declare_liveliness_subscriber",
    "liveliness_query",
]


def _names(keys: Path) -> Dict[str, str]:
    """The ``names`` file of a keys folder (``ictus keys renew --retire`` writes it):
    holder to the common name in force; empty without one."""
    path = keys / "names"
    if not path.is_file():
        return {}
    names = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if len(words) != 2:
            raise ValueError(
                f"{path}:{n}:1: expected `HOLDER NAME` (written by `ictus keys renew --retire`)"
            )
        names[words[0]] = words[1]
    return names


def host_names(keys: Union[str, Path], reader: str = "READER") -> List[str]:
    """The common names the run's hosts' certificates carry, from keys folder
    ``keys``: a host per ``hosts/H.pem`` (a reader's bundle holds them, without
    keys), renamed by its ``names`` file where a certificate was retired.
    :class:`FileNotFoundError` without any."""
    keys = Path(keys)
    folder = keys / "hosts"
    hosts = sorted(p.stem for p in folder.glob("*.pem")) if folder.is_dir() else []
    if not hosts:
        raise FileNotFoundError(
            f"{folder}: no host certificates: a reader takes data only from the run's "
            f"hosts, named by their certificates (the reader's bundle "
            f"bundles/readers/{reader}/ of `ictus keys new` holds them; for a bundle "
            f"made before it did, copy the keys folder's hosts/*.pem, never a .key, "
            f"into {folder})"
        )
    names = _names(keys)
    return [names.get(h, h) for h in hosts]


def access_rules(hosts: Sequence[str]) -> Dict[str, Any]:
    """Zenoh's access control for a reader's session: default deny, everything
    allowed with a peer whose certificate carries one of ``hosts`` (common names).

    Zenoh's TLS layer trusts Mozilla's public roots besides the configured CA
    (zenoh-link-commons 1.10: not configurable), so a server with a certificate from
    a public CA would complete the handshake; these rules then deny it every message
    both ways, since its name is none of the run's hosts' (a host's name is a single
    DNS label or ``H.N`` after a retirement: names no public CA certifies)."""
    return {
        "enabled": True,
        "default_permission": "deny",
        "rules": [
            {
                "id": "with-hosts",
                "messages": _ACL_MESSAGES,
                "flows": ["ingress", "egress"],
                "permission": "allow",
                "key_exprs": ["ictus/**"],
            }
        ],
        "subjects": [{"id": "hosts", "cert_common_names": list(hosts)}],
        "policies": [{"id": "hosts", "rules": ["with-hosts"], "subjects": ["hosts"]}],
    }


def connect(
    endpoint: Union[str, Sequence[str]],
    keys: Union[str, Path],
    reader: str,
    timeout: float = 5.0,
) -> Any:
    """Opens a Zenoh session to a run's host as reader ``reader``.

    ``endpoint`` is a host's ``quic/ADDRESS:PORT`` from the schedule's host table (or
    a list of them: the first that answers is used); ``keys`` the reader's bundle
    (``bundles/readers/READER/`` of ``ictus keys new``) or the run's keys folder, of
    which only ``ca.pem``, ``readers/READER.pem|.key``, the hosts' certificates
    ``hosts/*.pem`` (their names) and ``names`` are read.
    The session is a Zenoh client of that host (which forwards what the other hosts
    publish), over TLS with mutual authentication; the host's name is not checked
    against its address (hosts are reached by address, certificates name hosts), but
    every message to or from a peer whose certificate names none of the run's hosts
    is denied (:func:`access_rules`).
    Tries for ``timeout`` seconds. Close it with ``session.close()``.
    """
    zenoh = need("zenoh")  # Only here: the decoders need no Zenoh.

    endpoints = [endpoint] if isinstance(endpoint, str) else list(endpoint)
    for e in endpoints:
        if not e.startswith(("tls/", "quic/")):
            raise ValueError(f"endpoint {e!r}: a run's hosts are reached on quic/ADDRESS:PORT")
    keys = Path(keys)
    ca = _file(keys / "ca.pem", "CA certificate", keys, reader)
    cert = _file(keys / "readers" / f"{reader}.pem", "reader certificate", keys, reader)
    key = _file(keys / "readers" / f"{reader}.key", "reader key", keys, reader)
    hosts = host_names(keys, reader)
    config = zenoh.Config()
    settings = {
        "mode": "client",
        "connect/endpoints": endpoints,
        "connect/timeout_ms": max(0, int(timeout * 1000)),
        "connect/retry": {"period_init_ms": 100, "period_max_ms": 1000},
        "scouting/multicast/enabled": False,
        "transport/link/tls/root_ca_certificate": ca,
        "transport/link/tls/connect_certificate": cert,
        "transport/link/tls/connect_private_key": key,
        "transport/link/tls/enable_mtls": True,
        "transport/link/tls/verify_name_on_connect": False,
        "access_control": access_rules(hosts),
    }
    for path, value in settings.items():
        config.insert_json5(path, json.dumps(value))
    return zenoh.open(config)


class Run:
    """Run ``name`` as seen through ``session`` (from :func:`connect`).

    Publications that do not decode, name another host than their key, or carry
    bytes outside their writer's claims are skipped and counted in :attr:`refused`.
    """

    def __init__(self, session: Any, name: str) -> None:
        self.session = session
        self.name = name
        #: Publications and ticks skipped as malformed or not their writer's.
        self.refused = 0
        self._layout: Optional[Dict[str, Any]] = None
        self._claims: Optional[Dict[str, Dict[str, List[List[int]]]]] = None

    def key(self, rest: str) -> str:
        """The Zenoh key ``ictus/RUN/REST``."""
        return f"ictus/{self.name}/{rest}"

    def _ask(self, rest: str, timeout: float) -> Optional[bytes]:
        """The first answer to a query of ``rest``, asked again until ``timeout``
        (a query made before the queryable is known ends at once, unanswered)."""
        until = time.monotonic() + timeout
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return None
            for reply in self.session.get(self.key(rest), timeout=min(left, 1.0)):
                if reply.ok is not None:
                    return reply.ok.payload.to_bytes()
            time.sleep(0.05)

    def layout(self, timeout: float = 5.0) -> Dict[str, Any]:
        """The run's layout (asked once, then kept); :class:`TimeoutError` when no
        host answers, :class:`ValueError` for another wire version."""
        if self._layout is None:
            payload = self._ask("layout", timeout)
            if payload is None:
                raise TimeoutError(
                    f"no host served {self.key('layout')} within {timeout} s "
                    f"(is run {self.name!r} up, and this reader among its keys?)"
                )
            self._layout = check_layout(json.loads(payload), self.name)
        return self._layout

    def cell(self, name: str) -> Dict[str, Any]:
        """Cell ``name``'s entry of the layout."""
        cells = self.layout()["cells"]
        for c in cells:
            if c["name"] == name:
                return c
        names = ", ".join(c["name"] for c in cells)
        raise KeyError(f"run {self.name!r} has no cell {name!r} (it has {names})")

    def claims(self, timeout: float = 5.0) -> Dict[str, Dict[str, List[List[int]]]]:
        """Per host, per cell it writes, its ``[start, end)`` byte ranges (asked of
        every host once, then kept)."""
        if self._claims is None:
            claims = {}
            until = time.monotonic() + timeout
            for host in self.layout()["hosts"]:
                payload = self._ask(f"claims/{host}", max(0.0, until - time.monotonic()))
                if payload is None:
                    raise TimeoutError(
                        f"host {host} did not say what it writes "
                        f"({self.key('claims/' + host)}) within {timeout} s"
                    )
                claims[host] = json.loads(payload)
            self._claims = claims
        return self._claims

    def writers(self, cell: str) -> Dict[str, List[List[int]]]:
        """The hosts that write cell ``cell``, each with its byte ranges of it."""
        self.cell(cell)
        return {h: c[cell] for h, c in self.claims().items() if c.get(cell)}

    def _taker(
        self, cell: str, on_merged: Callable[[bytearray, str, Publication], None]
    ) -> Callable[[Any], None]:
        """A subscriber callback for ``view/cell/CELL/*``: checks each publication and
        merges it into a buffer of its own, then calls ``on_merged``."""
        hosts = self.layout()["hosts"]
        writers = self.writers(cell)
        buffer = bytearray(self.cell(cell)["bytes"])
        lock = threading.Lock()

        def take(sample: Any) -> None:
            host = str(sample.key_expr).rsplit("/", 1)[-1]
            try:
                p = decode_publication(sample.payload.to_bytes())
                if host not in writers or hosts.index(host) != p.host:
                    raise ValueError(f"not a publication of {host}'s")
                with lock:
                    merge_publication(buffer, p, writers[host])
            except ValueError:
                self.refused += 1
                return
            with lock:
                on_merged(buffer, host, p)

        return take

    def read(self, cell: str, timeout: float = 2.0) -> Dict[str, Any]:
        """Cell ``cell`` as it stands: waits until every host that writes it has
        published once (each writer's elements are of its latest publication), then
        decodes it (:func:`decode_elements`). :class:`TimeoutError` naming the hosts
        not heard within ``timeout`` seconds."""
        layout_cell = self.cell(cell)
        writers = set(self.writers(cell))
        heard: set = set()
        done = threading.Event()
        snapshot = bytearray()

        def merged(buffer: bytearray, host: str, _p: Publication) -> None:
            heard.add(host)
            if heard >= writers and not done.is_set():
                snapshot[:] = buffer
                done.set()

        if not writers:
            # Nobody writes it: it keeps its initial value, zeros.
            return decode_elements(layout_cell, bytes(layout_cell["bytes"]))
        key = self.key(f"view/cell/{cell}/*")
        sub = self.session.declare_subscriber(key, self._taker(cell, merged))
        try:
            if not done.wait(timeout):
                missing = ", ".join(sorted(writers - heard))
                raise TimeoutError(
                    f"cell {cell}: nothing from host(s) {missing} within {timeout} s"
                )
        finally:
            sub.undeclare()
        return decode_elements(layout_cell, bytes(snapshot))

    def subscribe(
        self, cell: str, callback: Callable[[Dict[str, Any], str, Publication], None]
    ) -> Any:
        """Calls ``callback(values, host, publication)`` on a Zenoh thread at each
        view of cell ``cell`` (each writer's, 20 times a second): ``values`` is the
        whole cell decoded, with
        every writer's latest elements (zeros for a writer not heard yet). Returns
        the Zenoh subscriber: ``undeclare()`` it to stop."""
        layout_cell = self.cell(cell)

        def merged(buffer: bytearray, host: str, p: Publication) -> None:
            callback(decode_elements(layout_cell, bytes(buffer)), host, p)

        key = self.key(f"view/cell/{cell}/*")
        return self.session.declare_subscriber(key, self._taker(cell, merged))

    def subscribe_ticks(self, callback: Callable[[Tick], None]) -> Any:
        """Calls ``callback(tick)`` on a Zenoh thread at each tick of the view (the
        latest tick, 20 times a second: frames between are not seen). Returns the Zenoh
        subscriber: ``undeclare()`` it to stop."""

        def take(sample: Any) -> None:
            try:
                tick = decode_tick(sample.payload.to_bytes())
            except ValueError:
                self.refused += 1
                return
            callback(tick)

        return self.session.declare_subscriber(self.key("view/tick"), take)

    def alive(self, timeout: float = 1.0) -> List[str]:
        """The hosts whose liveliness token is up (sorted)."""
        prefix = self.key("host/")
        names = {
            str(r.ok.key_expr)[len(prefix) :]
            for r in self.session.liveliness().get(self.key("host/*"), timeout=timeout)
            if r.ok is not None
        }
        return sorted(names)
