"""A thread deleted outside the dashboard leaves the list at its own 404.

The summary's watermark sees only new checkpoints, so a thread whose rows
were deleted (by an operator's cleanup script, a retention job) stays listed
until a full refresh. Opening it answers 404 and removes the summary's row
there and then, so the list stops contradicting the 404's hint.
"""

from __future__ import annotations

import pytest

from deerflow.storage.savers import open_checkpointer

pytestmark = pytest.mark.django_db

THREAD = "full-short-3t"
#: LangGraph's tables holding a thread's rows, per backend.
TABLES = {"sqlite": ["checkpoints", "writes"],
          "postgres": ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]}


def _listed(client) -> set[str]:
    return {t["thread_id"] for t in client.get("/api/threads?limit=1000").json()["threads"]}


def _delete_thread(database, backend: str, thread_id: str) -> None:
    """What an operator's cleanup does: delete the thread's rows directly, bypassing the dashboard."""
    with open_checkpointer(database) as saver:
        if backend == "sqlite":
            for table in TABLES[backend]:
                saver.conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
            saver.conn.commit()
        else:
            with saver.conn.connection() as conn:
                for table in TABLES[backend]:
                    conn.execute(f"DELETE FROM {table} WHERE thread_id = %s", (thread_id,))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("route", ["/threads/{}/", "/api/threads/{}/state", "/api/threads/{}/namespaces"])
def test_the_404_of_a_deleted_thread_removes_it_from_the_list(request, backend, route, runtime_for, staff_client):
    database = request.getfixturevalue(f"{backend}_fixture_db_rw")
    runtime_for(database, "delta")
    before = _listed(staff_client)
    assert THREAD in before

    _delete_thread(database, backend, THREAD)
    assert THREAD in _listed(staff_client)  # the incremental summary cannot see a deletion

    response = staff_client.get(route.format(THREAD))
    assert response.status_code == 404
    assert _listed(staff_client) == before - {THREAD}
    assert staff_client.get(route.format(THREAD)).status_code == 404  # and again, with nothing left to remove
