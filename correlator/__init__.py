"""correlator: a post-mortem log correlator for distributed ML training failures.

The layers `parsers/` and `queries/` sit beside this package in the checkout and install inside
it (`correlator.parsers`, `correlator.queries`; see pyproject.toml's package-dir). A wheel and an
editable install find them by themselves; a checkout used without installing (`PYTHONPATH=.`)
finds them here, beside the package.
"""
import importlib.util as _util
from pathlib import Path as _Path

__version__ = "0.1.0"

_checkout = _Path(__file__).resolve().parent.parent
if _util.find_spec(f"{__name__}.parsers") is None and (_checkout / "parsers" / "__init__.py").is_file():
    __path__.append(str(_checkout))
