"""correlator: a post-mortem log correlator for distributed ML training failures.

The layers `parsers/` and `queries/` sit beside this package in the checkout and install inside
it (`correlator.parsers`, `correlator.queries`; see pyproject.toml's package-dir). An installed
wheel and an editable install find them by themselves; a checkout used without installing
(`PYTHONPATH=.`) finds them here, beside the package.
"""
from pathlib import Path as _Path

__version__ = "0.1.0"

_here = _Path(__file__).parent
if not (_here / "parsers").is_dir() and (_here.parent / "parsers" / "__init__.py").is_file():
    __path__.append(str(_here.parent))
