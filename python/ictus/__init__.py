"""Read what ictus writes, from Python.

- :mod:`ictus.record`: result records (``ictus probe ... -o FILE.json``, ``ictus run
  ... -o FILE.json``), :func:`load_record`;
- :mod:`ictus.survey`: results directories (``ictus survey``'s
  ``ictus-results/HOST-YYYYMMDD-HHMMSS/``), :func:`load_survey`;
- :mod:`ictus.recording`: MCAP recordings (``ictus run ... --record FILE.mcap``),
  :func:`open_recording` (needs ``mcap``: the ``mcap`` extra);
- :mod:`ictus.live`: a run across hosts, live, over Zenoh (needs
  ``eclipse-zenoh``: the ``live`` extra);
- :mod:`ictus.cells`: a cell's bytes decoded by its layout (used by the two above).

Records, directories and recordings load into plain dataclasses, dicts and lists;
each has ``rows(TABLE)`` (plain dicts) and ``to_pandas(TABLE)`` (with pandas: the
``pandas`` extra). A missing optional part raises :class:`MissingPart`, whose
message names what to install.

This is a reader of files and of the wire, not a binding to the Rust library.
"""

from ._need import MissingPart
from .record import Record, RecordError, load_record
from .recording import Recording, RecordingError, open_recording
from .survey import Survey, SurveyError, load_survey

__version__ = "0.2.0"

__all__ = [
    "MissingPart",
    "Record",
    "RecordError",
    "load_record",
    "Survey",
    "SurveyError",
    "load_survey",
    "Recording",
    "RecordingError",
    "open_recording",
    "__version__",
]
