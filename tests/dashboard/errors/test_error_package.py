"""``dashboard/errors/`` is the one error package, imported by its own module paths (no alias is left)."""

from __future__ import annotations

import importlib

import pytest

import dashboard.errors as errors
from deerflow.errors import StorageQueryError, ThreadNotFoundError


@pytest.mark.parametrize("old", ["dashboard.outages", "dashboard.notfound", "dashboard.jobs.errors"])
def test_the_old_module_paths_are_gone(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_settings_and_urls_name_the_error_modules_by_their_own_paths():
    from django.conf import settings

    import dashboard.middleware as security
    import dashboard.urls as urls

    named = [m for m in settings.MIDDLEWARE if m.endswith(("OutageMiddleware", "DamagedCheckpointMiddleware",
                                                           "MethodNotAllowedMiddleware"))]
    assert named == ["dashboard.errors.middleware.MethodNotAllowedMiddleware",
                     "dashboard.errors.middleware.DamagedCheckpointMiddleware",
                     "dashboard.errors.middleware.OutageMiddleware"]
    assert urls.handler404 == "dashboard.errors.handlers.not_found"
    assert settings.CSRF_FAILURE_VIEW == "dashboard.errors.handlers.csrf_failure"
    assert not hasattr(security, "error_page") and not hasattr(security, "OutageMiddleware")  # no re-exports


def test_the_package_face_is_curated_and_reaches_every_registry_name():
    from dashboard.errors import registry

    assert len(set(errors.__all__)) == len(errors.__all__) and all(hasattr(errors, n) for n in errors.__all__)
    for name in registry.__all__:
        assert getattr(errors, name) is getattr(registry, name)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = errors.nothing_here
    with pytest.raises(AttributeError):  # a registry name outside the face is not forwarded
        _ = errors.InvalidCursorError


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
