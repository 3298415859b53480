"""``python manage.py audit_modes [--json] [--threads]``: the fleet audit for cron and CI.

Exits 1 when a finding of severity ``error`` exists, else 0. A config.yaml or a
database that cannot be used also exits 1, with the web pages' detail and hint
(:mod:`dashboard.commands`).
"""

from __future__ import annotations

import json
import sys

from dashboard.commands import DashboardCommand
from dashboard.fleet.audit import run_audit
from dashboard.fleet.control import live_check
from dashboard.runtime import get_runtime
from deerflow.inventory import CadenceInference


class Command(DashboardCommand):
    help = "Audit every process's frozen mode and cadence against each other and the data; exit 1 on errors."
    uses_checkpoint_database = True

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print the audit as JSON")
        parser.add_argument("--threads", action="store_true", help="include per-thread class and cadence")

    def handle(self, *args, json: bool = False, threads: bool = False, **options):
        audit = run_audit(get_runtime(), live=live_check(), with_threads=threads)  # a command may wait: ask now
        if json:
            self.stdout.write(_dumps(audit.as_dict(with_threads=threads)))
        else:
            self._text(audit, threads)
        if audit.has_errors:
            sys.exit(1)

    def _text(self, audit, threads: bool) -> None:
        w = self.stdout.write
        w(f"processes: {len(audit.processes)}")
        for p in audit.processes:
            w(f"  {p['state']:7} {p['name']}  {p['mode']}/{p['snapshot_frequency']}  {p['config_path']}")
        w("census: " + ", ".join(f"{k}={v}" for k, v in audit.census.items()))
        for f in audit.findings:
            w(f"{f.severity.upper():7} {f.code}: {f.message}\n"
              f"          evidence: {f.evidence}\n          hint: {f.hint}")
        if not audit.findings:
            w("no findings")
        if threads:
            for t in audit.threads:
                cadences = CadenceInference(t["thread_id"], t["cadences"]["exact"], t["cadences"]["lower_bound"])
                w(f"  {t['thread_id']}  {t['class']}  cadence={cadences.describe()}"
                  f"{' (several)' if t['multiple_cadences'] else ''}")


def _dumps(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
