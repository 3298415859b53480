"""Fixtures for the hardening suite: the dashboard's runtime factory and personas, re-exported."""

from tests.dashboard.conftest import (  # noqa: F401 - pytest fixtures re-exported for this package
    outsider_user,
    staff_client,
    staff_user,
)
