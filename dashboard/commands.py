"""Management commands report setup errors the way the web pages do: detail and hint, no traceback.

Every dashboard management command subclasses :class:`DashboardCommand`.
An error the web pages describe (the registry's
:data:`~dashboard.errors.HANDLED` domain errors, ``ConfigError`` included, and
the :data:`~dashboard.errors.outages.OUTAGES`: an unreachable or unmigrated
database, missing checkpoint tables, the broker) becomes a ``CommandError``
whose message is the same detail and hint :func:`dashboard.errors.describe`
gives the web::

    CommandError: <detail>
    What to do: <hint>

Django prints that line instead of a traceback and exits 1 (``--traceback``
still shows the chain). Programming errors are not caught.

A command that reads the checkpoint database sets
``uses_checkpoint_database = True``: before ``handle`` it checks the
database config.yaml names (:func:`check_checkpoint_database`), so a wrong
``sqlite_dir``, a Postgres server that is down or a database that does not
exist is reported at once with libpq's own reason (instead of a pool
timeout after 10 s), and the ``memory`` backend is refused with one sentence.
``seed_threads`` writes into databases that may have no tables yet: its
:meth:`~DashboardCommand.preflight` checks the target its own way
(:func:`deerflow.seed.check_target`).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.errors import HANDLED, OUTAGES, describe
from dashboard.errors.outages import is_outage
from dashboard.runtime import DashboardRuntime, get_runtime
from deerflow.errors import ConfigError
from deerflow.storage import Dialect, sqlite_checkpoint_path

__all__ = ["DashboardCommand", "MEMORY_BACKEND_MESSAGE", "check_checkpoint_database", "command_error",
           "require_delta_mode"]

#: Why a command that reads the checkpoint tables cannot run on the ``memory`` backend.
MEMORY_BACKEND_MESSAGE = (
    "This command needs the SQLite or Postgres backend; {path} sets database.backend: memory "
    "(an in-memory saver has no tables to read, and nothing it holds outlives its process).\n"
    "What to do: set DEER_FLOW_CONFIG_PATH to the config.yaml of the DeerFlow deployment whose checkpoint "
    "database you want this command to use (database.backend: sqlite or postgres)."
)

#: The errors :class:`DashboardCommand` turns into a ``CommandError``.
DESCRIBED: tuple[type[BaseException], ...] = (*HANDLED, *OUTAGES)


def command_error(exc: BaseException, *, returncode: int = 1) -> CommandError:
    """The ``CommandError`` for an error the web pages describe: ``"<detail>\\nWhat to do: <hint>"``.

    Args:
        exc: an instance of one of :data:`DESCRIBED` (a handled domain error or an outage).
        returncode: the exit status Django uses for it (1 unless a command documents another).

    Returns:
        The ``CommandError`` to raise (``raise command_error(exc) from exc``).

    Raises:
        TypeError: ``exc`` is not an error :func:`dashboard.errors.describe` knows.
    """
    view = describe(exc)
    return CommandError(f"{view.detail}\nWhat to do: {view.hint}", returncode=returncode)


def check_checkpoint_database(rt: DashboardRuntime) -> None:
    """Fail fast when the checkpoint database ``rt`` names cannot be used by a command.

    SQLite: the file ``{sqlite_dir}/deerflow.db`` must exist (it is not created).
    Postgres: one direct connection (3 s at most) must succeed and find the
    LangGraph ``checkpoints`` table. Memory: refused.

    Args:
        rt: the process runtime (its ``config.database`` block is checked).

    Raises:
        CommandError: the backend is ``memory`` (:data:`MEMORY_BACKEND_MESSAGE`).
        ConfigError: the SQLite file does not exist.
        psycopg.OperationalError: the Postgres server or database cannot be reached.
        psycopg.errors.UndefinedTable: the Postgres database has no checkpoint tables.
    """
    database = rt.config.database
    if database.backend == "memory":
        raise CommandError(MEMORY_BACKEND_MESSAGE.format(path=rt.config.path))
    if database.backend == "sqlite":
        path = sqlite_checkpoint_path(database)
        if not path.is_file():
            raise ConfigError(
                f"SQLite checkpoint file {path} does not exist (database.sqlite_dir={database.sqlite_dir!r} "
                f"in {rt.config.path}). Point sqlite_dir at the directory holding DeerFlow's deerflow.db.",
                key="database.sqlite_dir",
            )
        return
    with Dialect.POSTGRES.connect(database, connect_timeout=3) as conn:
        conn.execute("SELECT 1 FROM checkpoints LIMIT 0")


def require_delta_mode(doing: str, *, nothing_done: str = "Nothing was done.") -> None:
    """Refuse a command that reads threads' delta history in a process frozen in full mode.

    Args:
        doing: what the command does, as a gerund (``"converting"``, ``"pruning"``).
        nothing_done: the sentence saying what was (not) done.

    Raises:
        CommandError: (returncode 2) this process froze ``checkpoint_channel_mode=full``.
    """
    rt = get_runtime()
    if rt.mode != "delta":
        raise CommandError(
            f"This process froze checkpoint_channel_mode={rt.mode} from {rt.config.path}, and {doing} "
            f"reads each thread's delta history, which only a delta-mode process may read. {nothing_done}\n"
            "What to do: launch the job from the dashboard (its job workers freeze delta whatever config.yaml's "
            "mode), or run this command with DEER_FLOW_CONFIG_PATH pointing at a delta-mode config.yaml "
            "(database.checkpoint_channel_mode: delta) for the same checkpoint database: this one-off process is "
            "maintenance, not a DeerFlow process of the fleet.",
            returncode=2,
        )


class DashboardCommand(BaseCommand):
    """A ``BaseCommand`` whose described errors end as ``CommandError`` (detail and hint, exit 1).

    Attributes:
        uses_checkpoint_database: run :meth:`preflight` (the checkpoint
            database check) before ``handle``.
    """

    uses_checkpoint_database = False

    def preflight(self) -> None:
        """Checks before ``handle`` (for :attr:`uses_checkpoint_database`: :func:`check_checkpoint_database`).

        Subclasses may add their own checks (raise ``CommandError`` or a described error).

        Raises:
            CommandError, ConfigError or an outage error: see :func:`check_checkpoint_database`.
        """
        if self.uses_checkpoint_database:
            check_checkpoint_database(get_runtime())

    def execute(self, *args: Any, **options: Any) -> Any:
        """``BaseCommand.execute`` after :meth:`preflight`, with described errors as ``CommandError``.

        Raises:
            CommandError: for any error in :data:`DESCRIBED` (message from
                :func:`command_error`), and as the command raises it.
        """
        try:
            self.preflight()
            return super().execute(*args, **options)
        except DESCRIBED as exc:
            if isinstance(exc, OUTAGES) and not is_outage(exc):
                raise
            raise command_error(exc) from exc
