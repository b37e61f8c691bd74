"""Recordings (docs/recording.md): the MCAP files ``ictus run SCHEDULE --record
FILE.mcap`` and ``ictus node ... --record`` write, read with Foxglove's ``mcap``
package (``pip install "./python[mcap]"``, ``mcap==1.6.0``), each cell message
decoded by the layout the recording carries into plain dicts.

    >>> rec = open_recording("run.mcap")  # doctest: +SKIP
    >>> rec.info.subsystems, rec.info.tick_ns  # doctest: +SKIP
    (['A', 'B', 'C'], 1000000)
    >>> for m in rec.cells("B"):  # doctest: +SKIP
    ...     print(m.frame, m.subsystem, m.values["int"])
    >>> rec.rows("frames")[0]["lateness_ns"]  # doctest: +SKIP

Without ``mcap`` installed, :func:`open_recording` raises :class:`ictus.MissingPart`
saying what to install; the layout and the CDR decoding themselves
(:mod:`ictus.cells`) need only the standard library.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from ._need import need
from .cells import cdr_offsets, decode_cdr, ros2msg_schema

__all__ = [
    "FORMAT",
    "NO_SLOT",
    "RecordingError",
    "RecordingInfo",
    "RecordingEnd",
    "CellMessage",
    "Recording",
    "open_recording",
]

#: The ``ictus`` metadata's ``format`` this package reads.
FORMAT = 1
#: The ``sequence`` of an event about no subsystem.
NO_SLOT = 4294967295


class RecordingError(ValueError):
    """A file that is not an ictus recording this package reads; the message names
    it and what was wrong."""


@dataclass(frozen=True)
class RecordingInfo:
    """The recording's ``ictus`` metadata, written first."""

    format: int
    run: str
    host: str
    tick_ns: int
    #: Frame 0's release on the realtime clock, ns since the Unix epoch.
    epoch_unix_ns: int
    #: The schedule's text, and its path as given.
    schedule: str
    schedule_path: str
    #: The cell table: each ``{"name", "elements": [{"name", "type", "len"}]}``.
    cells: List[Dict[str, Any]]
    #: Each subsystem's cells recorded every this many of its frames.
    every: int
    #: The recorded cells' names.
    recorded: List[str]
    #: Subsystem names by slot.
    subsystems: List[str]
    #: The slots this host tapped.
    slots: List[int]
    #: State names by id (``off``, ``pause``, ``run``, then the modes).
    states: List[str]
    #: Per cell, per element, the writer's slot (or ``None``).
    writers: List[List[Optional[int]]]

    def cell(self, name: str) -> Dict[str, Any]:
        """Cell ``name``'s layout; :class:`KeyError` naming the cells there are."""
        for c in self.cells:
            if c["name"] == name:
                return c
        names = ", ".join(c["name"] for c in self.cells)
        raise KeyError(f"the recording has no cell {name!r} (its cells: {names})")

    def frame_of(self, log_time_ns: int) -> int:
        """The frame whose deadline is ``log_time_ns`` (a message's log time)."""
        return (log_time_ns - self.epoch_unix_ns) // self.tick_ns


@dataclass(frozen=True)
class RecordingEnd:
    """The ``ictus.end`` metadata, written when the recording ended."""

    #: Per slot, the records its ring dropped.
    dropped: Dict[int, int]
    #: Records written.
    records: int


@dataclass(frozen=True)
class CellMessage:
    """One cell message, decoded: a publication (``cells/NAME``) or what a subsystem
    read of a cell (``inputs/SUBSYSTEM/NAME``)."""

    #: ``cells`` or ``inputs``.
    kind: str
    cell: str
    #: The subsystem that wrote it (``cells``) or read it (``inputs``), and its slot.
    subsystem: str
    slot: int
    frame: int
    #: The frame's deadline on the realtime clock, ns since the Unix epoch.
    log_time_ns: int
    #: Element name -> value (a list for an array), as :func:`ictus.cells.decode_cdr`.
    values: Dict[str, Any]


def _metadata(where: str, m: Mapping[str, str]) -> RecordingInfo:
    def j(key: str) -> Any:
        try:
            return json.loads(m[key])
        except KeyError:
            raise RecordingError(f"{where}: its ictus metadata has no {key!r}") from None
        except json.JSONDecodeError as e:
            raise RecordingError(f"{where}: its ictus metadata's {key!r} is not JSON ({e.msg})") from None

    fmt = j("format")
    if fmt != FORMAT:
        raise RecordingError(
            f"{where}: recording format {fmt!r}; this package reads format {FORMAT} "
            "(a newer ictus needs a newer package)"
        )
    cells = j("cells")
    if not isinstance(cells, dict) or not isinstance(cells.get("cells"), list):
        raise RecordingError(f"{where}: its ictus metadata's 'cells' is not a cell table")
    return RecordingInfo(
        format=fmt,
        run=m.get("run", ""),
        host=m.get("host", ""),
        tick_ns=j("tick_ns"),
        epoch_unix_ns=j("epoch_unix"),
        schedule=m.get("schedule", ""),
        schedule_path=m.get("schedule_path", ""),
        cells=cells["cells"],
        every=j("every") if "every" in m else 1,
        recorded=j("recorded") if "recorded" in m else [c["name"] for c in cells["cells"]],
        subsystems=j("subsystems"),
        slots=j("slots") if "slots" in m else [],
        states=j("states") if "states" in m else [],
        writers=j("writers") if "writers" in m else [],
    )


@dataclass
class Recording:
    """An ictus recording, opened (:func:`open_recording`): its metadata at once,
    its messages as they are iterated (the file is read again for each pass)."""

    path: Path
    info: RecordingInfo
    #: ``None`` when the recording did not end (the run was killed, or the copy cut).
    end: Optional[RecordingEnd]
    #: Topic -> ``(schema name, schema encoding, message encoding)``.
    channels: Dict[str, Tuple[str, str, str]]
    #: Topic -> messages, from the file's statistics.
    message_counts: Dict[str, int]
    #: Other metadata records, name -> their string map.
    metadata: Dict[str, Dict[str, str]] = field(default_factory=dict)

    #: The tables :meth:`rows` makes besides ``cells/NAME`` and ``inputs/S/NAME``.
    TABLES = ("frames", "events")

    def _messages(self, topics: Optional[List[str]]) -> Iterator[Tuple[Any, Any]]:
        reader_mod = need("mcap.reader")
        with open(self.path, "rb") as f:
            reader = reader_mod.make_reader(f)
            for _schema, channel, message in reader.iter_messages(topics=topics):
                yield channel, message

    def _cell_messages(self, kind: str, topics: List[str]) -> Iterator[CellMessage]:
        layouts: Dict[str, Tuple[Dict[str, Any], List[int]]] = {}
        for channel, message in self._messages(topics):
            name = channel.topic.rsplit("/", 1)[-1]
            if name not in layouts:
                cell = self.info.cell(name)
                layouts[name] = (cell, cdr_offsets(cell)[0])
            cell, offsets = layouts[name]
            slot = message.sequence
            try:
                values = decode_cdr(cell, message.data, offsets)
            except ValueError as e:
                raise RecordingError(f"{self.path}: {channel.topic} at {message.log_time}: {e}") from None
            yield CellMessage(
                kind=kind,
                cell=name,
                subsystem=self._subsystem(slot),
                slot=slot,
                frame=self.info.frame_of(message.log_time),
                log_time_ns=message.log_time,
                values=values,
            )

    def _subsystem(self, slot: int) -> str:
        names = self.info.subsystems
        return names[slot] if 0 <= slot < len(names) else ""

    def _topics(self, prefix: str, last: Optional[str]) -> List[str]:
        return [
            t for t in self.channels if t.startswith(prefix) and (last is None or t.rsplit("/", 1)[-1] == last)
        ]

    def cells(self, cell: Optional[str] = None) -> Iterator[CellMessage]:
        """The cell publications (``cells/NAME``) in the file's order, of one cell or
        all; each the whole cell as its writers left it."""
        if cell is not None:
            self.info.cell(cell)
        return self._cell_messages("cells", self._topics("cells/", cell))

    def inputs(self, subsystem: Optional[str] = None, cell: Optional[str] = None) -> Iterator[CellMessage]:
        """What subsystems read (``inputs/SUBSYSTEM/CELL``), at the frames where it
        changed; of one subsystem or cell, or all."""
        prefix = f"inputs/{subsystem}/" if subsystem is not None else "inputs/"
        return self._cell_messages("inputs", self._topics(prefix, cell))

    def frames(self) -> Iterator[Dict[str, Any]]:
        """Each frame of each subsystem (the ``frames`` messages, as dicts:
        ``subsystem``, ``frame``, ``lateness_ns``, ``exec_ns``, ``overrun``, ...)."""
        for _channel, message in self._messages(["frames"]):
            yield json.loads(message.data)

    def events(self) -> Iterator[Dict[str, Any]]:
        """The run's events (``kind``, ``frame``, ``subsystem``, ``message``)."""
        for _channel, message in self._messages(["events"]):
            yield json.loads(message.data)

    def rows(self, table: str) -> List[Dict[str, Any]]:
        """A table as plain rows (dicts): ``frames``, ``events``, ``cells/NAME`` or
        ``inputs/SUBSYSTEM/NAME`` (``frame``, ``subsystem``, ``slot``,
        ``log_time_ns``, then each element, a list for an array)."""
        if table == "frames":
            return list(self.frames())
        if table == "events":
            return list(self.events())
        if table in self.channels and table.startswith(("cells/", "inputs/")):
            kind = table.split("/", 1)[0]
            return [
                {"frame": m.frame, "subsystem": m.subsystem, "slot": m.slot, "log_time_ns": m.log_time_ns, **m.values}
                for m in self._cell_messages(kind, [table])
            ]
        topics = ", ".join(sorted(self.channels))
        raise ValueError(f"no table {table!r} in {self.path} (its topics: {topics})")

    def to_pandas(self, table: str) -> Any:
        """:meth:`rows` as a pandas DataFrame (needs pandas: ``pip install
        "./python[pandas]"``)."""
        return need("pandas").DataFrame(self.rows(table))


def open_recording(path: Union[str, Path]) -> Recording:
    """Opens an ictus recording and reads its metadata and summary; each cell
    channel's schema is checked against the recorded layout.
    :class:`ictus.MissingPart` without the ``mcap`` package; :class:`RecordingError`
    (a :class:`ValueError`) naming the file for one that is not an ictus recording;
    :class:`OSError` when it cannot be read."""
    reader_mod = need("mcap.reader")
    p = Path(path)
    where = str(p)
    with open(p, "rb") as f:
        if f.read(8) != b"\x89MCAP0\r\n":
            raise RecordingError(f"{where}: not an MCAP file (it does not start with MCAP's magic bytes)")
        f.seek(0)
        try:
            reader = reader_mod.make_reader(f)
            summary = reader.get_summary()
            metadata = {m.name: dict(m.metadata) for m in reader.iter_metadata()}
        except Exception as e:  # The mcap package's errors have no common base.
            raise RecordingError(f"{where}: not a whole MCAP file ({type(e).__name__}: {e})") from None
    if summary is None:
        raise RecordingError(f"{where}: no summary (the recording did not end, or was cut)")
    if "ictus" not in metadata:
        raise RecordingError(f"{where}: an MCAP file without ictus metadata (not an ictus recording)")
    info = _metadata(where, metadata.pop("ictus"))
    end = None
    if "ictus.end" in metadata:
        e = metadata.pop("ictus.end")
        end = RecordingEnd(
            dropped={int(k): int(v) for k, v in json.loads(e.get("dropped", "{}")).items()},
            records=int(e.get("records", 0)),
        )
    channels: Dict[str, Tuple[str, str, str]] = {}
    for c in summary.channels.values():
        s = summary.schemas.get(c.schema_id)
        channels[c.topic] = (s.name if s else "", s.encoding if s else "", c.message_encoding)
        if c.topic.startswith(("cells/", "inputs/")) and s is not None:
            name = c.topic.rsplit("/", 1)[-1]
            try:
                expected = ros2msg_schema(info.cell(name))
            except (KeyError, ValueError) as e:
                raise RecordingError(f"{where}: channel {c.topic}: {e.args[0]}") from None
            if s.data.decode("utf-8", "replace").strip() != expected.strip():
                raise RecordingError(
                    f"{where}: channel {c.topic}'s schema does not match the recorded layout of cell {name}"
                )
    counts = {}
    if summary.statistics is not None:
        by_id = {c.id: c.topic for c in summary.channels.values()}
        counts = {by_id[i]: n for i, n in summary.statistics.channel_message_counts.items() if i in by_id}
    return Recording(p, info, end, channels, counts, metadata)
