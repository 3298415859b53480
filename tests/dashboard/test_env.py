"""dashboard.env's typed readers: a bad value stops the process with the variable's name and what it must be."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import env_float


@pytest.mark.parametrize(("raw", "expected"), [(None, 0.1), ("", 0.1), ("  ", 0.1), ("0.5", 0.5), ("2", 2.0)])
def test_env_float_reads_a_number_or_the_default(monkeypatch, raw, expected):
    if raw is None:
        monkeypatch.delenv("DFA_TEST_SECONDS", raising=False)
    else:
        monkeypatch.setenv("DFA_TEST_SECONDS", raw)
    assert env_float("DFA_TEST_SECONDS", 0.1, minimum=0.01) == expected


@pytest.mark.parametrize(("raw", "message"), [
    ("fast", "DFA_TEST_SECONDS='fast' is not a number."),
    ("nan", "DFA_TEST_SECONDS=nan must be a finite number >= 0.01."),
    ("inf", "DFA_TEST_SECONDS=inf must be a finite number >= 0.01."),
    ("0.001", "DFA_TEST_SECONDS=0.001 must be a finite number >= 0.01."),
    ("-1", "DFA_TEST_SECONDS=-1 must be a finite number >= 0.01."),
])
def test_env_float_refuses_a_bad_value_by_name(monkeypatch, raw, message):
    monkeypatch.setenv("DFA_TEST_SECONDS", raw)
    with pytest.raises(ImproperlyConfigured) as raised:
        env_float("DFA_TEST_SECONDS", 0.1, minimum=0.01)
    assert str(raised.value) == message
