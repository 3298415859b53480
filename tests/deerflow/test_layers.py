"""The layers import one way: ``benchmarks`` -> ``dashboard`` -> ``deerflow``, never back (issue 17)."""

from __future__ import annotations

import ast
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
