"""``convert_threads --to delta``: dry run, fleet check, confirmation and compaction, printed per thread and in total.

Exit status (as ``CommandError.returncode``): 0 when every thread was compacted
or already delta (or the dry run found nothing wrong), 1 when a thread failed,
2 when nothing was compacted because the request was refused (a live
full-mode process is registered) or not confirmed.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import filesizeformat

from dashboard.formatting import plural
from dashboard.jobs import compaction
from dashboard.runtime import DashboardRuntime
from deerflow.convert import ThreadReport

__all__ = ["CompactCommand"]

#: Statuses that are not failures: nothing to do, would compact, compacted.
OK_STATUSES = ("already_delta", "needs_compaction", "compacted")


def _size(n: int) -> str:
    return f"{filesizeformat(abs(n))}{' more' if n < 0 else ''} ({n:,} bytes)"


class CompactCommand:
    """The ``--to delta`` flow of ``convert_threads``, writing to the command's stdout/stderr."""

    def __init__(self, command: BaseCommand):
        self.stdout, self.stderr = command.stdout, command.stderr

    def handle(self, rt: DashboardRuntime, opts: dict[str, Any]) -> None:
        """Dry run every selected thread, then (unless ``--dry-run``) check the fleet, confirm and compact.

        Raises:
            CommandError: returncode 1 when a thread failed, 2 when refused or not confirmed.
        """
        thread_ids = opts["thread"] or compaction.candidate_threads(rt)
        integrity = not opts["no_integrity"]
        self.stdout.write(f"dry run: compact to delta at snapshot_frequency={rt.snapshot_frequency} "
                          f"({plural(thread_ids, 'thread')})")
        dry = compaction.dry_run(rt, thread_ids, integrity=integrity, on_report=self._line)
        self._total("would free", dry, ("needs_compaction",))
        blockers = compaction.full_mode_processes()
        self.stdout.write(compaction.FULL_MODE_409)
        if blockers:
            self.stdout.write(f"live full-mode processes registered ({len(blockers)}):")
            for p in blockers:
                self.stdout.write(f"  {p.name} (role {p.role}, config {p.config_path or '?'})")
        todo = [r.thread_id for r in dry if r.status == "needs_compaction"]
        failed = [r for r in dry if r.status not in OK_STATUSES]
        if opts["dry_run"] or not todo:
            return self._finish(failed)
        if blockers and not opts["force_full_fleet"]:
            raise CommandError(
                f"Refused: {plural(blockers, 'live process of the fleet runs,live processes of the fleet run')} "
                "in full mode and would answer 409 for compacted threads. Nothing was compacted.\n"
                "What to do: switch them to delta mode "
                "(database.checkpoint_channel_mode: delta) and restart them, or pass --force-full-fleet.",
                returncode=2)
        if not self._confirmed(dry, opts["yes"]):
            raise CommandError("Not confirmed; nothing was compacted.", returncode=2)
        self.stdout.write(f"compact: {plural(todo, 'thread')}")
        done = compaction.compact(rt, todo, integrity=integrity, note=f"cli:{getpass.getuser()}",
                                  on_report=self._line)
        self._total("freed", done, ("compacted",))
        self.stdout.write("Reclaim disk: the freed bytes reach the disk once the backups are purged (/jobs/backups/) "
                          "and the database is vacuumed (deerflow.convert.reclaim.reclaim_space: SQLite VACUUM locks "
                          "the file while it runs and needs free disk about the file's size; Postgres VACUUM (ANALYZE) "
                          "of LangGraph's tables).")
        self._finish(failed + [r for r in done if r.status not in OK_STATUSES])

    def _line(self, r: ThreadReport) -> None:
        line = f"  {r.status:<24} {r.thread_id}  checkpoints {r.checkpoints_to_rewrite}/{r.checkpoints_total}"
        if r.status in ("needs_compaction", "compacted"):
            steps = ", ".join(str(p["step"]) for p in r.snapshot_positions)
            line += (f"  bytes now {_size(r.bytes_before)}, after {_size(r.bytes_after)}, "
                     f"freed {_size(r.bytes_freed)}  snapshots {len(r.snapshot_positions)} at steps [{steps}]")
        if r.backup_id:
            line += f"  backup {r.backup_id}"
        self.stdout.write(line)
        if r.error:
            self.stdout.write(f"      {r.error}\n      hint: {r.hint}")
        self.stderr.write(f"{r.thread_id[:40]} {r.status}")

    def _total(self, verb: str, reports: list[ThreadReport], statuses: tuple[str, ...]) -> None:
        t = compaction.totals(reports, statuses)
        self.stdout.write(f"total: {plural(t.threads, 'thread')}; bytes now {_size(t.bytes_before)}, after "
                          f"{_size(t.bytes_after)}, {verb} {_size(t.bytes_freed)}; {plural(t.snapshots, 'snapshot')}")

    def _confirmed(self, dry: list[ThreadReport], yes: bool) -> bool:
        t = compaction.totals(dry, ("needs_compaction",))
        if yes:
            return True
        if not sys.stdin.isatty():
            self.stderr.write("No terminal to confirm on; pass --yes to compact without a prompt.")
            return False
        question = (f"Compact {plural(t.threads, 'thread')} to delta, freeing about {filesizeformat(t.bytes_freed)} "
                    "(after the backups are purged and the database reclaims space)? [y/N] ")
        return input(question).strip().lower() in ("y", "yes")

    def _finish(self, failed: list[ThreadReport]) -> None:
        if failed:
            raise CommandError(f"{plural(failed, 'thread')} failed; see the table above.", returncode=1)
