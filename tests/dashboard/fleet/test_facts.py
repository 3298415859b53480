"""dashboard.fleet.facts: what a process reports about itself (frozen values, the file now, versions)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from importlib import metadata

import yaml

from dashboard.fleet.facts import max_supersteps, package_versions, process_facts
from tests.integration.helpers import REPO_ROOT

KEYS = {"role", "host", "pid", "mode", "snapshot_frequency", "config_path", "config_sha256", "max_supersteps",
        "versions", "queues", "disk_sha256", "disk_mode", "disk_snapshot_frequency", "disk_error", "checkpoint_cache"}


def test_facts_of_a_frozen_process(runtime_for, sqlite_fixture_db):
    rt = runtime_for(sqlite_fixture_db, "delta", 25)
    facts = process_facts(rt, role="worker", queues=["dashboard", "checkpoints.delta"])
    assert set(facts) == KEYS
    path = rt.config.path
    assert facts["role"] == "worker" and facts["pid"] == os.getpid()
    assert (facts["mode"], facts["snapshot_frequency"]) == ("delta", 25)
    assert facts["config_path"] == str(path)
    assert facts["config_sha256"] == hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert facts["queues"] == ["dashboard", "checkpoints.delta"]
    assert (facts["disk_sha256"], facts["disk_mode"], facts["disk_snapshot_frequency"], facts["disk_error"]) == (
        facts["config_sha256"], "delta", 25, "")
    assert facts["max_supersteps"] == 5000


def test_facts_follow_the_file_on_disk_but_not_the_frozen_values(runtime_for, sqlite_fixture_db):
    rt = runtime_for(sqlite_fixture_db, "delta", 10)
    path = rt.config.path
    data = yaml.safe_load(path.read_text())
    data["database"]["checkpoint_channel_mode"] = "full"
    data["database"]["checkpoint_delta"]["snapshot_frequency"] = 40
    path.write_text(yaml.safe_dump(data) + "# edited\n")
    facts = process_facts(rt, role="web")
    assert (facts["mode"], facts["snapshot_frequency"]) == ("delta", 10)
    assert (facts["disk_mode"], facts["disk_snapshot_frequency"]) == ("full", 40)
    assert facts["disk_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() != facts["config_sha256"]

    path.write_text("database: [not, a, mapping]\n")
    facts = process_facts(rt, role="web")
    assert facts["disk_mode"] == "" and facts["disk_sha256"] == "" and facts["disk_snapshot_frequency"] is None
    assert facts["disk_error"]

    path.unlink()
    facts = process_facts(rt, role="web")
    assert str(path) in facts["disk_error"]


def test_package_versions_are_the_installed_ones():
    versions = package_versions()
    assert set(versions) == {"langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres",
                             "langgraph-checkpoint-sqlite", "deerflow-checkpoint-admin"}
    for name, version in versions.items():
        try:
            assert version == metadata.version(name)
        except metadata.PackageNotFoundError:
            assert version == "missing"
    assert versions["langgraph"] != "missing"


def test_max_supersteps_as_the_process_sees_it():
    assert max_supersteps() == 5000
    env = {**os.environ, "LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT": "777"}
    out = subprocess.run([sys.executable, "-c", "from dashboard.fleet.facts import max_supersteps; "
                          "print(max_supersteps())"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "777"
