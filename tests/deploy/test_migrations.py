"""Every model change has its migration (a deployment runs ``migrate``, never ``makemigrations``)."""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration(capsys):
    call_command("makemigrations", "--check", "--dry-run", verbosity=1)  # SystemExit(1) when one is missing
    assert capsys.readouterr().out.strip() == "No changes detected"
