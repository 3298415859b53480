"""The error tree of the ``deerflow`` package.

::

    DeerFlowError
    ├── ConfigError                         config.yaml missing, unreadable or invalid
    │   └── SeedTargetError                 (deerflow.seed.target) the seed's target database is unusable
    ├── CheckpointModeMismatchError         a thread's checkpoints conflict with the frozen mode (HTTP 409)
    ├── CheckpointModeReconfigurationError  the process was asked to change a frozen value (HTTP 503)
    ├── ThreadNotFoundError                 no checkpoint stored for a thread id (HTTP 404)
    ├── CheckpointNotFoundError             no checkpoint with that id / namespace (HTTP 404)
    ├── CheckpointDecodeError               a stored checkpoint value cannot be decoded (HTTP 422)
    ├── IncompleteHistoryError              a delta checkpoint's replay chain is broken (HTTP 422)
    ├── ReducerError                        a stored write the messages reducer refuses (HTTP 422)
    ├── BranchAmbiguousError                sibling forks: which child consumed the fork's writes is unknown (HTTP 422)
    ├── InvalidCursorError                  (deerflow.inventory.listing) a thread-list cursor does not decode
    ├── BackupNotFoundError                 (deerflow.convert.backups) no active backup with this id
    │   └── BackupAlreadyPurgedError        the backup was purged before
    ├── ThreadExistsError                   (deerflow.seed) a seed would overwrite a stored thread
    ├── Abort                               (deerflow.convert.report) a rewrite of one thread stopped, rolled back
    │   └── RetentionAbort                  (deerflow.retention.report) a prune of one thread stopped, rolled back
    ├── GeneralPathNeeded                   (deerflow.retention.setprune) internal: the set-based prune hands
    │                                       the thread to the general path (caught by prune_thread)
    ├── BatchRollback                       (deerflow.retention.batchcheck) internal: a batch prune's check
    │                                       failed; it rolls back and its threads are pruned one by one
    ├── RunInFlightError                    (deerflow.storage.reservation) DeerFlow has a run on the thread
    ├── NoSqlTablesError                    the saver keeps no SQL tables (InMemorySaver); also a TypeError
    └── StorageError                        a database driver error at the reader/session boundary
        ├── StorageUnavailableError         unreachable, locked, busy, disk I/O, unreadable file (an outage)
        ├── StoragePermissionError          this role or file may not do that (privilege, read-only)
        └── StorageQueryError               any other driver error: a bad statement, a missing table, a constraint

Outside the tree on purpose (a test lists them): ``deerflow.storage.pool.ServerUnreachable``
is a ``psycopg_pool.PoolTimeout`` (the pool is lent to LangGraph's saver, whose
callers expect the driver's class; :mod:`deerflow.storage.sqlread` translates it into
``StorageUnavailableError``), and ``deerflow.seed.SeedInterrupted`` is a
``KeyboardInterrupt`` (Ctrl-C must not be caught by ``except Exception``).

The two mode errors and their messages are fixed by the specification
("The fail-closed gate" and "HTTP error mapping"); the dashboard maps each
class to a status code and a remediation hint kept in one registry.

Driver errors (``sqlite3``, ``psycopg``) raised by SQL that :mod:`deerflow.storage.sqlread`
or :mod:`deerflow.storage.sessions` runs are translated there
(:mod:`deerflow.storage.driver_errors`) with ``raise ... from exc``: the driver's
error stays available as ``__cause__`` and :attr:`StorageError.driver_error`.
Errors raised inside LangGraph's savers (``saver.list``, ``saver.put``) are
LangGraph's and reach the caller as the driver raised them.
"""

from __future__ import annotations

__all__ = [
    "BranchAmbiguousError",
    "CheckpointDecodeError",
    "CheckpointModeMismatchError",
    "CheckpointModeReconfigurationError",
    "CheckpointNotFoundError",
    "ConfigError",
    "DeerFlowError",
    "IncompleteHistoryError",
    "MISMATCH_MESSAGE",
    "NoSqlTablesError",
    "RECONFIGURATION_MESSAGE",
    "ReducerError",
    "SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE",
    "StorageError",
    "StoragePermissionError",
    "StorageQueryError",
    "StorageUnavailableError",
    "ThreadNotFoundError",
]

#: The exact text of a rejected access (spec, "The fail-closed gate").
MISMATCH_MESSAGE = (
    "Thread requires delta mode; materialize and convert its checkpoints "
    "before using full mode."
)
#: The 503 detail for a mode change in a running process (spec, "HTTP error mapping").
RECONFIGURATION_MESSAGE = (
    "checkpoint_channel_mode is restart-required and cannot change in a running process"
)
#: The cadence twin of :data:`RECONFIGURATION_MESSAGE`.
SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE = (
    "checkpoint_delta.snapshot_frequency is restart-required and cannot change "
    "in a running process"
)


class DeerFlowError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(DeerFlowError, ValueError):
    """config.yaml is missing, unreadable, malformed, or holds a bad value.

    Raised at start-up by :func:`deerflow.config.load_config`. The message
    names the file, the key and the allowed values. Fix the file and restart.
    """

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None):
        super().__init__(message)
        self.path = path
        self.key = key


class CheckpointModeMismatchError(DeerFlowError, RuntimeError):
    """A full-mode process met a thread whose checkpoints need delta mode.

    Raised by the gates in :mod:`deerflow.runtime.checkpoint_mode` before any
    materialized value is used or any write is persisted. ``str(error)`` is
    exactly :data:`MISMATCH_MESSAGE`; ``thread_id`` is set when known.
    Remedy: read the thread from a delta-mode process, or convert it to full.
    """

    def __init__(self, message: str = MISMATCH_MESSAGE, *, thread_id: str | None = None):
        super().__init__(message)
        self.thread_id = thread_id

    @property
    def detail(self) -> str:
        """The HTTP 409 detail: ``Thread <thread_id>: <message>`` (spec table)."""
        if self.thread_id is None:
            return str(self)
        return f"Thread {self.thread_id}: {self}"


class CheckpointModeReconfigurationError(DeerFlowError, RuntimeError):
    """The process was asked to run with a mode or cadence other than the frozen one.

    Raised when a second freeze asks for another value, when a caller-supplied
    internal mode key differs from the frozen mode, and when config.yaml on
    disk changed under a running process (config drift). ``str(error)`` is
    :data:`RECONFIGURATION_MESSAGE` or its cadence twin. Transient by design:
    restart the process so it freezes the new value.
    """

    def __init__(
        self,
        message: str = RECONFIGURATION_MESSAGE,
        *,
        setting: str = "checkpoint_channel_mode",
        frozen: object = None,
        requested: object = None,
    ):
        super().__init__(message)
        self.setting = setting
        self.frozen = frozen
        self.requested = requested

    @property
    def detail(self) -> str:
        """The HTTP 503 detail (spec table): the message itself."""
        return str(self)


class ThreadNotFoundError(DeerFlowError, LookupError):
    """No checkpoint is stored for this thread id in the configured database."""

    def __init__(self, thread_id: str):
        super().__init__(f"Thread {thread_id!r} has no checkpoints in this database.")
        self.thread_id = thread_id


class CheckpointNotFoundError(DeerFlowError, LookupError):
    """The thread exists but has no checkpoint with this id in this namespace."""

    def __init__(self, thread_id: str, checkpoint_id: str | None, checkpoint_ns: str = ""):
        where = f" in namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        what = f"checkpoint {checkpoint_id!r}" if checkpoint_id else "checkpoints"
        super().__init__(f"Thread {thread_id!r} has no {what}{where}.")
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_ns = checkpoint_ns


class CheckpointDecodeError(DeerFlowError, ValueError):
    """A value stored for a thread (checkpoint blob, pending write, channel blob) does not decode.

    Raised by :func:`deerflow.reader.blobcheck.decode_error_for` after a read failed
    and the thread's stored values were checked one by one; it names the
    first damaged one. The row is damaged in the database: restore it from a
    backup; nothing reads or converts past it.
    """

    def __init__(self, thread_id: str, checkpoint_id: str, checkpoint_ns: str = "", *, part: str = "checkpoint",
                 reason: str = "", more: int = 0):
        where = f" in namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        also = f" ({more} more damaged value{'s' if more != 1 else ''} in this thread)" if more else ""
        super().__init__(f"Thread {thread_id!r}: checkpoint {checkpoint_id!r}{where}: the stored {part} "
                         f"cannot be decoded ({reason}){also}.")
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_ns = checkpoint_ns
        self.part = part
        self.reason = reason


class IncompleteHistoryError(DeerFlowError, LookupError):
    """A delta checkpoint's messages cannot be reconstructed: its replay chain is broken.

    Raised by :class:`deerflow.reader.ThreadReader` before materializing a delta checkpoint whose
    ancestors (back to the nearest snapshot) are not all stored: a pruned
    snapshot ancestor, a dangling ``parent_checkpoint_id`` or a parent cycle
    (:func:`deerflow.reader.lineage.find_lineage_gap`). Readers would otherwise
    return the messages after the break only, as if they were the whole
    conversation. Restore the missing rows from a backup.
    """

    def __init__(self, thread_id: str, checkpoint_id: str, checkpoint_ns: str = "", *, reason: str = ""):
        where = f" in namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        super().__init__(f"Thread {thread_id!r}: the messages of checkpoint {checkpoint_id!r}{where} cannot be "
                         f"reconstructed: {reason}.")
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_ns = checkpoint_ns
        self.reason = reason


class ReducerError(DeerFlowError, ValueError):
    """A delta checkpoint's messages cannot be read: a stored write is refused by the reducer.

    Raised by :class:`deerflow.reader.ThreadReader` when materializing a checkpoint replays a write
    the ``messages`` reducer refuses -- a ``RemoveMessage`` naming an id that
    is not in the list, or a ``None`` write -- instead of letting the
    ``ValueError`` become an HTTP 500. Names the checkpoint read, the write
    (the checkpoint it is stored under, its task, its position) and the
    missing id (:func:`deerflow.reader.replaycheck.find_reducer_failure`); the
    converter reports the same shape as its ``reducer_error`` finding.
    Checkpoints that do not replay that write read normally.
    """

    def __init__(self, thread_id: str, checkpoint_id: str, checkpoint_ns: str = "", *, reason: str = "",
                 write_checkpoint_id: str | None = None, task_id: str | None = None,
                 missing_ids: tuple[str, ...] = ()):
        where = f" in namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        super().__init__(f"Thread {thread_id!r}: the messages of checkpoint {checkpoint_id!r}{where} cannot be "
                         f"reconstructed: {reason}.")
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_ns = checkpoint_ns
        self.reason = reason
        self.write_checkpoint_id = write_checkpoint_id
        self.task_id = task_id
        self.missing_ids = missing_ids


class BranchAmbiguousError(DeerFlowError, LookupError):
    """A delta checkpoint's messages depend on writes that may belong to a sibling fork.

    Raised by :class:`deerflow.reader.ThreadReader` when the replay walk of a checkpoint passes a
    branch point (a checkpoint with several children) whose ``messages``
    writes two or more seedless children may have consumed: the shape older
    LangGraph releases left (LangGraph #8443, DeerFlow #4458). LangGraph's
    reader replays every one of those writes into every child, a mixed list;
    nothing stored says which write is whose, so no list is shown as
    complete (:func:`deerflow.reader.compare.replay_reading`; the converter
    reports the same shape as its ``branch_ambiguous`` finding).

    Attributes:
        thread_id, checkpoint_id, checkpoint_ns: the checkpoint read.
        branch_point: the checkpoint whose writes are ambiguous.
    """

    def __init__(self, thread_id: str, checkpoint_id: str, checkpoint_ns: str = "", *, branch_point: str,
                 reason: str = ""):
        where = f" in namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        super().__init__(f"Thread {thread_id!r}: the messages of checkpoint {checkpoint_id!r}{where} cannot be "
                         f"told apart from a sibling fork's: branch point {branch_point!r} "
                         f"{reason or 'stores the writes of several children under its own id'}.")
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_ns = checkpoint_ns
        self.branch_point = branch_point


class NoSqlTablesError(DeerFlowError, TypeError):
    """The saver keeps no SQL tables (``InMemorySaver``): there is nothing to query, inventory or convert.

    Raised by :func:`deerflow.storage.sqlread.reader_for`. Check
    :func:`deerflow.storage.sqlread.has_sql_tables` first where a memory saver is a
    normal case; configure ``backend: sqlite`` or ``postgres`` otherwise. A
    ``TypeError`` too, for callers written before this class existed.
    """

    def __init__(self, saver_type: str):
        super().__init__(f"{saver_type} has no SQL tables to inventory")
        self.saver_type = saver_type


class StorageError(DeerFlowError):
    """A database driver error (``sqlite3``, ``psycopg``) met by SQL this package ran.

    Raised by :mod:`deerflow.storage.sqlread` (readers and transactions) and
    :mod:`deerflow.storage.sessions` (conversion sessions) ``from`` the driver's
    error, which :attr:`driver_error` (``__cause__``) holds; ``str(error)`` is
    the driver's message. Use a subclass to decide what to do.
    """

    def __init__(self, driver_error: BaseException):
        super().__init__(str(driver_error))
        self.driver_error = driver_error


class StorageUnavailableError(StorageError):
    """The database cannot be used now: unreachable server, a pool timeout, SQLite locked or busy, disk I/O.

    An outage, not a bug: retry once the service is back (the dashboard answers 503).
    """


class StoragePermissionError(StorageError):
    """This database role or file may not do what was asked (a missing privilege, a read-only file or replica)."""


class StorageQueryError(StorageError):
    """Any other driver error: a bad statement, a missing table or column, a violated constraint.

    A bug or a database that is not LangGraph's: it is not retried, and not shown as an outage
    (except a missing table, which the dashboard reports as a wrong database).
    """
