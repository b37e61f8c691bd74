"""``ictus_zenoh``, the name of :mod:`ictus.live` before version 0.2 of this package,
kept so that scripts and ``python -m ictus_zenoh`` go on working. Everything here is
:mod:`ictus.live`'s; new code imports ``ictus.live``."""

from ictus.live import *  # noqa: F401,F403
from ictus.live import __all__  # noqa: F401
