"""The ``xdist_group`` marks reach pytest-xdist's ``--dist loadgroup`` scheduler (``make test``, ``make check``).

The rabbitmq tests share one server-wide ``consumer_timeout`` and must run one after another on one worker
(tests/conftest.py adds their group); module fixtures that start processes (the fleet acceptance) must start
once. pytest-xdist passes a test's group to its scheduler as an ``@<group>`` suffix of the node id, set in
the worker. Two ways that was lost, both seen here: a group added by a conftest hook that ran after
pytest-xdist's (now ``tryfirst``), and pytest 9.2 with pytest-xdist 3.8, which ignores the suffix
(pytest-dev/pytest-xdist#1386; pyproject.toml keeps pytest below 9.2).
"""

from __future__ import annotations

import pytest


def _in_a_loadgroup_worker(request: pytest.FixtureRequest) -> bool:
    return bool(getattr(request.config.option, "loadgroup", False))  # set in the workers of such a run


@pytest.mark.rabbitmq
def test_a_rabbitmq_test_is_in_the_rabbitmq_server_group(request):
    marks = [m.args[0] for m in request.node.iter_markers("xdist_group")]
    assert marks == ["rabbitmq-server"]
    if _in_a_loadgroup_worker(request):
        assert request.node.nodeid.endswith("@rabbitmq-server"), (
            f"pytest-xdist did not tag {request.node.nodeid!r} with its group: the rabbitmq tests would run "
            "concurrently (see this module's docstring for the two known causes)")


@pytest.mark.xdist_group("group-check")
def test_a_module_mark_reaches_the_scheduler(request):
    if not _in_a_loadgroup_worker(request):
        pytest.skip("only meaningful in a worker of a --dist loadgroup run (make test, make check)")
    assert request.node.nodeid.endswith("@group-check"), (
        f"pytest-xdist did not tag {request.node.nodeid!r} with its group: with pytest 9.2 and pytest-xdist 3.8 "
        "it never does (pytest-dev/pytest-xdist#1386); reinstall the test extras (pytest below 9.2)")


def test_the_server_modules_are_grouped_by_module(request):
    """Every collected test of a MODULE_GROUPS module carries its module's group (rabbitmq ones the server's)."""
    from tests.conftest import MODULE_GROUPS

    grouped = [item for item in request.session.items
               if any(item.nodeid.startswith(prefix) for prefix in MODULE_GROUPS)]
    if not grouped:
        pytest.skip("no MODULE_GROUPS module is collected in this run")
    for item in grouped:
        module = item.nodeid.split("::", 1)[0].split("@", 1)[0]
        want = "rabbitmq-server" if item.get_closest_marker("rabbitmq") else f"module:{module}"
        assert [m.args[0] for m in item.iter_markers("xdist_group")] == [want], item.nodeid
