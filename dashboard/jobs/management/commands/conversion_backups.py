"""``python manage.py conversion_backups [--thread ID] [--purge BACKUP_ID ...]``

Lists the backups conversions wrote (id, thread, created, rows, bytes,
status, note), or purges backups: their rows are deleted and the converted
thread is left as it is (it can no longer be reverted). Exit status 1 when
a backup to purge does not exist.
"""

from __future__ import annotations

from django.core.management.base import CommandError

from dashboard.commands import DashboardCommand
from dashboard.formatting import plural
from dashboard.runtime import get_runtime
from deerflow.convert import BackupNotFoundError, list_backups, purge_backup


class Command(DashboardCommand):
    help = "List conversion backups, or purge some."
    uses_checkpoint_database = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("--thread", metavar="ID", help="only this thread's backups")
        parser.add_argument("--purge", action="append", metavar="BACKUP_ID", help="purge this backup (repeatable)")

    def handle(self, *args, **opts) -> None:
        database = get_runtime().config.database
        if opts["purge"]:
            return self._purge(database, opts["purge"])
        backups = list_backups(database, opts["thread"])
        for b in backups:
            self.stdout.write(f"{b.backup_id}  {b.status:<8} {b.bytes:>12} bytes  {b.checkpoint_rows:>5} rows  "
                              f"{b.created_at}  {b.thread_id}  {b.note}")
        self.stdout.write(f"{plural(backups, 'backup')}; active: {sum(1 for b in backups if b.status == 'active')}")

    def _purge(self, database, backup_ids: list[str]) -> None:
        missing = []
        for backup_id in backup_ids:
            try:
                info = purge_backup(database, backup_id)
            except BackupNotFoundError as exc:
                missing.append(str(exc))
                continue
            self.stdout.write(f"purged {backup_id} ({info.bytes} bytes) of thread {info.thread_id}")
        if missing:
            raise CommandError("; ".join(missing), returncode=1)
