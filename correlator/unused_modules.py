"""The `correlator` command hides pandas and numpy, which it never uses, from the packages that
would load them anyway.

pyarrow imports numpy, if it is installed, when it is imported itself, and pandas on the first
array it builds, only to check whether it was handed their arrays or DataFrames (its shims).
correlator never hands it either, and the two imports are 0.1-0.5 s of the 1 s a paste's verdict
may take. The command (not the library: a program that imports correlator keeps both) refuses
those imports before it loads anything else (correlator.console); `allow` lifts the refusal for
code that may need them, such as Ray's driver."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

UNUSED = ("pandas", "numpy")


class _Refuse(importlib.abc.Loader):
    def create_module(self, spec):
        raise ImportError(f"the correlator command does not load {spec.name}")

    def exec_module(self, module):  # never reached: create_module refuses
        raise ImportError("the correlator command does not load this module")


class _HideUnused(importlib.abc.MetaPathFinder):
    """Finds the unused modules (so availability probes such as polars' see them) but refuses to
    load them, so pyarrow's shims record them as missing. A finder that returned None would let
    the next finder load them."""

    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, _Refuse()) if name.split(".")[0] in UNUSED else None


def hide() -> None:
    if not any(m in sys.modules for m in UNUSED) and not any(isinstance(f, _HideUnused) for f in sys.meta_path):
        sys.meta_path.insert(0, _HideUnused())


def allow() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _HideUnused)]
