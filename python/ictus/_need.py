"""The optional parts of the package, and one clear error when one is missing.

Each optional part is an extra of the distribution (``pip install "./python[mcap]"``
from the repository); importing it through :func:`need` turns a bare
``ModuleNotFoundError`` into :class:`MissingPart`, which names what to install.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, Tuple

__all__ = ["MissingPart", "need", "PARTS"]

#: Module -> (what it is needed for, the distribution, its pin, the extra).
PARTS: Dict[str, Tuple[str, str, str, str]] = {
    "zenoh": ("reading a live run over Zenoh", "eclipse-zenoh", "==1.10.2", "live"),
    "mcap": ("reading MCAP recordings", "mcap", "==1.6.0", "mcap"),
    "pandas": ("a DataFrame", "pandas", "", "pandas"),
}


class MissingPart(ImportError):
    """An optional part of the package is not installed; the message says what to
    install (``pip install ...``). An :class:`ImportError`, so ``except ImportError``
    still catches it."""


MissingPart.__module__ = "ictus"  # Shown as ictus.MissingPart, where users import it.


def need(module: str) -> Any:
    """Imports ``module`` (``zenoh``, ``mcap`` or ``pandas``), or raises
    :class:`MissingPart` naming the package and the extra that bring it::

        >>> need("json").__name__
        'json'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = module.split(".")[0]
        if top not in PARTS or e.name not in (top, module):
            raise
        what, dist, pin, extra = PARTS[top]
        raise MissingPart(
            f"{what} needs the {dist} package (not installed): pip install '{dist}{pin}', "
            f"or from the ictus repository pip install './python[{extra}]'"
        ) from None
