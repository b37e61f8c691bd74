"""``python -m ictus.live``: read a running ictus run from the command line
(``python -m ictus_zenoh``, its name before version 0.2, still works).

    python -m ictus.live read --endpoint quic/10.77.0.1:7447 --keys KEYS \\
        --reader python --run stress A B
    python -m ictus.live layout --endpoint quic/10.77.0.1:7447 --keys KEYS \\
        --reader python --run stress

``read`` prints one JSON object, cell name -> element name -> value; ``layout`` the
run's layout. A failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from .._need import MissingPart
from . import Run, connect


def main(argv: Optional[List[str]] = None, prog: str = "python -m ictus.live") -> int:
    parser = argparse.ArgumentParser(
        prog=prog, description="Read a running ictus run (docs/wire.md)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    read = commands.add_parser("read", help="read cells by name, as JSON")
    layout = commands.add_parser("layout", help="print the run's layout (JSON)")
    for p in (read, layout):
        p.add_argument("--endpoint", required=True, help="a host's quic/ADDRESS:PORT")
        p.add_argument("--keys", required=True, help="the reader's keys: its bundle from `ictus keys new`, KEYS/bundles/readers/READER")
        p.add_argument("--reader", required=True, help="the reader's name in KEYS/readers")
        p.add_argument("--run", required=True, help="the run's name (the schedule's name)")
        p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait (default 5)")
    read.add_argument("cells", nargs="+", metavar="CELL")
    args = parser.parse_args(argv)
    session = None
    try:
        session = connect(args.endpoint, args.keys, args.reader, timeout=args.timeout)
        run = Run(session, args.run)
        if args.command == "layout":
            out = run.layout(args.timeout)
        else:
            run.layout(args.timeout)
            out = {c: run.read(c, args.timeout) for c in args.cells}
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
        return 0
    except MissingPart as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # One line, whatever went wrong.
        why = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"{prog}: {type(e).__name__}: {why}", file=sys.stderr)
        return 1
    finally:
        if session is not None:
            session.close()


if __name__ == "__main__":
    sys.exit(main())
