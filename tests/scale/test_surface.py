"""The scale modules keep the package's rules: Django-free, ``__all__`` sorted and complete."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["deerflow.storage.dialect", "deerflow.storage.driver_errors",
           "deerflow.storage.sqlread", "deerflow.inventory.summary", "deerflow.inventory.summary.schema",
           "deerflow.inventory.summary.rows", "deerflow.inventory.summary.refresh",
           "deerflow.inventory.summary.writes", "deerflow.inventory.footprint", "deerflow.inventory.listing",
           "deerflow.seed", "deerflow.seed.ids", "deerflow.seed.script", "deerflow.seed.template", "deerflow.seed.load",
           "deerflow.seed.plan", "deerflow.seed.run", "deerflow.inventory.cursors", "deerflow.inventory.thread_summary",
           "deerflow.reader.lineage_gate"]


@pytest.mark.parametrize("module_name", MODULES)
def test_all_is_sorted_complete_and_resolvable(module_name):
    module = importlib.import_module(module_name)
    exported = module.__all__
    assert exported == sorted(exported) and len(exported) == len(set(exported))
    assert all(hasattr(module, name) for name in exported)
    defined = set()
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
    public = {n for n in defined if not n.startswith("_")} - {"__all__", "log"}
    assert not public - set(exported), sorted(public - set(exported))


def test_scale_modules_import_without_django():
    """Every module of the package, found by ``pkgutil`` (not a hand-kept list), imports without Django."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import deerflow\n"
        "names = [m.name for m in pkgutil.walk_packages(deerflow.__path__, prefix='deerflow.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names), set(" + repr(MODULES) + ") <= set(names))\n"
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT),
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    count, covers_the_list = result.stdout.split("\n")[0].split()
    assert int(count) >= 40 and covers_the_list == "True"  # the walk reaches every subpackage
    assert result.stdout.split("\n")[1] == "[]"
