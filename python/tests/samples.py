"""The files the tests read: small ones ictus wrote, committed under tests/data/, and,
when ``ICTUS`` names an ictus binary, the same kinds made now with it (what CI does
with the binary it just built, so a change of format is caught where it is made).

tests/data/ (95 KB; made with a debug build of ictus 0.1.0 on the project's 2-vCPU
VM, 2026-11-29; every file as ictus wrote it):

- ``run.json`` and ``run.mcap``: one run of examples/stress/schedule.toml
  (renamed ``pysample``), as root: ``ictus run schedule.toml --tick 10ms --duration
  150ms --quiet --record run.mcap -o run.json``;
- ``survey/``: from a smoke survey run as a user without real-time rights
  (``ictus survey --profile smoke --cpus 0-1 --cores 1``, 6 min 56 s): its
  ``survey.json`` and ``doctor.json`` and two of its 31 records
  (``timer-normal-unpinned-syscall.json``, ``memlat-normal-unpinned-idle.json``); the
  others were left out for size, so the manifest names steps done whose files are
  not here, as in a directory copied in part.

Made now (``fresh()``, 1 to 3 s): ``ictus probe timer -i 5ms -D 300ms``, the stress
example at a 10 ms tick for 150 ms with ``--record``, and a results directory of
those two records with ``ictus doctor --json``'s audit and ``ictus report``'s
reports (no ``survey.json``: only a whole survey writes one, 7 minutes long here;
the committed survey is that).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Dict, Optional, Union

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
REPO = HERE.parents[1]

sys.path.insert(0, str(REPO / "python"))

_fresh: Optional[Dict[str, Path]] = None
_fresh_error: Optional[str] = None


def skip(test: Union[unittest.TestCase, str], reason: str) -> None:
    """Skips ``test`` (a test, or a module's or class's name) saying why on stderr
    (and in ``$ICTUS_SKIPPED``, the list .ci/run counts and names), never silently."""
    name = f"python/tests {test if isinstance(test, str) else test.id()}"
    print(f"\nSKIPPED {name}: {reason}", file=sys.stderr)
    listing = os.environ.get("ICTUS_SKIPPED")
    if listing:
        with open(listing, "a", encoding="utf-8") as f:
            f.write(f"SKIPPED {name}: {reason}\n")
    raise unittest.SkipTest(reason)


def _ictus(binary: str, args, cwd: Path, ok=(0,)) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [binary, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    if out.returncode not in ok:
        raise RuntimeError(f"ictus {' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
    return out


def _make(binary: str) -> Dict[str, Path]:
    root = Path(tempfile.mkdtemp(prefix="ictus-py-"))
    results = root / "results"
    results.mkdir()
    _ictus(binary, ["probe", "timer", "-i", "5ms", "-D", "300ms", "-o", str(root / "timer.json")], root)
    stress = REPO / "examples" / "stress"
    shutil.copy(stress / "cells.toml", root / "cells.toml")
    text = (stress / "schedule.toml").read_text().replace(
        'name = "stress"', f'name = "py{os.getpid()}"'
    )
    (root / "schedule.toml").write_text(text)
    # A lost frame (exit 3) on a loaded machine still leaves whole files.
    _ictus(
        binary,
        ["run", "schedule.toml", "--tick", "10ms", "--duration", "150ms", "--quiet",
         "--record", "run.mcap", "-o", "run.json"],
        root,
        ok=(0, 3),
    )
    for name in ("timer.json", "run.json"):
        shutil.copy(root / name, results / name)
    audit = _ictus(binary, ["doctor", "--json"], root)
    (results / "doctor.json").write_text(audit.stdout)
    _ictus(binary, ["report", str(results)], root)
    return {
        "root": root,
        "timer": root / "timer.json",
        "run": root / "run.json",
        "recording": root / "run.mcap",
        "results": results,
    }


def fresh(who: Union[unittest.TestCase, str]) -> Dict[str, Path]:
    """The files made now with ``$ICTUS`` (made once per process); skips ``who`` (a
    test, or a class's name from its ``setUpClass``) saying why when ``ICTUS`` is not
    set, fails when they cannot be made."""
    global _fresh, _fresh_error
    binary = os.environ.get("ICTUS")
    if not binary:
        skip(who, "ICTUS is not set: only the committed files are read (set ICTUS=target/debug/ictus to read files made now)")
    if os.sep in binary:  # A path: the files are made in another directory.
        binary = str(Path(binary).resolve())
    if _fresh is None and _fresh_error is None:
        try:
            _fresh = _make(binary)
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            _fresh_error = f"{binary}: {e}"
    if _fresh is None:
        raise AssertionError(f"could not make the files to read: {_fresh_error}")
    return _fresh


@atexit.register
def _cleanup() -> None:
    """Removes what :func:`fresh` made, when the tests end."""
    if _fresh is not None:
        shutil.rmtree(_fresh["root"], ignore_errors=True)


def python_with_mcap() -> Optional[str]:
    """Another Python that imports ``mcap``, for when this one does not:
    ``ICTUS_PYTHON_MCAP``, else ``target/py-mcap/bin/python`` at the repository root
    (.ci/run makes it with mcap==1.6.0), as crates/ictus-cli/tests/record.rs finds
    one."""
    candidates = [os.environ.get("ICTUS_PYTHON_MCAP"), str(REPO / "target" / "py-mcap" / "bin" / "python")]
    for python in filter(None, candidates):
        try:
            ok = subprocess.run([python, "-c", "import mcap.reader"], capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if ok.returncode == 0:
            return python
    return None


def has(module: str) -> bool:
    """Whether ``module`` imports here."""
    try:
        __import__(module)
        return True
    except ImportError:
        return False
