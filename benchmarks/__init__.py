"""Benchmarks for issue 6 (scale and speed), one module per benchmark, run by ``manage.py run_benchmarks``.

Modules (run in this order; each adds flat keys to one results dict):

* :mod:`benchmarks.bench_list` -- thread list and census at 1k/10k/100k threads vs the naive aggregate;
* :mod:`benchmarks.bench_thread_page` -- thread page materialization vs LangGraph's ``get_state``;
* :mod:`benchmarks.bench_convert` -- conversion of 1,000-checkpoint threads: one-pass vs naive
  per-checkpoint ``get_state``, vs the write floor, and throughput with 1 and 2 workers;
* :mod:`benchmarks.bench_memory` -- peak memory of converting a 2,000-turn thread (subprocesses);
* :mod:`benchmarks.bench_prune` -- retention: keep-last 10 throughput over a 100k-thread database, and one
  1,000-checkpoint delta thread vs a plain DELETE of the same rows.
* :mod:`benchmarks.bench_compact` -- full -> delta compaction: vs the write floor, bytes after / before.
* :mod:`benchmarks.bench_web` -- requests/s and p99 of 20 loopback clients, gunicorn gthread vs two sync workers.

:func:`benchmarks.runner.run_all` writes ``benchmarks/results/latest.json`` and ``latest.md``
(a small-scale or subset run: ``latest-<scale>[-<names>].*``; :mod:`benchmarks.report`). Scratch Postgres
databases are created and dropped by each benchmark. Benchmarks are not tests: nothing here asserts a time.

The package itself imports nothing: ``dashboard.settings`` installs it as an app, so every
``manage.py`` command imports it at start-up.
"""

