"""``python manage.py convert_threads --to full|delta (--thread ID ... | --all) [--dry-run] [--yes]``

``--to delta`` compacts legacy full-mode threads into delta storage at this
process's cadence (:mod:`dashboard.jobs.compaction`): a dry run per thread and
in total (bytes now, bytes after, bytes freed, snapshot positions), then the
verified, backed-up compaction. It refuses while a live registered process of
the fleet is in full mode (``--force-full-fleet`` overrides): full-mode
processes answer 409 for compacted threads. Exit 0 when every thread was
compacted or already delta, 1 when one failed, 2 when nothing was confirmed or
the request was refused.

Runs the same services as the Celery tasks, synchronously in this process
(frozen from config.yaml like any dashboard process). Converting reads delta
history, which only a delta-mode process may do: run from a full-mode
config.yaml, the command stops before creating any job and says to point
``DEER_FLOW_CONFIG_PATH`` at a delta-mode config.yaml. First a dry run (estimate
and integrity check, printed per thread), then, unless ``--dry-run``, a
confirmation prompt (skipped with ``--yes``) and the conversion. Both are
recorded as jobs, visible on /jobs/. A progress bar goes to stderr.

Exit status: 0 when every thread succeeded (or nothing needed conversion),
1 when any thread failed (in the dry run or the conversion) or config.yaml or
a database cannot be used (the web pages' detail and hint, :mod:`dashboard.commands`),
2 when nothing was converted because the request was refused (this process
is in full mode, or the job was refused) or not confirmed.
"""

from __future__ import annotations

import getpass
import sys

from django.conf import settings
from django.core.management.base import CommandError
from django.template.defaultfilters import filesizeformat

from dashboard.commands import DashboardCommand, require_delta_mode
from dashboard.errors.jobs import JobError
from dashboard.formatting import plural
from dashboard.jobs import services
from dashboard.jobs.compact_command import CompactCommand
from dashboard.jobs.models import ConversionJob, ThreadResult
from dashboard.jobs.progress import progress
from dashboard.jobs.services import JobOptions
from dashboard.runtime import get_runtime


class ProgressBar:
    """``[#####.....] 5/10 thread-id status`` redrawn on one line of ``stream``."""

    def __init__(self, stream, total: int, label: str, width: int = 30):
        self.stream, self.total, self.label, self.width, self.done = stream, total, label, width, 0
        self.stream.write(f"{label} [{'.' * width}] 0/{total}", ending="")

    def advance(self, result: ThreadResult) -> None:
        self.done += 1
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} "
                          f"{result.thread_id[:40]} {result.status}\x1b[K", ending="")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("")
        self.stream.flush()


class Command(DashboardCommand):
    help = "Convert delta threads to full storage (dry run, confirmation, verified conversion with backups)."
    uses_checkpoint_database = True

    def add_arguments(self, parser) -> None:
        parser.add_argument("--to", required=True, choices=["full", "delta"],
                            help="target storage mode: full (materialize delta threads) or delta (compact full ones)")
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--thread", action="append", metavar="ID", help="a thread id (repeatable)")
        which.add_argument("--all", action="store_true",
                           help="every thread that needs it (--to full: delta evidence; --to delta: full or migrated)")
        parser.add_argument("--dry-run", action="store_true", help="estimate and check only; write nothing")
        parser.add_argument("--yes", action="store_true", help="no confirmation prompt (also accepts the size limit)")
        parser.add_argument("--no-integrity", action="store_true", help="skip the comparison with LangGraph's reader")
        parser.add_argument("--acknowledge-branch-ambiguous", action="store_true",
                            help="convert sibling forks whose writes are all stored under the branch point "
                                 "(status branch_ambiguous) as LangGraph's reader reads them; recorded on the job")
        parser.add_argument("--throttle", type=float, default=0.0, metavar="S", help="seconds between threads")
        parser.add_argument("--force-full-fleet", action="store_true",
                            help="--to delta: compact although live full-mode processes are registered "
                                 "(they will answer 409 for compacted threads)")

    def preflight(self) -> None:
        """Refuse (exit 2, no job created) in a full-mode process, then check the checkpoint database.

        Raises:
            CommandError: this process froze ``checkpoint_channel_mode=full`` (returncode 2), or as
                :meth:`DashboardCommand.preflight`.
        """
        require_delta_mode("converting", nothing_done="Nothing was done (no job was created).")
        super().preflight()

    def handle(self, *args, **opts) -> None:
        rt = get_runtime()
        self.stderr.write(f"process frozen: checkpoint_channel_mode={rt.mode} "
                          f"snapshot_frequency={rt.snapshot_frequency} config={rt.config.path}")
        if opts["to"] == "delta":
            return CompactCommand(self).handle(rt, opts)
        selection = {"thread_ids": opts["thread"]} if opts["thread"] else {"filter": {"mode": "delta"}}
        common = {"integrity": not opts["no_integrity"], "throttle_delay_s": opts["throttle"], "runner": "inline",
                  "acknowledge_branch_ambiguous": opts["acknowledge_branch_ambiguous"],
                  "launched_by": f"cli:{getpass.getuser()}"}
        dry = self._run("dry run", self._create(ConversionJob.Kind.DRY_RUN, selection, **common))
        if opts["dry_run"] or not dry.results.filter(status="needs_conversion").exists():
            return self._finish([dry])
        if not self._confirmed(dry, opts["yes"]):
            raise CommandError("Not confirmed; nothing was converted.", returncode=2)
        job = self._create(ConversionJob.Kind.CONVERT, None, source_job=dry, confirmed=True, **common)
        self._finish([dry, self._run("convert", job)])

    def _create(self, kind: str, selection, **options) -> ConversionJob:
        try:
            return services.create_job(None, kind, selection, JobOptions(**options))
        except JobError as exc:
            raise CommandError(f"{exc.detail}\n{exc.hint}", returncode=2) from exc

    def _run(self, label: str, job: ConversionJob) -> ConversionJob:
        bar = ProgressBar(self.stderr, job.results.count(), f"{label} (job {job.pk})")
        try:
            job = services.run_inline(job, on_result=bar.advance)
        except KeyboardInterrupt:
            bar.close()
            services.cancel(job)
            raise CommandError(f"Interrupted; job {job.pk} cancelled.", returncode=2) from None
        bar.close()
        self._report(job)
        return job

    def _report(self, job: ConversionJob) -> None:
        self.stdout.write(f"job {job.pk} ({job.kind}): {job.state}")
        for r in job.results.all():
            line = (f"  {r.status:<26} {r.thread_id}  checkpoints {r.checkpoints_rewritten}/{r.checkpoints_total}  "
                    f"bytes {r.bytes_before} -> {r.bytes_after}")
            if r.backup_id:
                line += f"  backup {r.backup_id}"
            self.stdout.write(line)
            if r.error:
                self.stdout.write(f"      {r.error}\n      hint: {r.hint}")
        p = progress(job)
        self.stdout.write(f"total: {p.succeeded} succeeded, {p.failed} failed, {p.skipped} skipped; "
                          f"checkpoints {p.checkpoints_rewritten}; bytes {p.bytes_before} -> {p.bytes_after}")

    def _confirmed(self, dry: ConversionJob, yes: bool) -> bool:
        rows = list(dry.results.filter(status="needs_conversion"))
        after = sum(r.bytes_after for r in rows)
        limit = settings.CONVERSION_SIZE_LIMIT_BYTES
        question = (f"Convert {plural(rows, 'thread')} to full? Stored bytes after: about {filesizeformat(after)}"
                    + (f", ABOVE the size limit of {filesizeformat(limit)}" if after > limit else "") + ". [y/N] ")
        if yes:
            return True
        if not sys.stdin.isatty():
            self.stderr.write("No terminal to confirm on; pass --yes to convert without a prompt.")
            return False
        return input(question).strip().lower() in ("y", "yes")

    def _finish(self, jobs: list[ConversionJob]) -> None:
        """Exit 1 when a thread failed in any of the jobs (a dry run's blocked thread was not converted)."""
        failed = sum(progress(job).failed for job in jobs)
        if failed:
            raise CommandError(f"{plural(failed, 'thread')} failed; see the table above and /jobs/.", returncode=1)
