"""The layers import one way: ``benchmarks`` -> ``dashboard`` -> ``deerflow``, never back; the dashboard sees faces."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = {"deerflow": ("dashboard", "benchmarks"), "dashboard": ("benchmarks",)}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_against_the_layers(package):
    offenders = sorted(f"{path.relative_to(REPO)} imports {name}"
                       for path in (REPO / package).rglob("*.py")
                       for name in _imports(path) & set(FORBIDDEN[package]))
    assert offenders == []


def test_the_benchmark_command_is_the_benchmarks_apps():
    from django.core.management import get_commands

    assert get_commands()["run_benchmarks"] == "benchmarks"


# -- the import graph --------------------------------------------------------
LAYERED = ("deerflow", "dashboard", "benchmarks")
#: Modules still over the limit while another change splits them (issue 17 item 4). Remove an entry
#: as soon as its module is under :data:`MAX_LINES`; the test fails when an entry is no longer needed.
OVER_THE_LIMIT_FOR_NOW: set[str] = set()
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in LAYERED for p in (REPO / package).rglob("*.py")}


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports anywhere in its body (lazy imports in functions count too).

    ``from pkg import sub`` is an edge to ``pkg.sub`` when that is a module, else to ``pkg``.
    Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those implicit edges are not
    counted (a package face that re-exports its submodules would otherwise always be a cycle).
    """
    out: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                if f"{module}.{alias.name}" in modules:
                    out.add(f"{module}.{alias.name}")
                elif module in modules:
                    out.add(module)
    out.discard(name)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    """``jobs.services`` <-> ``jobs.tasks`` and ``celery`` <-> ``fleet.control`` were the last two (issue 17)."""
    modules = _modules()
    graph = {name: _edges(name, path, modules) for name, path in modules.items()}
    assert graph["dashboard.jobs.tasks"] >= {"dashboard.jobs.services"}  # the walk sees real edges
    assert _cycles(graph) == []


def test_no_module_over_the_line_limit_in_deerflow():
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in (REPO / "deerflow").rglob("*.py")}
    over = sorted(f"{path}: {n} lines" for path, n in sizes.items()
                  if n > MAX_LINES and path not in OVER_THE_LIMIT_FOR_NOW)
    assert over == []
    no_longer_over = sorted(p for p in OVER_THE_LIMIT_FOR_NOW if sizes.get(p, 0) <= MAX_LINES)
    assert no_longer_over == [], f"drop from OVER_THE_LIMIT_FOR_NOW: {no_longer_over}"


def test_every_deerflow_module_imports_without_django():
    """Every module ``pkgutil`` finds in the package (no hand-kept list) imports in a fresh interpreter."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import deerflow\n"
        "names = [m.name for m in pkgutil.walk_packages(deerflow.__path__, prefix='deerflow.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names))\n"
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO),
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    count, django_modules = result.stdout.splitlines()[:2]
    expected = sum(1 for p in (REPO / "deerflow").rglob("*.py") if p.name != "__init__.py")
    expected += sum(1 for p in (REPO / "deerflow").rglob("__init__.py")) - 1  # subpackages (not deerflow itself)
    assert int(count) == expected
    assert django_modules == "[]"


# -- the dashboard sees deerflow through its packages' faces ------------------------
#: DeerFlow's own module paths (the spec fixes them): public modules, imported as DeerFlow imports them.
DEERFLOW_MODULE_PATHS = ("deerflow.agents.thread_state", "deerflow.runtime.checkpoint_mode",
                         "deerflow.runtime.checkpoint_state", "deerflow.errors")


def _face_offenders(path: Path) -> list[str]:
    """Each import of ``path`` that reaches past a deerflow package's ``__all__`` (or into a private module)."""
    import importlib

    offenders = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            offenders += [f"import {a.name}" for a in node.names if a.name.startswith("deerflow")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "deerflow":
            module = importlib.import_module(node.module or "")
            is_face = hasattr(module, "__path__") and not any(p.startswith("_") for p in module.__name__.split("."))
            for alias in node.names:
                if node.module == "deerflow":
                    ok = f"deerflow.{alias.name}" in DEERFLOW_MODULE_PATHS or (
                        not alias.name.startswith("_") and (REPO / "deerflow" / alias.name / "__init__.py").exists())
                elif node.module in DEERFLOW_MODULE_PATHS:
                    ok = alias.name in module.__all__
                else:
                    ok = is_face and alias.name in module.__all__
                if not ok:
                    offenders.append(f"from {node.module} import {alias.name}")
    return [f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}: {o}" for o in offenders]


def test_the_dashboard_imports_only_the_public_names_of_deerflow_packages():
    """``from deerflow.<package> import <name in its __all__>``; DeerFlow's own module paths; nothing private."""
    offenders = sorted(o for path in (REPO / "dashboard").rglob("*.py") for o in _face_offenders(path))
    assert offenders == []


def test_the_face_check_catches_a_private_module_and_an_unlisted_name(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from deerflow.storage.sqlread import reader_for\nfrom deerflow._langgraph_compat import MISSING\n"
                     "from deerflow.storage import Dialect\nfrom deerflow.inventory import listing\n")
    assert [o.split(": ", 1)[1] for o in _face_offenders(probe)] == [
        "from deerflow.storage.sqlread import reader_for", "from deerflow._langgraph_compat import MISSING",
        "from deerflow.inventory import listing"]


# -- the read path stays in deerflow once it enters it -------------------------
#: The modules holding the rules of reading a stored thread; only :class:`deerflow.reader.ThreadReader` (and
#: deerflow's own rewrites) call them, so a thread id handed to the reader never climbs back up into the dashboard.
READ_RULES = ("deerflow.reader.lineage", "deerflow.reader.compare", "deerflow.reader.replaycheck",
              "deerflow.reader.prefetch", "deerflow.reader.history_values", "deerflow.reader.lineage_gate")


def test_the_dashboard_reads_threads_through_the_reader_not_the_read_rules():
    modules = _modules()
    offenders = sorted(f"{name} imports {edge}" for name, path in modules.items() if name.startswith("dashboard")
                       for edge in _edges(name, path, modules) if edge in READ_RULES)
    assert offenders == []
    reader_edges = _edges("deerflow.reader.reader", modules["deerflow.reader.reader"], modules)
    assert {"deerflow.reader.prefetch", "deerflow.reader.replaycheck", "deerflow.reader.history_values"} <= reader_edges


# -- deerflow's packages import downwards only ------------------------------------------
#: The floors of deerflow, lowest first; a package imports only its own floor and the ones below. DeerFlow's
#: ``agents.thread_state`` is a face over ``runtime.state_schemas``: the schemas read the mode freeze of
#: ``runtime.checkpoint_mode`` and ``runtime.checkpoint_state`` compiles them, so the runtime holds them and
#: ``agents`` stands one floor above it.
FLOORS = [
    {"deerflow.errors", "deerflow._langgraph_compat", "deerflow._lazy"},
    {"deerflow.config"},
    {"deerflow.runtime"},
    {"deerflow.agents"},
    {"deerflow.storage"},
    {"deerflow.inventory", "deerflow.convert"},
    {"deerflow.reader", "deerflow.retention", "deerflow.seed"},
]


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_every_deerflow_package_has_a_floor():
    packages = {_package(name) for name in _modules() if name.startswith("deerflow.")}
    assert packages == set().union(*FLOORS)


def test_no_deerflow_package_imports_upwards():
    """No back edge: every import goes to the importer's floor or below (function-local imports count)."""
    floor = {package: i for i, members in enumerate(FLOORS) for package in members}
    modules = _modules()
    upward = sorted(f"{name} -> {edge}" for name, path in modules.items() if name.startswith("deerflow.")
                    for edge in _edges(name, path, modules)
                    if edge.startswith("deerflow.") and floor[_package(edge)] > floor[_package(name)])
    assert upward == []
    # the packages of one floor do not import each other either
    sideways = sorted(f"{name} -> {edge}" for name, path in modules.items() if name.startswith("deerflow.")
                      for edge in _edges(name, path, modules)
                      if edge.startswith("deerflow.") and _package(edge) != _package(name)
                      and floor[_package(edge)] == floor[_package(name)])
    assert sideways == []


def test_deerflow_imports_its_own_modules_at_the_top_only():
    """A function-local import of a project module hides an edge; start-up laziness is deerflow._lazy's job."""
    local = []
    for path in sorted((REPO / "deerflow").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                local += [f"{path.relative_to(REPO)}:{sub.lineno}" for sub in ast.walk(node)
                          if isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("deerflow")]
    assert local == []
