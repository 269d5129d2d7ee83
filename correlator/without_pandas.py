"""The `correlator` command hides pandas from pyarrow.

pyarrow imports pandas, if it is installed, on the first array it builds, only to check whether it
was handed a DataFrame (pyarrow's pandas shim). correlator never hands it one, and the import is
0.1-0.5 s of the 1 s a paste's verdict may take. The command (not the library: a program that
imports correlator keeps its pandas) refuses that import; `allow` lifts it for code that may need
pandas, such as Ray's driver."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys


class _Refuse(importlib.abc.Loader):
    def create_module(self, spec):
        raise ImportError("the correlator command does not load pandas")

    def exec_module(self, module):  # never reached: create_module refuses
        raise ImportError("the correlator command does not load pandas")


class _HidePandas(importlib.abc.MetaPathFinder):
    """Finds pandas (so polars' availability probe sees it) but refuses to load it, so pyarrow's
    shim records it as missing. A finder that returned None would let the next finder load it."""

    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, _Refuse()) if name == "pandas" else None


def hide() -> None:
    if "pandas" not in sys.modules and not any(isinstance(f, _HidePandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _HidePandas())


def allow() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _HidePandas)]
