"""The LangGraph pins (issue 13, "Today's LangGraph releases").

pyproject.toml admits the newest releases (langgraph-checkpoint-postgres 3.2.0
included) and keeps minimums that read correctly; ``.ci/minimums.txt`` pins
exactly those minimums for CI's first pass, and the installed versions (either
pass) satisfy pyproject.toml.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "langgraph-checkpoint-sqlite")


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = (Requirement(line) for line in project["dependencies"])
    return {r.name: r for r in reqs if r.name in LANGGRAPH}


def _minimums() -> dict[str, str]:
    out = {}
    for line in (ROOT / ".ci" / "minimums.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, pinned = line.split("==")
            out[name.strip()] = pinned.strip()
    return out


def test_every_langgraph_package_has_a_minimum_and_an_upper_bound():
    reqs = _requirements()
    assert set(reqs) == set(LANGGRAPH)
    for name, req in reqs.items():
        operators = {spec.operator for spec in req.specifier}
        assert operators == {">=", "<"}, f"{name}: {req.specifier}"


def test_the_minimums_file_pins_exactly_the_pyproject_minimums():
    reqs = _requirements()
    floors = {name: next(s.version for s in req.specifier if s.operator == ">=") for name, req in reqs.items()}
    assert _minimums() == floors


def test_todays_releases_are_admitted():
    reqs = _requirements()
    assert reqs["langgraph-checkpoint-postgres"].specifier.contains("3.2.0")
    assert not reqs["langgraph-checkpoint-postgres"].specifier.contains("3.1.2")  # below the read fixes
    assert reqs["langgraph"].specifier.contains("1.2.24")
    assert not reqs["langgraph"].specifier.contains("1.2.23")


def test_the_installed_releases_satisfy_pyproject():
    for name, req in _requirements().items():
        assert req.specifier.contains(version(name)), f"{name} {version(name)} outside {req.specifier}"
