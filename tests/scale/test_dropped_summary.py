"""The summary's ``dfa_*`` tables dropped under a running process are recreated, not a 503 until a restart.

An operator's cleanup (or a restore of LangGraph's tables alone) can drop
them while web processes run; each process had cached that the tables were
migrated. The next list request recreates and rebuilds them.
"""

from __future__ import annotations

import pytest

from deerflow.storage.savers import open_checkpointer

pytestmark = pytest.mark.django_db

DFA_TABLES = ["dfa_thread_summary", "dfa_summary_state", "dfa_summary_migrations", "dfa_thread_cadences",
              "dfa_thread_writes", "dfa_thread_write_snapshots"]


def _drop_summary_tables(database) -> None:
    with open_checkpointer(database) as saver:
        if database.backend == "sqlite":
            for table in DFA_TABLES:
                saver.conn.execute(f"DROP TABLE {table}")
            saver.conn.commit()
        else:
            with saver.conn.connection() as conn:
                conn.execute(f"DROP TABLE {', '.join(DFA_TABLES)}")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_list_recreates_dropped_summary_tables(request, backend, runtime_for, staff_client):
    database = request.getfixturevalue(f"{backend}_fixture_db_rw")
    runtime_for(database, "delta")
    before = staff_client.get("/api/threads?limit=1000").json()["threads"]
    assert len(before) > 20

    _drop_summary_tables(database)
    after = staff_client.get("/api/threads?limit=1000")
    assert after.status_code == 200, after.content[:500]
    assert after.json()["threads"] == before
    page = staff_client.get("/threads/")
    assert page.status_code == 200 and b"Listed from the thread summary, complete up to" in page.content
