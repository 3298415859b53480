"""``python manage.py prune_threads (--thread ID ... | --all | --idle-days D | --orphaned)
(--keep-last N | --safe-only | --delete-threads) [--protect CHECKPOINT_ID ...]
[--max-delete-per-run N] [--dry-run] [--yes] [--no-backup] [--reclaim] [--json]``

Retention (``deerflow.retention``, docs/retention.md), synchronously in this
process, one verified transaction per thread. First a preview per thread
(kept / deleted / protected with the reason / rebased checkpoints, what
becomes un-branchable, bytes before and after), then, unless ``--dry-run``,
a confirmation (skipped with ``--yes``) and the prune. Backups are kept by
default, so the deleted rows still take space until the backup is purged
(``manage.py conversion_backups --purge ID``); ``--no-backup`` skips them.
``--reclaim`` runs the database's reclaim afterwards (SQLite ``VACUUM``,
Postgres ``VACUUM (ANALYZE)``). ``--max-delete-per-run N`` prunes (or deletes) at
most N threads, in selection order; the rest are reported ``skipped`` and left
for the next run, and the output says where it stopped.

Beside a live DeerFlow (its ``runs`` table in the checkpoint database), each
thread is pruned inside DeerFlow's ``checkpoint_write`` reservation
(:mod:`dashboard.jobs.reservations`); a thread DeerFlow is running is reported
``run_in_flight``, untouched, and counts as failed. After each committed prune,
the thread's entries in DeerFlow's Redis history cache are purged.

``--orphaned`` selects the checkpoint threads without a row in DeerFlow's ``threads_meta`` whose newest
checkpoint is older than ``DASHBOARD_ORPHAN_MIN_IDLE_S`` (default one day), read from LangGraph's own
``checkpoints`` (:func:`deerflow.inventory.deerflow_tables.orphaned_thread_ids`); usually with
``--delete-threads``. A database without ``threads_meta`` is refused (exit 1): nothing there tells an orphan.
The selection is read again after the confirmation and a thread that gained a row meanwhile is left alone.

Pruning reads delta history, which only a delta-mode process may do (it
reads both modes): run from a full-mode config.yaml, the command stops and
says so.

``--json`` prints exactly ``{"threads": [{"thread_id", "status",
"deleted_checkpoint_ids", "kept_checkpoint_ids", "protected_checkpoint_ids",
"rebased_checkpoint_ids", "bytes_before", "bytes_after"}], "reclaimed":
{"file_bytes_before", "file_bytes_after"} | null}``, plus ``"max_delete_per_run":
{"max_delete_per_run", "stopped_at", "skipped"}`` (counts) when the cap is given.

Exit status: 0 on success (also for an empty selection), 1 when a thread
failed (or config.yaml or the database cannot be used), 2 when nothing was
confirmed (no ``--yes`` and no terminal to ask, or the answer was no) or the
process is in full mode.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.template.defaultfilters import filesizeformat

from dashboard.commands import DashboardCommand, require_delta_mode
from dashboard.formatting import plural
from dashboard.jobs import reservations
from dashboard.runtime import get_runtime
from deerflow.convert import reclaim_space
from deerflow.inventory import deerflow_tables
from deerflow.retention import PruneReport, delete_thread, prune_threads, select_threads
from deerflow.storage import Reservation, RunInFlightError

#: Threads a prune holds DeerFlow's reservation on at once (one chunk of the run, pruned together).
RESERVED_AT_ONCE = 50

JSON_KEYS = ("thread_id", "status", "deleted_checkpoint_ids", "kept_checkpoint_ids", "protected_checkpoint_ids",
             "rebased_checkpoint_ids", "bytes_before", "bytes_after")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--keep-last needs a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--keep-last must be at least 1 (the head is always kept), got {value}")
    return value


def _cap(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--max-delete-per-run needs a whole number of threads, got {text!r}") \
            from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--max-delete-per-run must be 0 or more threads, got {value}")
    return value


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--idle-days needs a number of days, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"--idle-days must be 0 or more, got {text}")
    return value


def _orphans(database: Any) -> list[str]:
    """The orphans idle ``DASHBOARD_ORPHAN_MIN_IDLE_S`` seconds, from ``checkpoints`` now.

    Raises:
        CommandError: the checkpoint database has no ``threads_meta`` table (exit 1).
    """
    from deerflow.storage import open_session

    with open_session(database, write=False) as session:
        tables = deerflow_tables.presence(session)
        if not tables.has_threads_meta:
            raise CommandError("--orphaned needs DeerFlow's threads_meta table in the checkpoint database, and "
                               "there is none: without it no thread can be called an orphan. Select threads with "
                               "--thread, --all or --idle-days instead.", returncode=1)
        floor = deerflow_tables.orphan_floor(settings.DASHBOARD_ORPHAN_MIN_IDLE_S)
        return deerflow_tables.orphaned_thread_ids(session, floor, tables=tables)


class Command(DashboardCommand):
    help = ("Prune checkpoint history (keep the last N, only the provably safe shapes, or whole threads): "
            "previewed, backed up, verified.")
    uses_checkpoint_database = True

    def add_arguments(self, parser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--thread", action="append", metavar="ID", help="a thread id (repeatable)")
        which.add_argument("--all", action="store_true", help="every thread")
        which.add_argument("--idle-days", type=_days, metavar="D",
                           help="threads whose newest checkpoint is older than D days")
        which.add_argument("--orphaned", action="store_true",
                           help="threads without a row in DeerFlow's threads_meta, idle DASHBOARD_ORPHAN_MIN_IDLE_S")
        rule = parser.add_mutually_exclusive_group(required=True)
        rule.add_argument("--keep-last", type=_positive_int, metavar="N",
                          help="keep each head and its N-1 nearest ancestors (plus protected checkpoints)")
        rule.add_argument("--safe-only", action="store_true",
                          help="delete only trailing duration-only leaves and leaf sibling branches")
        rule.add_argument("--delete-threads", action="store_true", help="delete the selected threads whole")
        parser.add_argument("--protect", action="append", default=[], metavar="CHECKPOINT_ID",
                            help="a checkpoint to keep (a resume target; repeatable)")
        parser.add_argument("--max-delete-per-run", type=_cap, metavar="N",
                            help="prune or delete at most N threads this run (the rest are left for the next run)")
        parser.add_argument("--dry-run", action="store_true", help="preview only; write nothing")
        parser.add_argument("--yes", action="store_true", help="no confirmation prompt")
        parser.add_argument("--no-backup", action="store_true", help="no backup (the prune cannot be reverted)")
        parser.add_argument("--reclaim", action="store_true",
                            help="VACUUM (SQLite) / VACUUM (ANALYZE) (Postgres) after")
        parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")

    def preflight(self) -> None:
        """Refuse (exit 2) in a full-mode process, then check the checkpoint database.

        Raises:
            CommandError: this process froze ``checkpoint_channel_mode=full`` (returncode 2), or as
                :meth:`DashboardCommand.preflight`.
        """
        require_delta_mode("pruning")
        super().preflight()

    def handle(self, *args: Any, **opts: Any) -> None:
        database = get_runtime().config.database
        if opts["orphaned"]:
            threads = _orphans(database)
        else:
            threads = opts["thread"] or select_threads(database, idle_days=opts["idle_days"])
        threads = list(dict.fromkeys(threads))
        cap = opts["max_delete_per_run"]
        if opts["yes"] and not opts["dry_run"] and cap is None and not opts["orphaned"]:
            # confirmed in advance, nothing to count or check again: the prune itself plans each thread
            results = self._run(database, threads, opts, dry_run=False)
        else:
            preview = self._run(database, threads, opts, dry_run=True)
            todo = [r for r in preview if r.status in ("would_prune", "would_delete")]
            if cap is not None and len(todo) > cap:
                for r in todo[cap:]:
                    r.status, r.hint = "skipped", f"--max-delete-per-run {cap} reached; left for the next run"
                todo = todo[:cap]
            results = preview
            if not opts["dry_run"] and todo:
                if not self._confirmed(todo, opts):
                    self._emit(preview, None, opts, final=False)
                    raise CommandError("Not confirmed; nothing was pruned.", returncode=2)
                if opts["orphaned"]:  # a thread that gained a DeerFlow row while we asked is no orphan any more
                    still = set(_orphans(database))
                    todo = [r for r in todo if r.thread_id in still]
                done = {r.thread_id: r for r in self._run(database, [r.thread_id for r in todo], opts,
                                                          dry_run=False)}
                results = [done.get(r.thread_id, r) for r in preview]
        reclaimed = None
        if opts["reclaim"] and not opts["dry_run"]:
            space = reclaim_space(database)
            reclaimed = {"file_bytes_before": space.bytes_before, "file_bytes_after": space.bytes_after}
        self._emit(results, reclaimed, opts, final=not opts["dry_run"])
        failed = [r for r in results if r.failed or r.status == reservations.RUN_IN_FLIGHT]
        if failed:
            raise CommandError(f"{plural(failed, 'thread')} failed; nothing was written to them (see above).",
                               returncode=1)

    def _run(self, database: Any, threads: list[str], opts: dict[str, Any], *, dry_run: bool) -> list[PruneReport]:
        """Each thread's report, in order; a prune holds DeerFlow's reservation on every thread of a chunk of
        :data:`RESERVED_AT_ONCE` while that chunk is pruned (a dry run reads and takes none)."""
        if dry_run:
            return self._rewrite(database, threads, opts, dry_run=True)
        reports: dict[str, PruneReport] = {}
        for i in range(0, len(threads), RESERVED_AT_ONCE):
            reports.update(self._reserved(database, threads[i:i + RESERVED_AT_ONCE], opts))
        return [reports[t] for t in threads]

    def _reserved(self, database: Any, chunk: list[str], opts: dict[str, Any]) -> dict[str, PruneReport]:
        """Prune ``chunk`` inside DeerFlow's reservation of each of its threads; a thread DeerFlow holds is
        reported ``run_in_flight``, untouched. The history cache is purged before the reservation goes."""
        rt = get_runtime()
        reports: dict[str, PruneReport] = {}
        with ExitStack() as stack:
            held: dict[str, Reservation | None] = {}
            for thread_id in chunk:
                try:
                    held[thread_id] = stack.enter_context(reservations.hold_thread(
                        rt, thread_id, node="cli:prune_threads",
                        metadata={"checkpoint_admin": {"command": "prune_threads"}}))
                except RunInFlightError as exc:
                    reports[thread_id] = PruneReport(thread_id=thread_id, status=reservations.RUN_IN_FLIGHT,
                                                     error=str(exc), hint=reservations.IN_FLIGHT_HINT)
            for report in self._rewrite(database, list(held), opts, dry_run=False):
                reports[report.thread_id] = report
                reservations.after_rewrite(rt, report.thread_id, report.status, held[report.thread_id])
        return reports

    def _rewrite(self, database: Any, threads: list[str], opts: dict[str, Any], *,
                 dry_run: bool) -> list[PruneReport]:
        common = {"dry_run": dry_run, "backup": not opts["no_backup"], "protect": opts["protect"],
                  "note": "cli:prune_threads"}
        if opts["delete_threads"]:
            return [delete_thread(database, thread_id, **common) for thread_id in threads]
        rule = "keep_last" if opts["keep_last"] else "safe_only"
        return prune_threads(database, threads, rule, n=opts["keep_last"], **common)

    def _confirmed(self, todo: list[PruneReport], opts: dict[str, Any]) -> bool:
        if opts["yes"]:
            return True
        if not sys.stdin.isatty():
            self.stderr.write("No terminal to confirm on; pass --yes to prune without a prompt.")
            return False
        deleted = sum(len(r.deleted_checkpoint_ids) for r in todo)
        freed = sum(r.bytes_before - r.bytes_after for r in todo)
        backup = ("no backup: this cannot be reverted" if opts["no_backup"]
                  else "backed up first: bytes are freed only once the backups are purged")
        self.stderr.write(f"Prune {plural(todo, 'thread')}: delete {plural(deleted, 'checkpoint')}, about "
                          f"{filesizeformat(max(freed, 0))} ({backup}).")
        return input("Go ahead? [y/N] ").strip().lower() in ("y", "yes")

    def _emit(self, results: list[PruneReport], reclaimed: dict[str, int] | None, opts: dict[str, Any],
              *, final: bool) -> None:
        for r in results:
            if r.error:
                self.stderr.write(f"{r.thread_id}: {r.status}: {r.error}\n  hint: {r.hint}")
        cap = self._cap_report(results, opts)
        if opts["json"]:
            rows = [{key: getattr(r, key) for key in JSON_KEYS} for r in results]
            document: dict[str, Any] = {"threads": rows, "reclaimed": reclaimed}
            if cap is not None:
                document["max_delete_per_run"] = cap
            self.stdout.write(json.dumps(document))
            return
        for r in results:
            self.stdout.write(f"{r.status:<20} {r.thread_id}  kept {len(r.kept_checkpoint_ids)}  "
                              f"deleted {len(r.deleted_checkpoint_ids)}  rebased {len(r.rebased_checkpoint_ids)}  "
                              f"bytes {r.bytes_before} -> {r.bytes_after}"
                              + (" (estimate)" if r.status.startswith("would_") else "")
                              + (f"  backup {r.backup_id}" if r.backup_id else ""))
            chain = sum(1 for p in r.protected if p["reason"] == "chain_to_seed")
            for p in r.protected:
                if p["reason"] != "chain_to_seed":
                    ns = f" (namespace {p['checkpoint_ns']})" if p["checkpoint_ns"] else ""
                    self.stdout.write(f"    protected {p['checkpoint_id']}{ns}: {p['reason']}")
            if chain:
                self.stdout.write(f"    protected {chain} more: chain_to_seed (a kept checkpoint reads through them)")
            if r.unbranchable_checkpoint_ids:
                self.stdout.write("    no longer resumable or forkable: "
                                  f"{plural(r.unbranchable_checkpoint_ids, 'older checkpoint')} of the head's chain, "
                                  f"newest {r.unbranchable_checkpoint_ids[-1]}")
        total = sum(len(r.deleted_checkpoint_ids) for r in results)
        self.stdout.write(f"{plural(results, 'thread')}; {plural(total, 'checkpoint')} "
                          + ("deleted" if final else "would be deleted")
                          + ("" if opts["no_backup"] or not final
                             else "; backups keep the deleted rows until purged (manage.py conversion_backups)"))
        if reclaimed:
            self.stdout.write(f"reclaimed: file bytes {reclaimed['file_bytes_before']} -> "
                              f"{reclaimed['file_bytes_after']}")
        if cap is not None and cap["skipped"]:
            self.stdout.write(f"stopped at the cap: {plural(cap['stopped_at'], 'thread')} "
                              + ("pruned or deleted" if final else "to prune or delete")
                              + f" (--max-delete-per-run {cap['max_delete_per_run']}); {cap['skipped']} left for "
                              "the next run")

    @staticmethod
    def _cap_report(results: list[PruneReport], opts: dict[str, Any]) -> dict[str, int] | None:
        if opts["max_delete_per_run"] is None:
            return None
        done = ("pruned", "deleted", "would_prune", "would_delete")
        return {"max_delete_per_run": opts["max_delete_per_run"],
                "stopped_at": sum(r.status in done for r in results),
                "skipped": sum(r.status == "skipped" for r in results)}
