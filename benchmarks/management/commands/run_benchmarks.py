"""``python manage.py run_benchmarks [--scale small|full] [--only list,thread_page,convert,memory]``.

Runs :mod:`benchmarks` (scratch Postgres databases, created and dropped) and
writes ``benchmarks/results/latest.json`` and ``latest.md`` (a small-scale
or ``--only`` run writes ``latest-<scale>[-<names>].*`` instead, leaving the
committed full-scale figures alone: :func:`benchmarks.report.latest_name`). Full scale
seeds 100,000 threads and takes tens of minutes on two cores. A
``--pg-admin-url`` server that cannot be reached is reported at once (exit 1,
libpq's reason, no traceback).
"""

from __future__ import annotations

import psycopg
from django.core.management.base import BaseCommand, CommandError

from benchmarks.common import DEFAULT_ADMIN_URL
from benchmarks.runner import BENCHMARKS, run_all
from dashboard.errors.outages import redact


class Command(BaseCommand):
    help = ("Run the scale and speed benchmarks and write benchmarks/results/latest.{json,md} "
            "(a small or --only run: latest-<scale>[-<names>].{json,md}).")

    def add_arguments(self, parser):
        parser.add_argument("--scale", choices=("small", "full"), default="full")
        parser.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
        parser.add_argument("--pg-admin-url", default=DEFAULT_ADMIN_URL,
                            help="Postgres URL allowed to create and drop the scratch databases")

    def handle(self, *args, scale: str, only: str, pg_admin_url: str, **options):
        names = tuple(n.strip() for n in only.split(",") if n.strip())
        _check_admin_url(pg_admin_url)
        try:
            run = run_all(scale=scale, only=names, admin_url=pg_admin_url, log=self.stdout.write)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Done in {run['seconds']:.0f} s; wrote {', '.join(run['paths'])}")


def _check_admin_url(url: str) -> None:
    """Connect once to ``url`` (3 s at most).

    Raises:
        CommandError: the server cannot be reached or refuses the role (libpq's reason and what to do).
    """
    try:
        with psycopg.connect(url, connect_timeout=3):
            return
    except psycopg.Error as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rsplit("failed: ", 1)[-1]
        raise CommandError(
            f"PostgreSQL at --pg-admin-url {redact(url)} cannot be used: {reason}\n"
            "What to do: start PostgreSQL (README), or pass --pg-admin-url with a role that may create "
            "and drop databases."
        ) from exc
