"""``python manage.py revert_prune BACKUP_ID ... [--json]``

Puts pruned (or deleted) threads back from their whole-thread backups, byte
for byte, one verified transaction each (``deerflow.retention.revert_prune``);
checkpoints written after the prune are kept. Find backup ids with
``manage.py conversion_backups`` (notes ``cli:prune_threads`` / ``prune:<rule>``),
or in ``prune_threads``' output. Exit status 1 when a backup is not an active one.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from dashboard.commands import DashboardCommand
from dashboard.formatting import plural
from dashboard.jobs import reservations
from dashboard.runtime import get_runtime
from deerflow.convert import list_backups
from deerflow.retention import PruneReport, revert_prune
from deerflow.storage import RunInFlightError


class Command(DashboardCommand):
    help = "Revert prunes from their backups (byte for byte)."
    uses_checkpoint_database = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("backup_ids", nargs="+", metavar="BACKUP_ID", help="a prune's backup id")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args, **opts) -> None:
        database = get_runtime().config.database
        reports = [self._revert(database, backup_id) for backup_id in opts["backup_ids"]]
        if opts["json"]:
            self.stdout.write(json.dumps({"reverted": [
                {"backup_id": r.backup_id, "thread_id": r.thread_id, "status": r.status,
                 "checkpoint_ids": r.kept_checkpoint_ids, "bytes_before": r.bytes_before,
                 "bytes_after": r.bytes_after} for r in reports]}))
        else:
            for r in reports:
                self.stdout.write(f"{r.status:<10} {r.backup_id}  {r.thread_id}  "
                                  f"{len(r.kept_checkpoint_ids)} checkpoints"
                                  f"  bytes {r.bytes_before} -> {r.bytes_after}")
        failed = [r for r in reports if r.status != "reverted"]
        for r in failed:
            self.stderr.write(f"{r.backup_id}: {r.error}\n  hint: {r.hint}")
        if failed:
            raise CommandError(f"{plural(failed, 'backup')} could not be restored (see above).", returncode=1)

    @staticmethod
    def _revert(database: Any, backup_id: str) -> PruneReport:
        """One revert inside DeerFlow's ``checkpoint_write`` reservation on the backup's thread, then the
        thread's history-cache purge (:mod:`dashboard.jobs.reservations`)."""
        info = next((b for b in list_backups(database) if b.backup_id == backup_id), None)
        if info is None:  # no such backup: revert_prune says so, nothing is written
            return revert_prune(database, backup_id)
        rt = get_runtime()
        try:
            with reservations.hold_thread(rt, info.thread_id, node="cli:revert_prune",
                                          metadata={"checkpoint_admin": {"command": "revert_prune"}}) as held:
                report = revert_prune(database, backup_id)
                reservations.after_rewrite(rt, info.thread_id, report.status, held)  # the cache goes first
        except RunInFlightError as exc:
            return PruneReport(thread_id=info.thread_id, status=reservations.RUN_IN_FLIGHT, backup_id=backup_id,
                               error=str(exc), hint=reservations.IN_FLIGHT_HINT)
        return report
