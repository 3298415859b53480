"""The process's frozen channel-mode runtime: config, freeze, saver, accessor, drift check.

Every dashboard web process and Celery worker calls :func:`startup` once
(Django's ``AppConfig.ready`` / Celery's ``worker_init``): it reads
config.yaml, freezes mode and cadence (spec, "Cross-process invariant": the
freeze is per OS process), and keeps the file's stat and hash. Before each
state access :meth:`DashboardRuntime.check_drift` stats the file (re-parsing
only when it changed) and raises ``CheckpointModeReconfigurationError`` if
the file on disk now asks for another mode or cadence.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.config import LoadedConfig, load_config
from deerflow.errors import (
    RECONFIGURATION_MESSAGE,
    SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE,
    CheckpointModeReconfigurationError,
    ConfigError,
)
from deerflow.runtime.checkpoint_mode import (
    freeze_checkpoint_channel_mode,
    freeze_checkpoint_snapshot_frequency,
)
from deerflow.storage import open_checkpointer

if TYPE_CHECKING:  # imported by the accessor property: LangGraph loads when a thread is first read
    from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

__all__ = ["DashboardRuntime", "get_runtime", "install_runtime", "startup"]


@dataclass
class DashboardRuntime:
    """One process's frozen view of config.yaml and its open checkpoint saver.

    Attributes:
        config: what was read at start-up (path, SHA-256, stat, database block).
        mode: the frozen ``checkpoint_channel_mode``.
        snapshot_frequency: the frozen cadence (updates per snapshot).
        pool_timeout_s: seconds a Postgres read waits for a connection; an
            unreachable server answers 503 after this (under gunicorn's 30 s worker timeout).
        maintenance: a maintenance process (the dashboard's Celery workers): it froze ``delta``
            (which reads every thread) at the file's cadence whatever mode the file names, so only a
            cadence change on disk is a drift for it (:meth:`check_drift`).
    """

    config: LoadedConfig
    mode: str
    snapshot_frequency: int
    pool_timeout_s: float = 10.0
    maintenance: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stack: contextlib.ExitStack | None = field(default=None, repr=False)
    _saver: Any = field(default=None, repr=False)
    _accessor: CheckpointStateAccessor | None = field(default=None, repr=False)
    _seen_stat: tuple[int, ...] | None = field(default=None, repr=False)
    _disk: LoadedConfig | None = field(default=None, repr=False)
    _disk_error: str | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, config: LoadedConfig, *, freeze: bool = True, maintenance: bool = False) -> DashboardRuntime:
        """Build a runtime and (by default) freeze this process on ``config``.

        Args:
            config: the loaded config.yaml.
            freeze: freeze this OS process's mode and cadence (``False``: tests and one-off readers).
            maintenance: freeze ``delta`` at ``config``'s cadence whatever mode ``config`` names: the
                dashboard's job workers read every thread (a full-mode reader refuses delta threads)
                and write at the fleet's cadence (``checkpoint_delta.snapshot_frequency``).

        Raises:
            CheckpointModeReconfigurationError: the process already froze other values.
        """
        mode = "delta" if maintenance else config.mode
        frequency = config.snapshot_frequency
        if freeze:
            mode = freeze_checkpoint_channel_mode(mode)
            frequency = freeze_checkpoint_snapshot_frequency(frequency)
        try:
            stat = Path(config.path).stat()
            seen: tuple[int, ...] | None = (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns)
        except OSError:
            seen = None
        return cls(config=config, mode=mode, snapshot_frequency=frequency, maintenance=maintenance,
                   _seen_stat=seen, _disk=config)

    # -- saver and accessor -----------------------------------------------
    @property
    def saver(self) -> Any:
        """The process-wide LangGraph saver, opened on first use."""
        if self._saver is None:
            with self._lock:
                if self._saver is None:
                    stack = contextlib.ExitStack()
                    self._saver = stack.enter_context(
                        open_checkpointer(self.config.database, timeout=self.pool_timeout_s))
                    self._stack = stack
        return self._saver

    @property
    def accessor(self) -> CheckpointStateAccessor:
        """The accessor bound to :attr:`saver` at the frozen mode and cadence."""
        if self._accessor is None:
            from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

            self._accessor = CheckpointStateAccessor.for_saver(
                self.saver, mode=self.mode, snapshot_frequency=self.snapshot_frequency
            )
        return self._accessor

    def close(self) -> None:
        """Close the saver (connections, pool)."""
        with self._lock:
            if self._stack is not None:
                self._stack.close()
            self._stack = None
            self._saver = None
            self._accessor = None

    # -- drift -------------------------------------------------------------
    def disk_config(self) -> tuple[LoadedConfig | None, str | None]:
        """The config file as it is on disk now: ``(config, None)`` or ``(None, error text)``.

        Cost: one ``stat``; the file is re-parsed only when its mtime, size, inode or ctime changed.
        """
        path = Path(self.config.path)
        try:
            stat = path.stat()
            # inode and ctime too: an atomic replace or a same-size edit within one mtime tick still shows.
            key = (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns)
        except OSError as exc:
            return None, f"{path}: {exc.strerror or exc}"
        if key != self._seen_stat:
            try:
                self._disk, self._disk_error = load_config(path), None
            except ConfigError as exc:
                self._disk, self._disk_error = None, str(exc)
            self._seen_stat = key
        return self._disk, self._disk_error

    def check_drift(self) -> None:
        """Raise if config.yaml on disk now asks for another mode or cadence than frozen.

        A file that became unreadable or invalid is not a drift (the process
        keeps serving with its frozen values); the audit reports it. A
        :attr:`maintenance` process compares only the cadence: it froze delta
        whatever mode the file names.

        Raises:
            CheckpointModeReconfigurationError: with ``frozen`` and ``requested`` set.
        """
        disk, _error = self.disk_config()
        if disk is None:
            return
        if disk.mode != self.mode and not self.maintenance:
            raise CheckpointModeReconfigurationError(
                RECONFIGURATION_MESSAGE, setting="checkpoint_channel_mode",
                frozen=self.mode, requested=disk.mode,
            )
        if (disk.mode == "delta" or self.maintenance) and disk.snapshot_frequency != self.snapshot_frequency:
            raise CheckpointModeReconfigurationError(
                SNAPSHOT_FREQUENCY_RECONFIGURATION_MESSAGE, setting="checkpoint_delta.snapshot_frequency",
                frozen=self.snapshot_frequency, requested=disk.snapshot_frequency,
            )


_runtime: DashboardRuntime | None = None
_runtime_lock = threading.Lock()


#: Why a web process or a worker does not start on the ``memory`` backend (``{path}``: the config file).
MEMORY_BACKEND_STARTUP = (
    "{path}: database.backend: memory cannot be browsed or converted: an in-memory saver starts empty in "
    "every process and has no tables to read. Set database.backend to sqlite or postgres (the DeerFlow "
    "deployment's own checkpoint database) in that config.yaml, or point DEER_FLOW_CONFIG_PATH at the "
    "deployment's config.yaml, and start the process again."
)


def startup(path: str | None = None, *, maintenance: bool = False) -> DashboardRuntime:
    """Load config.yaml (``path`` or ``DEER_FLOW_CONFIG_PATH``), freeze, and install the runtime.

    Idempotent within a process. ``maintenance`` freezes delta at the file's cadence
    (:meth:`DashboardRuntime.from_config`). Raises ``ConfigError`` for a bad file and
    ``CheckpointModeReconfigurationError`` if the process froze other values.
    """
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = DashboardRuntime.from_config(load_config(path), maintenance=maintenance)
        return _runtime


def serving_startup(path: str | None = None, *, maintenance: bool = False) -> DashboardRuntime:
    """:func:`startup` for a process that serves pages or runs jobs: the web process and every worker.

    They refuse the ``memory`` backend, as the management commands that read checkpoint
    tables do (:data:`dashboard.commands.MEMORY_BACKEND_MESSAGE`): an in-memory saver has
    nothing to browse or convert. Nothing is registered or served before this returns.
    Workers pass ``maintenance=True``: they freeze delta at the file's cadence.

    Raises:
        ConfigError: what :func:`startup` raises, or ``database.backend: memory``
            (:data:`MEMORY_BACKEND_STARTUP`, key ``database.backend``).
    """
    rt = startup(path, maintenance=maintenance)
    if rt.config.database.backend == "memory":
        raise ConfigError(MEMORY_BACKEND_STARTUP.format(path=rt.config.path), path=str(rt.config.path),
                          key="database.backend")
    return rt


def install_runtime(runtime: DashboardRuntime | None) -> DashboardRuntime | None:
    """Replace the process runtime (tests, and workers built from an explicit config); returns the old one."""
    global _runtime
    with _runtime_lock:
        old, _runtime = _runtime, runtime
        return old


def get_runtime() -> DashboardRuntime:
    """The installed runtime, starting it from the environment on first use."""
    return _runtime if _runtime is not None else startup()


def _runtime_if_started() -> DashboardRuntime | None:
    """The installed runtime or ``None``; never starts one (for templates)."""
    return _runtime
