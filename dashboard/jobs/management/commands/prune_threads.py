"""``python manage.py prune_threads (--thread ID ... | --all | --idle-days D)
(--keep-last N | --safe-only | --delete-threads) [--protect CHECKPOINT_ID ...]
[--dry-run] [--yes] [--no-backup] [--reclaim] [--json]``

Retention (``deerflow.retention``, docs/retention.md), synchronously in this
process, one verified transaction per thread. First a preview per thread
(kept / deleted / protected with the reason / rebased checkpoints, what
becomes un-branchable, bytes before and after), then, unless ``--dry-run``,
a confirmation (skipped with ``--yes``) and the prune. Backups are kept by
default, so the deleted rows still take space until the backup is purged
(``manage.py conversion_backups --purge ID``); ``--no-backup`` skips them.
``--reclaim`` runs the database's reclaim afterwards (SQLite ``VACUUM``,
Postgres ``VACUUM (ANALYZE)``).

Pruning reads delta history, which only a delta-mode process may do (it
reads both modes): run from a full-mode config.yaml, the command stops and
says so.

``--json`` prints exactly ``{"threads": [{"thread_id", "status",
"deleted_checkpoint_ids", "kept_checkpoint_ids", "protected_checkpoint_ids",
"rebased_checkpoint_ids", "bytes_before", "bytes_after"}], "reclaimed":
{"file_bytes_before", "file_bytes_after"} | null}``.

Exit status: 0 on success (also for an empty selection), 1 when a thread
failed (or config.yaml or the database cannot be used), 2 when nothing was
confirmed (no ``--yes`` and no terminal to ask, or the answer was no) or the
process is in full mode.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from django.core.management.base import CommandError
from django.template.defaultfilters import filesizeformat

from dashboard.commands import DashboardCommand, require_delta_mode
from dashboard.runtime import get_runtime
from deerflow.convert import reclaim_space
from deerflow.retention import PruneReport, delete_thread, prune_threads, select_threads

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


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--idle-days needs a number of days, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"--idle-days must be 0 or more, got {text}")
    return value


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
        rule = parser.add_mutually_exclusive_group(required=True)
        rule.add_argument("--keep-last", type=_positive_int, metavar="N",
                          help="keep each head and its N-1 nearest ancestors (plus protected checkpoints)")
        rule.add_argument("--safe-only", action="store_true",
                          help="delete only trailing duration-only leaves and leaf sibling branches")
        rule.add_argument("--delete-threads", action="store_true", help="delete the selected threads whole")
        parser.add_argument("--protect", action="append", default=[], metavar="CHECKPOINT_ID",
                            help="a checkpoint to keep (a resume target; repeatable)")
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
        threads = opts["thread"] or select_threads(database, idle_days=opts["idle_days"])
        threads = list(dict.fromkeys(threads))
        if opts["yes"] and not opts["dry_run"]:
            # confirmed in advance: the prune itself plans each thread, no preview pass first
            results = self._run(database, threads, opts, dry_run=False)
        else:
            preview = self._run(database, threads, opts, dry_run=True)
            todo = [r for r in preview if r.status in ("would_prune", "would_delete")]
            results = preview
            if not opts["dry_run"] and todo:
                if not self._confirmed(todo, opts):
                    self._emit(preview, None, opts, final=False)
                    raise CommandError("Not confirmed; nothing was pruned.", returncode=2)
                done = {r.thread_id: r for r in self._run(database, [r.thread_id for r in todo], opts,
                                                          dry_run=False)}
                results = [done.get(r.thread_id, r) for r in preview]
        reclaimed = None
        if opts["reclaim"] and not opts["dry_run"]:
            space = reclaim_space(database)
            reclaimed = {"file_bytes_before": space.bytes_before, "file_bytes_after": space.bytes_after}
        self._emit(results, reclaimed, opts, final=not opts["dry_run"])
        failed = [r for r in results if r.failed]
        if failed:
            raise CommandError(f"{len(failed)} thread(s) failed; nothing was written to them (see above).",
                               returncode=1)

    def _run(self, database: Any, threads: list[str], opts: dict[str, Any], *, dry_run: bool) -> list[PruneReport]:
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
        self.stderr.write(f"Prune {len(todo)} thread(s): delete {deleted} checkpoint(s), about "
                          f"{filesizeformat(max(freed, 0))} ({backup}).")
        return input("Go ahead? [y/N] ").strip().lower() in ("y", "yes")

    def _emit(self, results: list[PruneReport], reclaimed: dict[str, int] | None, opts: dict[str, Any],
              *, final: bool) -> None:
        for r in results:
            if r.error:
                self.stderr.write(f"{r.thread_id}: {r.status}: {r.error}\n  hint: {r.hint}")
        if opts["json"]:
            rows = [{key: getattr(r, key) for key in JSON_KEYS} for r in results]
            self.stdout.write(json.dumps({"threads": rows, "reclaimed": reclaimed}))
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
                self.stdout.write(f"    no longer resumable or forkable: {len(r.unbranchable_checkpoint_ids)} "
                                  "older checkpoint(s) of the head's chain, "
                                  f"newest {r.unbranchable_checkpoint_ids[-1]}")
        total = sum(len(r.deleted_checkpoint_ids) for r in results)
        self.stdout.write(f"{len(results)} thread(s); {total} checkpoint(s) "
                          + ("deleted" if final else "would be deleted")
                          + ("" if opts["no_backup"] or not final
                             else "; backups keep the deleted rows until purged (manage.py conversion_backups)"))
        if reclaimed:
            self.stdout.write(f"reclaimed: file bytes {reclaimed['file_bytes_before']} -> "
                              f"{reclaimed['file_bytes_after']}")
