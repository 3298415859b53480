"""The retention package's surface: sorted, complete ``__all__``; no Django; modules <= 400 lines."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import deerflow.retention

ROOT = Path(__file__).resolve().parents[3]
MODULES = ["deerflow.retention"] + [f"deerflow.retention.{m.name}"
                                     for m in pkgutil.iter_modules(deerflow.retention.__path__)]


@pytest.mark.parametrize("module_name", MODULES)
def test_all_is_sorted_complete_and_the_module_short(module_name):
    module = importlib.import_module(module_name)
    exported = module.__all__
    assert exported == sorted(exported) and len(exported) == len(set(exported))
    assert all(hasattr(module, name) for name in exported)
    source = inspect.getsource(module)
    assert len(source.splitlines()) <= 400
    public = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            public.add(node.name)
        elif isinstance(node, ast.Assign):
            public.update(t.id for t in node.targets if isinstance(t, ast.Name))
    assert {n for n in public if not n.startswith("_")} - {"__all__"} <= set(exported)


def test_retention_imports_without_django():
    code = "import sys, deerflow.retention; print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT),
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
