"""``python manage.py requeue_stalled_threads [--older-than SECONDS] [--dry-run]``

Releases the rows whose worker is gone (a SIGKILLed worker's ``running`` rows:
sent again, or ended for a job being cancelled; :func:`dashboard.jobs.stalls.recover_abandoned`),
then sends ``jobs.run_thread`` again for every row of a running Celery job that is
still ``queued`` ``--older-than`` seconds after its task fell due (default:
``DASHBOARD_REQUEUE_AFTER_S``): the message was lost by the broker, e.g. a
Redis without persistence restarted. The same domain function as the beat
task ``jobs.requeue_stalled`` (:mod:`dashboard.jobs.stalls`); a row sent twice
is claimed once.

It also deletes this dashboard's DeerFlow reservations whose lease expired
(:func:`dashboard.jobs.reservations.release_expired`), as the beat task does.

Exit status: 0 (also when nothing was stalled); 1 when the broker cannot be
reached (the rows stay queued and a later run sends them).
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError

from dashboard.commands import DashboardCommand
from dashboard.errors.outages import OUTAGES, describe_outage, is_outage
from dashboard.formatting import plural
from dashboard.jobs import reservations, stalls
from dashboard.jobs.models import ThreadResult
from dashboard.jobs.tasks import send_again


class Command(DashboardCommand):
    help = "Send again the thread tasks of running jobs that the broker lost (rows queued for too long)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--older-than", type=float, default=None, metavar="SECONDS",
                            help="seconds past its due time a queued row is presumed lost "
                                 "(default: DASHBOARD_REQUEUE_AFTER_S)")
        parser.add_argument("--dry-run", action="store_true", help="list the stalled rows; send nothing")

    def handle(self, *args, older_than: float | None, dry_run: bool, **options) -> None:
        threshold = settings.DASHBOARD_REQUEUE_AFTER_S if older_than is None else older_than
        if threshold < 0:
            raise CommandError(f"--older-than must be 0 or more seconds; got {threshold:g}.")
        if dry_run:
            count = stalls.stalled_rows(threshold)
            self.stdout.write(f"{plural(count, 'thread task')} queued for more than {threshold:g} s "
                              "past their due time.")
            return
        from dashboard.jobs.batches import claim_batch
        from dashboard.jobs.tasks import send_batch

        sent: list[int] = []

        def send(result_id: int) -> None:
            send_again(result_id)
            sent.append(result_id)

        try:
            recovery = stalls.recover_abandoned(send)
            for job_id in sorted(recovery.jobs):
                send_batch(claim_batch(job_id))
            ids = recovery.sent + stalls.requeue_stalled(threshold, send)
        except OUTAGES as exc:
            if not is_outage(exc):
                raise
            _code, detail, hint = describe_outage(exc)
            raise CommandError(f"{detail}\nWhat to do: {hint} Sent {len(sent)} before the failure; the other "
                               "rows stay queued: run this command again.") from exc
        for row in ThreadResult.objects.filter(id__in=ids).select_related("job").order_by("id"):
            self.stdout.write(f"sent again: job {row.job_id} thread {row.thread_id} (row {row.pk})")
        for row in ThreadResult.objects.filter(id__in=recovery.ended).order_by("id"):
            self.stdout.write(f"worker lost: job {row.job_id} thread {row.thread_id} (row {row.pk}) {row.status}")
        self.stdout.write(f"{plural(ids, 'thread task')} sent again.")
        released = reservations.release_expired()
        if released:
            self.stdout.write(f"released {plural(released, 'expired DeerFlow reservation')}: {', '.join(released)}")
