"""The layers point one way (issue #18): parsers/ and queries/ import nothing of correlator/ but
the table schemas, and no module imports itself back through others. Read from the source with
`ast`, function-level imports included: a late import is still a dependency."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Where each installed package lives in the checkout (pyproject.toml's package-dir).
PACKAGE_DIRS = {"correlator": ROOT / "correlator", "correlator.parsers": ROOT / "parsers",
                "correlator.queries": ROOT / "queries"}
LOW_LAYERS = ("correlator.parsers", "correlator.queries")
# What a low layer may import from the rest of correlator/: the tables it fills.
SCHEMAS_MODULE = "correlator.tables"


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _imports(module: str) -> set[str]:
    """The project modules `module` imports, anywhere in its body."""
    package = module if _is_package(module) else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import name`: the submodule pkg.name where there is one, else pkg itself
            targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {t for t in targets if t in MODULES and t != "correlator" and t != module}


GRAPH = {module: _imports(module) for module in MODULES}


def test_the_graph_is_read():
    assert "correlator.parsers.files" in GRAPH["correlator.pipeline"]
    assert "correlator.parsers.engine" in GRAPH["correlator.parsers.files"]


def test_parsers_and_queries_import_only_themselves_and_the_table_schemas():
    wrong = sorted(f"{module} imports {target}" for module, targets in GRAPH.items()
                   if module.startswith(LOW_LAYERS) for target in targets
                   if target != SCHEMAS_MODULE and not target.startswith(module.split(".")[0] + "." + module.split(".")[1]))
    assert not wrong


def test_the_table_schemas_import_nothing_of_the_project():
    assert not GRAPH[SCHEMAS_MODULE]


def _cycle() -> list[str] | None:
    """One import cycle (its modules in order), or None."""
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target, path + [target])):
                return found
        state[module] = "done"
        return None

    for module in sorted(GRAPH):
        if module not in state and (found := visit(module, [module])):
            return found
    return None


def test_no_import_cycle():
    assert _cycle() is None, " -> ".join(_cycle() or [])


def test_one_installed_package_and_no_top_level_parsers_or_queries():
    """Outside the checkout only `correlator` is importable: `parsers` and `queries` are its
    subpackages, never names of their own in site-packages."""
    probe = ("import importlib.util, correlator.parsers.files, correlator.queries\n"
             "print(importlib.util.find_spec('parsers'), importlib.util.find_spec('queries'))")
    out = subprocess.run([sys.executable, "-c", probe], cwd="/", capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "None"]


def test_every_package_of_the_checkout_is_installed():
    """pyproject.toml lists its packages by name: a new subpackage missing there would be missing
    from the wheel while every test of the checkout passes."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {module for module in MODULES if _is_package(module)}
    assert packages == listed
