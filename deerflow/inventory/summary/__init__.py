"""The thread summary: one row per thread in our own table, kept current from a watermark over checkpoint ids.

The thread list, its filters and sorts, the census and the storage totals
read ``dfa_thread_summary`` through indexes instead of aggregating every
checkpoint per request. Modules:

* :mod:`deerflow.inventory.summary.schema` -- the tables, indexes and append-only migrations
  (in the checkpoint database; LangGraph's tables keep their meaning), and
  what this role may do with them (``write`` / ``read`` / ``none``);
* :mod:`deerflow.inventory.summary.rows` -- the one definition of a thread's row, from its own rows;
* :mod:`deerflow.inventory.summary.refresh` -- the watermark refresh, targeted recomputes, freshness;
* :mod:`deerflow.inventory.summary.stats` -- replay-depth quantiles and the summary's age, for monitoring;
* :mod:`deerflow.inventory.summary.cadences`, :mod:`deerflow.inventory.summary.writes` -- the per-thread
  cadence and write-bucket tables the census reads.

Tables::

    dfa_thread_summary(thread_id PK, checkpoint_count, last_checkpoint_id, head_checkpoint_id,
                       marker_count, counters_count, bare_count, head_marker, head_counters,
                       mode, mode_evidence, thread_class, replay_depth,
                       bytes_checkpoints, bytes_blobs, bytes_writes, bytes_total)
    dfa_summary_state(id = 1, watermark, backups_seen, restored_seen, full_refresh_at, refreshed_at,
                      missing, verified_at)
    dfa_summary_migrations(v)

Staleness bound: a list request refreshes inline when at most 2,000
checkpoints arrived since the watermark; otherwise (and for rows committed
late, within 120 s of their id's time) the periodic refresh catches up within
its period; rewrites that keep ids are caught by the backups check, a thread
page view, or the periodic full reconcile. Rows written *below* the watermark
(a backfill, a restore, a bulk load with old ids) are invisible to it: a
refresh with ``verify_s`` compares the summary's checkpoint total with
``COUNT(*)`` of ``checkpoints`` and records what is missing (``missing``;
with ``rebuild_missing`` it rebuilds every row at once).
"""

from deerflow.inventory.summary.refresh import (
    Freshness,
    RefreshReport,
    ensure_fresh,
    freshness,
    id_floor,
    readable,
    refresh,
    refresh_threads,
    version,
)
from deerflow.inventory.summary.rows import row_params, row_select_sql
from deerflow.inventory.summary.schema import MIGRATIONS, access, ensure_schema, is_denied, is_summary_table_missing
from deerflow.inventory.summary.stats import QUANTILES, depth_quantiles, replay_depth_counts, summary_age_seconds

__all__ = [
    "Freshness",
    "MIGRATIONS",
    "QUANTILES",
    "RefreshReport",
    "access",
    "depth_quantiles",
    "ensure_fresh",
    "ensure_schema",
    "freshness",
    "id_floor",
    "is_denied",
    "is_summary_table_missing",
    "readable",
    "refresh",
    "refresh_threads",
    "replay_depth_counts",
    "row_params",
    "row_select_sql",
    "summary_age_seconds",
    "version",
]
