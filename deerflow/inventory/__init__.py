"""What is stored: the threads of a checkpoint database, their classes, sizes and cadences, from metadata only.

Nothing here materializes a checkpoint's state: every fact comes from the ids, metadata and stored
sizes of LangGraph's tables (the DeerFlow marker and LangGraph's ``counters_since_delta_snapshot``,
spec "Marker contract"), read through the thread summary where this role can use it.

* :mod:`~deerflow.inventory.listing` -- the thread list (filters, sorts, keyset pages), one thread's
  row, class and storage totals;
* :mod:`~deerflow.inventory.thread_summary` -- :class:`ThreadSummary` and the thread classes;
* :mod:`~deerflow.inventory.thread_count` -- how many threads a list filter matches;
* :mod:`~deerflow.inventory.cursors` -- the list's keyset cursors, checked before they reach SQL;
* :mod:`~deerflow.inventory.census` -- cadence inference and writer facts;
* :mod:`~deerflow.inventory.footprint` -- stored bytes per checkpoint over a thread's life;
* :mod:`~deerflow.inventory.namespaces` -- a thread's checkpoint namespaces (root and subgraph runs);
* :mod:`deerflow.inventory.summary` -- the thread summary table itself (schema, rows, refresh, stats);
* :mod:`deerflow.inventory.deerflow_tables` -- DeerFlow's own ``threads_meta`` and ``runs`` beside the
  checkpoints, when the database has them: detection, titles, owners, runs, orphans (read-only).

Laws:

* ``count_threads(saver, **f) == len(every page of list_threads(saver, **f))`` read at one moment;
* a list or count answers the same from the summary as from the live aggregate of LangGraph's tables
  (a role that cannot use the summary gets the live one);
* a thread's mode evidence is :func:`deerflow.runtime.checkpoint_mode.checkpoint_metadata_uses_delta`,
  and its SQL twin :func:`deerflow.runtime.checkpoint_mode.delta_evidence_sql` (one definition).
"""

from deerflow.inventory import deerflow_tables, summary
from deerflow.inventory.census import (
    CadenceInference,
    CadenceOutliers,
    WriterFacts,
    cadence_outliers,
    infer_cadences,
    recent_writer_facts,
)
from deerflow.inventory.cursors import SORTS, InvalidCursorError, decode_cursor, encode_cursor
from deerflow.inventory.footprint import CheckpointBytes, checkpoint_bytes
from deerflow.inventory.listing import (
    LIST_CLASSES,
    ORPHANED,
    class_counts,
    current_summary,
    get_thread_summary,
    list_threads,
    mode_totals,
    storage_by_class,
    storage_by_mode,
    stored_bytes,
    stored_summary,
    validate_list_args,
)
from deerflow.inventory.namespaces import Namespace, has_subgraph_namespaces, thread_namespaces
from deerflow.inventory.thread_count import count_threads
from deerflow.inventory.thread_summary import THREAD_CLASSES, ThreadClass, ThreadSummary, classify, summary_from_row

__all__ = [
    "CadenceInference",
    "CadenceOutliers",
    "CheckpointBytes",
    "InvalidCursorError",
    "LIST_CLASSES",
    "Namespace",
    "ORPHANED",
    "SORTS",
    "THREAD_CLASSES",
    "ThreadClass",
    "ThreadSummary",
    "WriterFacts",
    "cadence_outliers",
    "checkpoint_bytes",
    "class_counts",
    "classify",
    "count_threads",
    "current_summary",
    "decode_cursor",
    "deerflow_tables",
    "encode_cursor",
    "get_thread_summary",
    "has_subgraph_namespaces",
    "infer_cadences",
    "list_threads",
    "mode_totals",
    "recent_writer_facts",
    "storage_by_class",
    "storage_by_mode",
    "stored_bytes",
    "stored_summary",
    "summary",
    "summary_from_row",
    "thread_namespaces",
    "validate_list_args",
]
