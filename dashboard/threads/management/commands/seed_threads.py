"""``python manage.py seed_threads --threads N --turns-min A --turns-max B --mode full|delta|mixed
--snapshot-frequency K [--seed S]``.

Writes realistic synthetic threads into the checkpoint database config.yaml
names (see :mod:`deerflow.seed`) and keeps the thread summary current: when
it is built, each batch recomputes the rows of exactly the threads it wrote
(seeded checkpoint ids are older than the summary's watermark, which a
watermark refresh never looks below); otherwise the summary is built whole
afterwards. The tables loaded are then analyzed (planner statistics).

Refuses, before anything runs, arguments past the bounds below; then, like
every :class:`~dashboard.commands.DashboardCommand`, reports a bad
config.yaml or an unreachable database in a few seconds as ``CommandError:
<detail>`` and ``What to do: <hint>`` (exit 1), with a check of its own
(:func:`deerflow.seed.check_target`, not the readers' check: the tables may
not exist yet): a missing Postgres database or schema, or a ``sqlite_dir``
in a directory that does not exist, is refused, never created. A thread id
that already exists (the same ``--seed`` twice) is refused before anything
is written. Ctrl-C ends with what was committed (whole batches) and exit 130.
"""

from __future__ import annotations

import json
import re
import signal
from typing import Any

import psycopg
from django.conf import settings
from django.core.management.base import CommandError
from django.template.defaultfilters import filesizeformat

from dashboard.commands import MEMORY_BACKEND_MESSAGE, DashboardCommand
from dashboard.errors import describe
from dashboard.errors.outages import postgres_where
from dashboard.formatting import plural
from dashboard.runtime import startup
from deerflow.config import DatabaseConfig, LoadedConfig, load_config
from deerflow.inventory import summary
from deerflow.seed import (
    MAX_THREADS,
    MODES,
    SUMMARY_TABLES,
    SeedInterrupted,
    SeedPlan,
    SeedReport,
    SeedTargetError,
    ThreadExistsError,
    analyze,
    check_target,
    describe_database,
    seed_threads,
)
from deerflow.storage import open_checkpointer

#: Most turns per thread. Every thread copies a recorded template run of ``--turns-max`` turns, and
#: a run's stored bytes grow with the square of its turns (each snapshot rewrites the history):
#: measured, a 200-turn template takes ~10 s and ~350 MB in full mode, ~4 s and ~35 MB in delta
#: mode; 500 delta turns ~30 s and ~210 MB -- per template, all held in memory.
MAX_TURNS = 200
#: Most distinct templates (each is one recorded run; see :data:`MAX_TURNS`).
MAX_TEMPLATES = 100
#: Most updates per delta snapshot.
MAX_SNAPSHOT_FREQUENCY = 10_000
#: ``(option, lowest, highest)``, checked before anything runs.
BOUNDS = (("threads", 1, MAX_THREADS), ("turns_min", 1, MAX_TURNS), ("turns_max", 1, MAX_TURNS),
          ("snapshot_frequency", 1, MAX_SNAPSHOT_FREQUENCY), ("templates", 1, MAX_TEMPLATES))
#: Exit status after Ctrl-C (128 + SIGINT, the shell's convention).
INTERRUPTED = 130


def check_arguments(opts: dict[str, Any]) -> None:
    """Refuse options past :data:`BOUNDS`, or ``--turns-min`` above ``--turns-max``, naming the flags.

    Raises:
        CommandError: the first bad option, its bounds and the value given.
    """
    for name, low, high in BOUNDS:
        if not low <= opts[name] <= high:
            raise CommandError(f"--{name.replace('_', '-')} must be between {low} and {high:,}; got {opts[name]:,}")
    if opts["turns_min"] > opts["turns_max"]:
        raise CommandError(f"--turns-min must not be greater than --turns-max; got --turns-min {opts['turns_min']} "
                           f"and --turns-max {opts['turns_max']}")


class Command(DashboardCommand):
    help = ("Write N realistic synthetic threads into the configured checkpoint database (bulk, LangGraph's own "
            "rows) and summarize them. Never adds checkpoints to an existing thread: a --seed whose thread ids "
            "exist is refused before anything is written.")

    def add_arguments(self, parser):
        parser.add_argument("--threads", type=int, required=True, help=f"threads to create (1..{MAX_THREADS:,})")
        parser.add_argument("--turns-min", type=int, default=1, help=f"fewest turns per thread (1..{MAX_TURNS})")
        parser.add_argument("--turns-max", type=int, default=12,
                            help=f"most turns per thread (1..{MAX_TURNS}: templates of this length are recorded "
                                 "first, and their size grows with the square of the turns)")
        parser.add_argument("--mode", choices=MODES, default="mixed", help="checkpoint channel mode of the threads")
        parser.add_argument("--snapshot-frequency", type=int, default=10,
                            help=f"delta cadence (updates per snapshot, 1..{MAX_SNAPSHOT_FREQUENCY:,})")
        parser.add_argument("--seed", default=None,
                            help="reproducible content, ids and times; the same seed gives the same thread ids, "
                                 "so reusing one on the same database is refused")
        parser.add_argument("--templates", type=int, default=24,
                            help=f"distinct recorded thread shapes (1..{MAX_TEMPLATES})")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def execute(self, *args: Any, **options: Any) -> Any:
        """Arguments first (:func:`check_arguments`), then ``DashboardCommand.execute``; Ctrl-C is one message.

        Raises:
            CommandError: bad arguments or a described error (exit 1); interrupted (exit :data:`INTERRUPTED`).
        """
        check_arguments(options)
        self.seeded: SeedReport | None = None
        # Ctrl-C is part of this command's contract (whole batches kept, one message): a process started in
        # the background by a non-interactive shell inherits SIGINT as ignored, so install Python's handler.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return super().execute(*args, **options)
        except SeedInterrupted as exc:
            raise CommandError(interrupted_message(exc.report, exc.where), returncode=INTERRUPTED) from exc
        except KeyboardInterrupt as exc:
            if self.seeded is None:
                message = "Interrupted before seeding started; nothing was written.\nWhat to do: run the command again."
            else:  # while the summary was built or the report printed
                message = (f"Interrupted after all {self.seeded.threads:,} threads were committed to "
                           f"{describe_database(self.config.database)}; the thread summary may not be built yet.\n"
                           "What to do: run `python manage.py refresh_inventory` (the thread list also builds the "
                           "summary on its first request).")
            raise CommandError(message, returncode=INTERRUPTED) from exc

    def preflight(self) -> None:
        """Load config.yaml and check the target database (:func:`deerflow.seed.check_target`).

        Raises:
            ConfigError: config.yaml is missing or invalid (described by ``DashboardCommand``).
            CommandError: the ``memory`` backend, a missing Postgres database, schema or parent of
                ``sqlite_dir``.
            psycopg.OperationalError: the server is unreachable (described by ``DashboardCommand``).
        """
        # Like the web and worker processes: outage messages (dashboard.errors.outages) name this config.yaml.
        startup(settings.DEER_FLOW_CONFIG_PATH)
        self.config = load_config(settings.DEER_FLOW_CONFIG_PATH)
        database = self.config.database
        if database.backend == "memory":
            raise CommandError(MEMORY_BACKEND_MESSAGE.format(path=self.config.path))
        try:
            check_target(database)
        except SeedTargetError as exc:
            raise CommandError(f"{self.config.path}: {exc.problem}.\n"
                               f"What to do: {exc.remedy}") from exc
        except psycopg.OperationalError as exc:
            if (missing := _missing_database(exc)) is None:
                raise
            raise CommandError(_missing_database_message(exc, missing, self.config)) from exc

    def handle(self, *args, **opts):
        database = self.config.database
        plan = SeedPlan(threads=opts["threads"], turns_min=opts["turns_min"], turns_max=opts["turns_max"],
                        mode=opts["mode"], snapshot_frequency=opts["snapshot_frequency"], seed=opts["seed"],
                        templates=opts["templates"])
        if not opts["json"]:
            self.stdout.write(f"Seeding {plan.threads:,} threads into {describe_database(database)}: recording "
                              f"up to {plural(min(plan.templates, plan.threads), 'template run')} of {plan.turns_max} "
                              "turns first.")
        try:
            report = seed_threads(database, plan, progress=None if opts["json"] else self._progress)
        except ThreadExistsError as exc:
            raise CommandError(f"thread {exc.thread_id} already exists in {exc.where}: use another --seed "
                               "(this command never adds checkpoints to existing threads)") from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.seeded = report
        result = self._summarize(report, database)
        if opts["json"]:
            self.stdout.write(json.dumps({"seed": report.as_dict(), "summary": result}, indent=2))
            return
        self.stdout.write(
            f"Wrote {report.threads} threads ({report.checkpoints} checkpoints, {report.writes} writes, "
            f"{report.blobs} blobs, {filesizeformat(report.bytes)}) in {report.seconds:.1f} s; "
            f"threads per template kind (copies cut before a migrated template's delta turns list as full): "
            f"{report.by_kind}; tables analyzed in {report.analyze_seconds:.2f} s."
        )
        how = "with their rows" if result["kind"] == "seeded" else f"{result['kind']} refresh"
        self.stdout.write(f"Summary refreshed: {result['threads']} threads ({how}) in {result['seconds']:.2f} s.")

    def _summarize(self, report: SeedReport, database: DatabaseConfig) -> dict[str, Any]:
        """The summary's part of the report; builds the summary (and analyzes it) when it was not built."""
        if report.summarized:
            # The summary was built: every batch recomputed its own threads' rows as it committed.
            return {"kind": "seeded", "threads": report.summarized, "seconds": report.summary_seconds}
        with open_checkpointer(database) as saver:
            result = summary.refresh(saver).as_dict()  # never built: this builds every row
        analyze(database, SUMMARY_TABLES)
        return result

    def _progress(self, report) -> None:
        if not report.threads:
            self.stdout.write(f"  templates recorded in {report.record_seconds:.1f} s")
            return
        self.stdout.write(f"  {report.threads} threads, {report.checkpoints} checkpoints, {report.seconds:.1f} s")


def interrupted_message(report: SeedReport, where: str) -> str:
    """The ``CommandError`` text after Ctrl-C: what was committed, and that a re-run needs another ``--seed``."""
    if not report.batches:
        return (f"Interrupted before any thread was committed to {where}; nothing was written.\n"
                "What to do: run the command again (the same --seed is fine: none of its threads exist).")
    rows = " with their thread summary rows" if report.summarized else ""
    batches = f"{report.batches:,} whole batch{'es' if report.batches > 1 else ''}"
    return (f"Interrupted: {report.threads:,} threads ({report.checkpoints:,} checkpoints) in {batches} were "
            f"committed to {where}{rows}; nothing else was written.\n"
            "What to do: the committed threads stay. To write more, run the command again with a different --seed "
            "(this seed's thread ids now exist, so it is refused).")


def _missing_database(exc: psycopg.OperationalError) -> str | None:
    """The database name when the server answered that the URL's database does not exist."""
    found = re.search(r'database "([^"]+)" does not exist', str(exc))
    return found.group(1) if found else None


def _missing_database_message(exc: psycopg.OperationalError, name: str, config: LoadedConfig) -> str:
    where = postgres_where(config.database.postgres_url or "")
    return (f"{describe(exc).detail}\nWhat to do: PostgreSQL at {where} answers, but database \"{name}\" does not "
            f"exist: the seeder creates LangGraph's tables, not the database. Create it (CREATE DATABASE "
            f"\"{name}\"; or createdb {name}) or point database.postgres_url in {config.path} at an existing "
            "database.")
