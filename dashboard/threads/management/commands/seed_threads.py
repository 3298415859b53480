"""``python manage.py seed_threads --threads N --turns-min A --turns-max B --mode full|delta|mixed --snapshot-frequency K [--seed S]``.

Writes realistic synthetic threads into the checkpoint database config.yaml
names (see :mod:`deerflow.seed`), then brings the thread summary up to date.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from deerflow import summary
from deerflow.config import load_config
from deerflow.errors import ConfigError
from deerflow.savers import open_checkpointer
from deerflow.seed import MODES, SeedPlan, seed_threads


class Command(BaseCommand):
    help = "Write N realistic synthetic threads into the configured checkpoint database (bulk, LangGraph's own rows)."

    def add_arguments(self, parser):
        parser.add_argument("--threads", type=int, required=True, help="threads to create")
        parser.add_argument("--turns-min", type=int, default=1, help="fewest turns per thread")
        parser.add_argument("--turns-max", type=int, default=12, help="most turns per thread")
        parser.add_argument("--mode", choices=MODES, default="mixed", help="checkpoint channel mode of the threads")
        parser.add_argument("--snapshot-frequency", type=int, default=10, help="delta cadence (updates per snapshot)")
        parser.add_argument("--seed", default=None, help="reproducible content, ids and times")
        parser.add_argument("--templates", type=int, default=24, help="distinct recorded thread shapes")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **opts):
        try:
            database = load_config(settings.DEER_FLOW_CONFIG_PATH).database
        except ConfigError as exc:
            raise CommandError(str(exc)) from exc
        plan = SeedPlan(threads=opts["threads"], turns_min=opts["turns_min"], turns_max=opts["turns_max"],
                        mode=opts["mode"], snapshot_frequency=opts["snapshot_frequency"], seed=opts["seed"],
                        templates=opts["templates"])
        try:
            report = seed_threads(database, plan, progress=None if opts["json"] else self._progress)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        with open_checkpointer(database) as saver:
            refreshed = summary.refresh(saver)
        if opts["json"]:
            self.stdout.write(json.dumps({"seed": report.as_dict(), "summary": refreshed.as_dict()}, indent=2))
            return
        self.stdout.write(
            f"Wrote {report.threads} threads ({report.checkpoints} checkpoints, {report.writes} writes, "
            f"{report.blobs} blobs, {report.bytes / 1e6:.1f} MB) in {report.seconds:.1f} s; "
            f"by kind: {report.by_kind}. Summary refreshed: {refreshed.threads} threads in {refreshed.seconds:.2f} s."
        )

    def _progress(self, report) -> None:
        self.stdout.write(f"  {report.threads} threads, {report.checkpoints} checkpoints, {report.seconds:.1f} s")
