"""A role that may only read is refused before a conversion job exists, with what it needs.

Uses the ``SELECT``-only role of :mod:`tests.hardening.test_readonly_role`. A
dry run only reads and still runs; a conversion (and a revert) answers 409
``checkpoint_database_read_only`` naming the role and the missing privileges,
instead of failing thread by thread with ``InsufficientPrivilege … retry``.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from django.test import Client

from dashboard.accounts.models import ApiToken
from dashboard.jobs.models import ConversionJob
from dashboard.jobs.writable import missing_privileges
from tests.hardening.test_readonly_role import readonly_db  # noqa: F401 - fixture

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _post(user, body):
    return Client().post("/api/jobs", json.dumps(body), content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(user)[1]}")


def test_a_read_only_role_is_named_with_what_it_lacks(readonly_db):  # noqa: F811
    who, missing = missing_privileges(readonly_db)
    role = psycopg.conninfo.conninfo_to_dict(readonly_db.postgres_url)["user"]
    assert who == f"role {role!r}"
    assert missing == ["INSERT, UPDATE, DELETE on checkpoints", "INSERT, UPDATE, DELETE on checkpoint_blobs",
                       "INSERT, UPDATE, DELETE on checkpoint_writes",
                       "CREATE on the schema (for the backup tables dfa_backup*)"]


def test_an_owner_lacks_nothing(postgres_fixture_db_rw):
    assert missing_privileges(postgres_fixture_db_rw)[1] == []


def test_a_conversion_is_refused_before_it_starts_a_dry_run_runs(readonly_db, runtime_for, manager):  # noqa: F811
    runtime_for(readonly_db, "delta")
    refused = _post(manager, {"kind": "convert", "thread_ids": ["delta-f10-9t"], "confirmed": True})
    assert refused.status_code == 409
    body = refused.json()
    assert body["code"] == "checkpoint_database_read_only"
    assert "may only read; conversions need INSERT, UPDATE, DELETE on checkpoints" in body["detail"]
    assert "GRANT INSERT, UPDATE, DELETE ON checkpoints" in body["hint"] and "retry" not in body["hint"]
    assert ConversionJob.objects.count() == 0
    assert _post(manager, {"kind": "dry_run", "thread_ids": ["delta-f10-9t"]}).status_code == 201


def test_beside_deerflow_a_role_that_cannot_write_runs_is_refused_before_a_job(readonly_db, postgres_fixture_db_rw,  # noqa: F811
                                                                               runtime_for, manager):
    from tests.deerflow_schema import create_deerflow_tables

    create_deerflow_tables(postgres_fixture_db_rw)  # as the owner; the role may only read runs
    role = psycopg.conninfo.conninfo_to_dict(readonly_db.postgres_url)["user"]
    with psycopg.connect(postgres_fixture_db_rw.postgres_url, autocommit=True) as conn:
        conn.execute(f'GRANT INSERT, UPDATE, DELETE ON checkpoints, checkpoint_blobs, checkpoint_writes TO "{role}"')
        conn.execute(f'GRANT CREATE ON SCHEMA public TO "{role}"')
        conn.execute(f'GRANT SELECT ON runs, threads_meta TO "{role}"')
    assert missing_privileges(readonly_db)[1] == ["INSERT, UPDATE, DELETE on runs"]
    runtime_for(readonly_db, "delta")
    refused = _post(manager, {"kind": "compact", "thread_ids": ["full-short-3t"], "confirmed": True})
    assert refused.status_code == 409 and "INSERT, UPDATE, DELETE on runs" in refused.json()["detail"]
    assert ConversionJob.objects.count() == 0
