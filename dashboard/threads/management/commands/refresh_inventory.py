"""``python manage.py refresh_inventory [--full] [--json]``: bring the thread summary up to date now.

The same function as the list page's "Refresh" button and the periodic
Celery task (:func:`dashboard.threads.storage.refresh_inventory`). Run it
once after deploying onto a large existing database (the first build
aggregates every checkpoint) and whenever rows were rewritten outside the
dashboard (``--full`` also drops rows of deleted threads).
"""

from __future__ import annotations

import json as jsonlib

from dashboard.commands import DashboardCommand
from dashboard.formatting import plural
from dashboard.runtime import get_runtime
from dashboard.threads import storage


class Command(DashboardCommand):
    help = "Refresh the thread summary (dfa_thread_summary) of the configured checkpoint database."
    uses_checkpoint_database = True

    def add_arguments(self, parser):
        parser.add_argument("--full", action="store_true",
                            help="rebuild every row (reconcile) instead of the watermark refresh")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, full: bool, json: bool, **options):
        report = storage.refresh_inventory(get_runtime(), full=full)
        if json:
            self.stdout.write(_dumps(report.as_dict()))
            return
        self.stdout.write(f"Thread summary: {report.kind} refresh, {plural(report.threads, 'thread')} recomputed in "
                          f"{report.seconds:.2f} s; complete up to checkpoint {report.watermark or '—'}.")


def _dumps(value: dict) -> str:
    return jsonlib.dumps(value, indent=2)
