"""Per-thread cadence facts kept next to the summary, so the audit never scans ``checkpoints``.

:func:`snapshot_sql` is the one definition of a *cadence snapshot* (see
:mod:`deerflow.inventory.census` for the rule: a counter-less first child of a parent
with counters ``[u, s]``, not a full-mode write under a marked parent). The
refresh stores, per thread, in ``dfa_thread_cadences``:

* ``kind = 'exact'``: one row per proven cadence ``u + 1`` with the number of
  snapshots proving it and the smallest ``s`` among them (``-1`` when unknown),
  so a reader can drop the cadences only the supersteps bound may have caused
  (``min_supersteps + 1 >= bound``) exactly as a scan would;
* ``kind = 'bound'``: ``max(u) + 1`` over the thread's counters, the lower bound
  when no snapshot proves a value.

The rows of a thread are replaced whenever its summary row is recomputed.
"""

from __future__ import annotations

from typing import Any

from deerflow.storage.sqlread import SqlReader, Tx

__all__ = ["counter_expr", "replace_cadences", "snapshot_sql", "thread_snapshot_sql"]


def counter_expr(reader: SqlReader, alias: str, index: int) -> str:
    """SQL for ``counters_since_delta_snapshot["messages"][index]`` of ``alias``'s metadata (an integer or NULL)."""
    return reader.counter(alias, index)


#: Each candidate row ``c`` joined to its parent ``p`` in the same namespace.
_PARENT_JOIN = (
    "JOIN checkpoints p ON p.thread_id = c.thread_id AND p.checkpoint_ns = c.checkpoint_ns "
    "AND p.checkpoint_id = c.parent_checkpoint_id"
)


def _snapshot_rule(r: SqlReader) -> str:
    """The cadence-snapshot condition on ``c`` and its parent ``p``: ``c`` carries no counters while ``p``
    does, and ``c`` is not an unmarked child of a delta-marked parent (a flip back to full, not a snapshot)."""
    return f"NOT {r.counters('c')} AND {r.counters('p')} AND NOT ({r.marker('p')} AND NOT {r.marker('c')})"


def snapshot_sql(r: SqlReader, where: str) -> str:
    """``SELECT thread_id, checkpoint_id, u, s`` of every cadence snapshot ``c`` (``where``: ``AND ...`` on ``c``)."""
    u_p, s_p = counter_expr(r, "p", 0), counter_expr(r, "p", 1)
    return (
        f"SELECT c.thread_id, c.checkpoint_id, {u_p} AS u, {s_p} AS s FROM checkpoints c {_PARENT_JOIN} "
        f"WHERE {_snapshot_rule(r)} "
        f"AND NOT EXISTS (SELECT 1 FROM checkpoints o WHERE o.thread_id = c.thread_id "
        f"AND o.checkpoint_ns = c.checkpoint_ns AND o.parent_checkpoint_id = c.parent_checkpoint_id "
        f"AND o.checkpoint_id < c.checkpoint_id) {where}"
    )


def thread_snapshot_sql(r: SqlReader, thread_filter: str) -> str:
    """:func:`snapshot_sql`'s rows for whole threads, each child's rank among its siblings found in one pass.

    Same rule and columns (``thread_id, u, s``), but "no older sibling" is a
    window (``ROW_NUMBER`` over the children of one parent, by checkpoint id)
    instead of a ``NOT EXISTS`` probe per candidate: on Postgres the probe
    walks the thread's primary-key range once per snapshot, the window sorts the
    thread's rows once.

    Args:
        r: the saver's reader.
        thread_filter: ``AND ...`` on ``c.thread_id`` only (e.g. ``"AND c.thread_id IN (?)"``): it must keep
            or drop a thread's rows together, since the siblings decide which child is first.
    """
    u_p, s_p = counter_expr(r, "p", 0), counter_expr(r, "p", 1)
    return (
        f"SELECT c.thread_id, {u_p} AS u, {s_p} AS s FROM (SELECT c.thread_id, c.checkpoint_ns, "
        f"c.parent_checkpoint_id, c.metadata, ROW_NUMBER() OVER (PARTITION BY c.thread_id, c.checkpoint_ns, "
        f"c.parent_checkpoint_id ORDER BY c.checkpoint_id) AS sibling_rank FROM checkpoints c "
        f"WHERE c.parent_checkpoint_id IS NOT NULL {thread_filter}) c {_PARENT_JOIN} "
        f"WHERE c.sibling_rank = 1 AND {_snapshot_rule(r)}"
    )


def replace_cadences(tx: Tx, reader: SqlReader, where: str, params: list[Any]) -> None:
    """Recompute the ``dfa_thread_cadences`` rows of the threads matching ``where``.

    Call it after :func:`deerflow.inventory.summary.writes.replace_writes` for the same threads: the exact
    cadences are read from ``dfa_thread_write_snapshots``.

    Args:
        where: a filter on a column named ``thread_id`` (as for
            :func:`deerflow.inventory.summary.rows.row_select_sql`), e.g. ``"thread_id IN (?, ?)"``.
        params: its parameters (once).
    """
    on_c = where.replace("thread_id", "c.thread_id")
    u_c = counter_expr(reader, "c", 0)
    tx.execute(f"DELETE FROM dfa_thread_cadences WHERE {where}", params)
    # The exact cadences are the bucketed snapshot facts summed over buckets (the same snapshot_sql
    # rows, grouped further): no second pass of the snapshot join.
    tx.execute(
        "INSERT INTO dfa_thread_cadences (thread_id, kind, cadence, snapshots, min_supersteps) "
        "SELECT thread_id, 'exact', cadence, SUM(snapshots), MIN(supersteps) FROM dfa_thread_write_snapshots "
        f"WHERE {where} GROUP BY thread_id, cadence", params)
    tx.execute(
        "INSERT INTO dfa_thread_cadences (thread_id, kind, cadence, snapshots, min_supersteps) "
        f"SELECT c.thread_id, 'bound', MAX({u_c}) + 1, 0, NULL FROM checkpoints c "
        f"WHERE {reader.counters('c')} AND {on_c} GROUP BY c.thread_id HAVING MAX({u_c}) IS NOT NULL", params)
