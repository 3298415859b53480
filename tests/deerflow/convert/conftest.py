"""Fixtures for the ``deerflow.convert`` tests: both backends, fresh (``scratch_db``) or holding the real
fixture (``fixture_db``); both are defined once in :mod:`tests.backends`."""

from __future__ import annotations

from tests.backends import fixture_db, scratch_db  # noqa: F401 - fixtures
