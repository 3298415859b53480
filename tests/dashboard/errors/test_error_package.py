"""``dashboard/errors/`` is the one error package; the old module paths are the same modules."""

from __future__ import annotations

import importlib

import pytest

import dashboard.errors as errors
from deerflow.errors import StorageQueryError, ThreadNotFoundError


@pytest.mark.parametrize(("old", "new"), [
    ("dashboard.outages", "dashboard.errors.outages"),
    ("dashboard.notfound", "dashboard.errors.handlers"),
    ("dashboard.jobs.errors", "dashboard.errors.jobs"),
])
def test_an_old_path_is_the_moved_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_the_old_middleware_names_are_the_moved_objects():
    import dashboard.errors.middleware as moved
    import dashboard.errors.rendering as rendering
    import dashboard.middleware as old

    assert old.OutageMiddleware is moved.OutageMiddleware
    assert old.DamagedCheckpointMiddleware is moved.DamagedCheckpointMiddleware
    assert old.MethodNotAllowedMiddleware is moved.MethodNotAllowedMiddleware
    assert (old.error_answer, old.error_page, old.json_error) == (
        rendering.error_answer, rendering.error_page, rendering.json_error)


def test_the_package_face_reaches_every_registry_name():
    from dashboard.errors import registry

    for name in registry.__all__:
        assert getattr(errors, name) is getattr(registry, name)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = errors.nothing_here


def test_a_registered_code_answers_with_its_hint():
    answer = errors.describe(ThreadNotFoundError("t-1"))
    assert (answer.status, answer.code) == (404, "thread_not_found")
    assert answer.hint == errors.CODES["thread_not_found"].hint
    assert answer.detail == "Thread 't-1' has no checkpoints in this database."
    with pytest.raises(KeyError):
        errors.view("no_such_code", "x")


def test_every_registered_code_has_a_status_and_a_hint():
    for code, registered in errors.CODES.items():
        assert 400 <= registered.status < 600, code
        assert registered.hint.endswith("."), code


def test_a_sql_bug_from_deerflow_is_not_described_as_an_outage():
    import sqlite3

    bug = StorageQueryError(sqlite3.OperationalError('near "SELEC": syntax error'))
    assert not errors.is_outage(bug)
    with pytest.raises(TypeError, match="unhandled error type StorageQueryError"):
        errors.describe(bug)
