"""DeerFlow's own application tables beside the checkpoints, read only: ``threads_meta`` and ``runs``.

A DeerFlow deployment keeps its alembic-managed tables in the checkpoint database itself (SQLite: the same
``{sqlite_dir}/deerflow.db``; Postgres: the same database and ``search_path`` schema). Two of them say what
the checkpoint tables cannot:

* ``threads_meta`` (one row per thread DeerFlow's gateway created): the title (``display_name``), the owner
  (``user_id``), DeerFlow's thread status;
* ``runs``: every run and every admission reservation of a thread (``operation_kind``), at most one of them
  *in flight* (``status`` ``pending`` or ``running``) per thread, which the partial unique index
  ``uq_runs_thread_active`` enforces.

Everything is detected per database (:func:`presence`): a database without the tables (a bare LangGraph
deployment, an embedded ``DeerFlowClient``) answers :data:`ABSENT` and every caller keeps its behaviour
without them. Only the columns the database has are read (an older DeerFlow lacks ``operation_kind``,
``stop_reason`` ...: those read as ``None``), and stored values are taken as untrusted (any type SQLite
holds, any text).

*Orphans*: checkpoint threads without a ``threads_meta`` row whose newest checkpoint is older than a minimum
idle age (:func:`orphan_floor`). DeerFlow writes the row before a thread's first checkpoint, so such a thread
is left over from a deletion that removed the row but not every checkpoint (DeerFlow deletes checkpoints best
effort), unless an embedded ``DeerFlowClient`` wrote it (those never create a row).

Modules: :mod:`.schema` (DeerFlow's enums, :func:`presence`, stored values read safely), :mod:`.threads`
(``threads_meta`` rows and the thread list's conditions), :mod:`.orphans`, :mod:`.runs` (a thread's runs and
:func:`thread_facts`). Import from this package, not from them.

Every function takes ``db``: a :class:`deerflow.sqlread.SqlReader` or :class:`deerflow.sqlread.Tx` (anything
with ``dialect`` and ``query``); driver errors reach callers as :class:`deerflow.errors.StorageError`.
Facts and sources: docs/operations.md, "Running beside a live DeerFlow".
"""

from deerflow.inventory.deerflow_tables.orphans import (
    OrphanTotals,
    metadata_without_checkpoints,
    orphan_floor,
    orphan_totals,
    orphaned_thread_ids,
    still_orphaned,
)
from deerflow.inventory.deerflow_tables.runs import (
    RunRecord,
    ThreadFacts,
    thread_facts,
    thread_runs,
)
from deerflow.inventory.deerflow_tables.schema import (
    ABSENT,
    ACTIVE_RUN_STATUSES,
    DEFAULT_ORPHAN_MIN_IDLE_S,
    MAX_OWNER_LENGTH,
    RUNS_SHOWN,
    Presence,
    RunStatus,
    ThreadOperationKind,
    presence,
)
from deerflow.inventory.deerflow_tables.threads import (
    ThreadMeta,
    annotate,
    list_conditions,
    live_filter,
    thread_meta,
    validate_owner,
)

__all__ = [
    "ABSENT",
    "ACTIVE_RUN_STATUSES",
    "DEFAULT_ORPHAN_MIN_IDLE_S",
    "MAX_OWNER_LENGTH",
    "OrphanTotals",
    "Presence",
    "RUNS_SHOWN",
    "RunRecord",
    "RunStatus",
    "ThreadFacts",
    "ThreadMeta",
    "ThreadOperationKind",
    "annotate",
    "list_conditions",
    "live_filter",
    "metadata_without_checkpoints",
    "orphan_floor",
    "orphan_totals",
    "orphaned_thread_ids",
    "presence",
    "still_orphaned",
    "thread_facts",
    "thread_meta",
    "thread_runs",
    "validate_owner",
]
