"""``GET /metrics``: Prometheus text exposition (``prometheus_client``), protected by a token.

Set ``DASHBOARD_METRICS_TOKEN``; Prometheus scrapes with
``Authorization: Bearer <that token>`` (``authorization: {credentials: ...}``
in its scrape config). Unset: the route answers 404 (metrics are off). A
wrong or missing token: 401. Each scrape computes the fleet audit once
(:func:`dashboard.fleet.audit.run_audit`) and reads the jobs table; the
gauges are built for that scrape only (a private ``CollectorRegistry``), so
web processes never disagree about a stale in-process value.

Gauges (``deerflow_`` prefix):

* ``threads{thread_class}``: the census (full, delta, delta_counters_only, migrated, inconsistent);
* ``threads_by_mode{mode}``, ``thread_bytes{mode}``: threads and stored bytes per mode;
* ``jobs{kind, state}``: conversion jobs;
* ``fleet_processes{role, mode, snapshot_frequency, state}``: the registry (live, superseded, gone,
  dismissed, stopped);
* ``audit_findings{severity, code}``: the audit's findings (config drift and fleet disagreement among them);
* ``config_drift{kind}``: processes per kind of config drift (``config_drift``: frozen mode or cadence
  differs from the file on disk; ``config_edited``: the file changed, mode and cadence did not;
  ``config_differs``: processes run different configs; ``config_unreadable``), every kind always present;
* ``replay_depth{quantile}`` (0.5, 0.9, 0.99, 1) and ``replay_depth_threads``: how many updates a read of a
  delta thread's head replays since its last ``_DeltaSnapshot`` (from the summary, no checkpoint scan);
* ``summary_age_seconds``: since the thread summary was last refreshed (absent when never built);
* ``audit_generated_timestamp_seconds``: when this audit was computed.
"""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from dashboard.accounts.throttle import metrics_refusal
from dashboard.errors import ErrorView, json_error

__all__ = ["AuditCollector", "DRIFT_CODES", "metrics"]

#: The audit's finding codes that are config drift (dashboard.fleet.audit), one ``config_drift`` gauge each.
DRIFT_CODES = ("config_drift", "config_edited", "config_differs", "config_unreadable")


class AuditCollector:
    """A ``prometheus_client`` collector over one audit and the jobs table (see the module docstring)."""

    def __init__(self, runtime):
        self.runtime = runtime

    def collect(self):
        import datetime as dt

        from django.db.models import Count

        from dashboard.fleet.audit import run_audit
        from dashboard.jobs.models import ConversionJob

        audit = run_audit(self.runtime)
        threads = GaugeMetricFamily("deerflow_threads", "Threads by class (census).", labels=["thread_class"])
        for name, count in sorted(audit.census.items()):
            threads.add_metric([name], count)
        yield threads
        by_mode = GaugeMetricFamily("deerflow_threads_by_mode", "Threads by channel mode.", labels=["mode"])
        size = GaugeMetricFamily("deerflow_thread_bytes", "Stored bytes by channel mode.", labels=["mode"])
        for mode, totals in sorted(audit.storage.items()):
            by_mode.add_metric([mode], totals.get("threads", 0))
            size.add_metric([mode], totals.get("bytes_total", 0))
        yield by_mode
        yield size
        jobs = GaugeMetricFamily("deerflow_jobs", "Conversion jobs by kind and state.", labels=["kind", "state"])
        for row in ConversionJob.objects.values("kind", "state").annotate(n=Count("id")).order_by("kind", "state"):
            jobs.add_metric([row["kind"], row["state"]], row["n"])
        yield jobs
        fleet = GaugeMetricFamily("deerflow_fleet_processes", "Registered processes.",
                                  labels=["role", "mode", "snapshot_frequency", "state"])
        counted = Counter((p["role"], p["mode"], str(p["snapshot_frequency"]), p["state"]) for p in audit.processes)
        for labels, n in sorted(counted.items()):
            fleet.add_metric(list(labels), n)
        yield fleet
        findings = GaugeMetricFamily("deerflow_audit_findings", "Fleet audit findings.", labels=["severity", "code"])
        for (severity, code), n in sorted(Counter((f.severity, f.code) for f in audit.findings).items()):
            findings.add_metric([severity, code], n)
        yield findings
        drift = GaugeMetricFamily("deerflow_config_drift", "Processes whose config drifted, by kind.", labels=["kind"])
        drifted = Counter(f.code for f in audit.findings if f.code in DRIFT_CODES)
        for code in DRIFT_CODES:
            drift.add_metric([code], drifted.get(code, 0))
        yield drift
        yield from self._summary_gauges()
        generated = dt.datetime.fromisoformat(audit.generated_at)
        yield GaugeMetricFamily("deerflow_audit_generated_timestamp_seconds", "When this audit was computed.",
                                value=generated.timestamp())


    def _summary_gauges(self):
        from deerflow.inventory import summary

        counts = summary.replay_depth_counts(self.runtime.saver)
        depth = GaugeMetricFamily("deerflow_replay_depth", "Updates replayed since the last _DeltaSnapshot at the "
                                  "head of delta threads (nearest-rank quantiles).", labels=["quantile"])
        for q, value in sorted(summary.depth_quantiles(counts).items()):
            depth.add_metric([str(q)], value)
        yield depth
        yield GaugeMetricFamily("deerflow_replay_depth_threads", "Delta threads with a known replay depth.",
                                value=sum(counts.values()))
        age = summary.summary_age_seconds(self.runtime.saver)
        if age is not None:
            yield GaugeMetricFamily("deerflow_summary_age_seconds", "Seconds since the thread summary was refreshed.",
                                    value=age)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The exposition for one scrape; 404 when ``DASHBOARD_METRICS_TOKEN`` is unset, 401 without it."""
    from dashboard.runtime import get_runtime

    expected = settings.DASHBOARD_METRICS_TOKEN
    if not expected:
        return json_error(ErrorView(404, "metrics_disabled", "Metrics are off.",
                                    "Set DASHBOARD_METRICS_TOKEN and scrape with Authorization: Bearer <it>."))
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not sent.strip():
        return json_error(ErrorView(401, "invalid_metrics_token", "Missing or wrong metrics token.",
                                    "Send Authorization: Bearer <DASHBOARD_METRICS_TOKEN>."))
    refused = metrics_refusal(request, sent.strip())
    if refused is not None:
        return refused
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AuditCollector(get_runtime()))
    response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
