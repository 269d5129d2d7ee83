"""The formats that are whole files, not lines (a JSON document, an accounting table, a pickled
dump), each parsed by a module of its own. A new one is its module plus one line here; the first
parser that claims a file reads it."""
from __future__ import annotations

from . import flight_recorder, kubernetes, slurm, torchelastic
from .results import WholeFileParser

WHOLE_FILE_PARSERS: tuple[WholeFileParser, ...] = (
    flight_recorder.DUMP,
    slurm.SACCT,
    slurm.SCONTROL,
    slurm.JOBCOMP,
    kubernetes.POD_JSON,
    torchelastic.ERROR_JSON,
)
