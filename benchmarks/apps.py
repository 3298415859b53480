"""The benchmarks as a Django app: it only adds the ``run_benchmarks`` management command.

``dashboard.settings`` installs it when the ``benchmarks`` package is importable (a source checkout);
the Docker image ships without it, so its ``manage.py`` has no benchmark command rather than a broken one.
"""

from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "benchmarks"
    verbose_name = "Benchmarks"
