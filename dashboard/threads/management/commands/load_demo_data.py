"""``python manage.py load_demo_data [--force]``: put the real DeerFlow fixture threads where config.yaml points.

Copies the SQLite file written by DeerFlow's own code through LangGraph's
``SqliteSaver`` (``tests/fixtures/deerflow-real/sqlite.db.gz``, 27 threads in
both channel modes) to ``{database.sqlite_dir}/deerflow.db``. Only for the
``sqlite`` backend; an existing file is kept unless ``--force``.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from dashboard.commands import DashboardCommand
from deerflow.config import load_config

FIXTURE = Path(settings.BASE_DIR) / "tests" / "fixtures" / "deerflow-real" / "sqlite.db.gz"


class Command(DashboardCommand):
    help = "Load the real DeerFlow fixture threads into the SQLite checkpoint file config.yaml names."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="overwrite an existing deerflow.db")

    def handle(self, *args, force: bool, **options):
        config = load_config(settings.DEER_FLOW_CONFIG_PATH)  # a ConfigError ends as CommandError (DashboardCommand)
        if config.database.backend != "sqlite":
            raise CommandError(
                f"{config.path}: database.backend is {config.database.backend!r}; load_demo_data only fills "
                "a sqlite checkpoint file. For Postgres restore tests/fixtures/deerflow-real/postgres.sql.gz with psql."
            )
        target = config.database.sqlite_path()
        if target.exists() and not force:
            self.stdout.write(f"{target} already exists; keeping it (use --force to replace).")
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".db.partial")
        with gzip.open(FIXTURE, "rb") as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst)
        partial.replace(target)
        self.stdout.write(f"Loaded the real DeerFlow threads into {target}")
