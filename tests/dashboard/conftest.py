"""Dashboard test fixtures: personas.

Personas: ``staff`` (may browse), ``outsider`` (logged in, not staff), and
``anonymous``. ``runtime_for`` and ``fixture_backend`` live in ``tests/conftest.py``.
"""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def staff_user(django_user_model):
    """A staff user named ``staff`` (password ``staff-pass``)."""
    return django_user_model.objects.create_user("staff", password="staff-pass", is_staff=True)


@pytest.fixture
def outsider_user(django_user_model):
    """A logged-in but non-staff user."""
    return django_user_model.objects.create_user("outsider", password="outsider-pass", is_staff=False)


@pytest.fixture
def staff_client(staff_user) -> Client:
    """A Django test client logged in as the staff persona."""
    client = Client()
    client.force_login(staff_user)
    return client
