"""Fixtures for the ``deerflow.convert`` tests: both backends, fresh (``db``) or holding the real fixture
(``fixture_db``); both are defined once in :mod:`tests.backends`."""

from __future__ import annotations

from tests.backends import db, fixture_db  # noqa: F401 - fixtures
