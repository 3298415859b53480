"""The fleet audit: do all processes agree on mode and cadence, and does the data agree with them?

Spec, "Cross-process invariant": the mode and the cadence must match in every
process sharing one checkpoint database; each process freezes on its own and
nothing reconciles a divergent one; a cadence mismatch is undetectable by the
runtime. :func:`run_audit` compares the registry, a live check and the data
(census, inferred cadences, recent writes) and returns findings, each with a
severity, the evidence and a remediation hint. The findings about processes
(registry rows and live replies) are :mod:`dashboard.fleet.findings`'s; the
ones the data proves, the readiness checklist and the cached summary facts are
here.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from dashboard.fleet.control import LiveCheck, recent_live_check
from dashboard.fleet.estimates import LegacyEstimate, legacy_estimate
from dashboard.fleet.facts import max_supersteps
from dashboard.fleet.findings import (
    SEVERITIES,
    Finding,
    is_maintenance,
    live_findings,
    live_only_rows,
    readability_findings,
    registry_findings,
)
from dashboard.fleet.history_cache import history_cache
from dashboard.fleet.processes import process_rows
from dashboard.formatting import plural, size
from dashboard.runtime import DashboardRuntime
from dashboard.threads.fragments import fragment_key
from dashboard.threads.links import thread_url
from deerflow import inventory
from deerflow.inventory import deerflow_tables
from deerflow.inventory import summary as summary_table
from deerflow.storage import has_sql_tables, reader_for

__all__ = ["AUDIT_FACTS_TTL_S", "Audit", "Finding", "deerflow_orphans", "readability_findings", "registry_findings",
           "run_audit", "summary_facts", "thread_census"]

#: Seconds the audit's summary-derived facts stay cached under one summary version (:func:`summary_facts`).
AUDIT_FACTS_TTL_S = 600


@dataclass
class Audit:
    """Everything the audit page, API and command show."""

    generated_at: str
    processes: list[dict[str, Any]]
    live: dict[str, Any]
    findings: list[Finding]
    census: dict[str, int]
    cadences: dict[str, Any]
    writers: dict[str, Any]
    readiness: dict[str, list[dict[str, Any]]]
    threads: list[dict[str, Any]] = field(default_factory=list)
    #: threads and bytes per mode (:func:`deerflow.inventory.storage_by_mode`); shown on the page, not in ``as_dict``.
    storage: dict[str, dict[str, int]] = field(default_factory=dict)
    #: when the writers section was counted from the summary's write facts: the summary's last refresh
    #: (ISO 8601; later checkpoints count at the next one); ``None``: counted from ``checkpoints`` now.
    #: Shown on the page, not in ``as_dict``.
    writers_as_of: str | None = None
    #: DeerFlow's orphans and its ``threads_meta`` rows without checkpoints (:func:`deerflow_orphans`);
    #: ``None`` when the database has no ``threads_meta``.
    orphans: dict[str, Any] | None = None
    #: DeerFlow's history cache (:func:`dashboard.fleet.history_cache.history_cache`): this database's setting,
    #: its Redis key count, the live processes on an in-process cache and the warning about them.
    history_cache: dict[str, Any] = field(default_factory=dict)

    @property
    def has_errors(self) -> bool:
        """True when any finding has severity ``error``."""
        return any(f.severity == "error" for f in self.findings)

    def as_dict(self, *, with_threads: bool = False) -> dict[str, Any]:
        """JSON-friendly form (``threads`` only when asked)."""
        out = {
            "generated_at": self.generated_at,
            "processes": self.processes,
            "live": self.live,
            "findings": [asdict(f) for f in self.findings],
            "census": self.census,
            "cadences": self.cadences,
            "writers": self.writers,
            "readiness": self.readiness,
            "orphans": self.orphans,
            "history_cache": self.history_cache,
        }
        if with_threads:
            out["threads"] = self.threads
        return out


def thread_census(
    rt: DashboardRuntime, *, with_threads: bool = True,
) -> tuple[dict[str, int], list[inventory.ThreadSummary]]:
    """Thread count per class (all of :data:`deerflow.inventory.THREAD_CLASSES`; one ``GROUP BY`` on the
    thread summary) and, with ``with_threads``, every summary (paged from the summary's index)."""
    counts = inventory.class_counts(rt.saver)
    summaries: list[inventory.ThreadSummary] = []
    cursor = None
    while with_threads:
        page, cursor = inventory.list_threads(rt.saver, limit=1000, cursor=cursor)
        summaries += page
        if not cursor:
            break
    return counts, summaries


def _agents(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live DeerFlow processes (not the dashboard's maintenance workers)."""
    return [r for r in rows if r["state"] == "live" and not is_maintenance(r)]


def _fleet_cadence(rows: list[dict[str, Any]]) -> int | None:
    """The cadence most live delta DeerFlow processes froze; without one, the maintenance workers'."""
    live = [r for r in rows if r["state"] == "live" and r["mode"] == "delta"]
    cadences = Counter(r["snapshot_frequency"] for r in live if not is_maintenance(r)) or Counter(
        r["snapshot_frequency"] for r in live)
    return cadences.most_common(1)[0][0] if cadences else None


def _proof(rt: DashboardRuntime, examples: list[inventory.CadenceInference]) -> tuple[dict[str, Any], ...]:
    """The threads that prove a cadence finding, linked, with their last write (the stored summary's
    ``updated_at``; one primary-key read each, at most the outliers' example limit)."""
    out = []
    for c in examples:
        summary = inventory.stored_summary(rt.saver, c.thread_id)
        out.append({"thread_id": c.thread_id, "url": thread_url("threads:detail", c.thread_id),
                    "cadences": list(c.exact),
                    "last_write": summary.updated_at.isoformat() if summary and summary.updated_at else None})
    return tuple(out)


def _cadence_findings(rt: DashboardRuntime, outliers: inventory.CadenceOutliers, fleet: int | None) -> list[Finding]:
    findings = []
    if outliers.multiple:
        findings.append(Finding(
            "warning", "thread_multiple_cadences", f"{plural(outliers.multiple, 'thread was,threads were')} "
            "written at several cadences",
            ", ".join(f"{c.thread_id}: {c.exact}" + (f", then ≥{c.lower_bound}" if c.lower_bound else "")
                      for c in outliers.multiple_examples),
            "Processes with different snapshot_frequency wrote these threads; align config.yaml everywhere.",
            _proof(rt, outliers.multiple_examples)))
    if fleet is not None and outliers.differs:
        findings.append(Finding(
            "warning", "thread_cadence_differs",
            f"{plural(outliers.differs, 'thread was,threads were')} written at a cadence other than "
            f"the fleet's {fleet}",
            ", ".join(f"{c.thread_id}: {c.exact}" for c in outliers.differs_examples),
            "A writer with another snapshot_frequency shares this database (the mismatch the runtime "
            "cannot see). The threads listed prove it: their last writes say when that writer ran; look for "
            "the process that ran then with another config.yaml.",
            _proof(rt, outliers.differs_examples)))
    return findings


def _writer_findings(writers: inventory.WriterFacts, rows: list[dict[str, Any]], hours: int) -> list[Finding]:
    findings = []
    live_modes = {r["mode"] for r in _agents(rows)}
    delta_written = writers.delta_marked + writers.counters_only
    if delta_written and live_modes == {"full"}:
        findings.append(Finding(
            "error", "delta_writes_full_fleet",
            f"delta checkpoints were written in the last {hours} h, but every registered process is in full mode",
            f"{plural(delta_written, 'delta checkpoint')} in {plural(writers.threads, 'thread')}",
            "An unregistered writer runs in delta mode. Register it (POST /api/processes/heartbeat) and align modes."))
    if writers.counters_only:
        findings.append(Finding(
            "warning", "markerless_writes", f"{writers.counters_only} delta checkpoints without DeerFlow's marker "
            f"were written in the last {hours} h", "counters_since_delta_snapshot present, marker absent",
            "A plain LangGraph writer uses DeltaChannel; DeerFlow's full-mode gate misses its snapshot checkpoints."))
    fleet = _fleet_cadence(rows)
    if len(writers.cadences) > 1 or (fleet is not None and writers.cadences and set(writers.cadences) != {fleet}):
        findings.append(Finding(
            "warning", "writer_cadences",
            f"writers in the last {hours} h used {'cadence' if len(writers.cadences) == 1 else 'cadences'} "
            f"{sorted(writers.cadences)}" + (f"; the fleet froze {fleet}" if fleet is not None else ""),
            ", ".join(f"{k}: {n} snapshots" for k, n in sorted(writers.cadences.items())),
            "Align checkpoint_delta.snapshot_frequency in every writer's config.yaml."))
    return findings


def _compact_item(legacy: LegacyEstimate) -> dict[str, Any]:
    """The "compact legacy threads" item of the delta checklist, with the bytes compaction would free."""
    text = (f"compact legacy threads: {plural(legacy.threads, 'thread')} in full storage (full and migrated) "
            f"{'holds' if legacy.threads == 1 else 'hold'} {size(legacy.bytes_total)}")
    if not legacy.threads:
        text = "compact legacy threads: none left in full storage"
    elif legacy.bytes_freed is None:
        text += "; run a compaction dry run of them for the bytes it would free"
    else:
        text += (f"; compacting them would free about {size(legacy.bytes_freed)} "
                 f"({legacy.freed_ratio:.0%}, the share the "
                 f"{plural(legacy.measured_threads, 'measured compaction')} freed)")
    return {"ok": legacy.threads == 0, "text": text, "link": reverse("threads:list") + "?mode=full",
            "threads": legacy.threads, "bytes_total": legacy.bytes_total, "bytes_freed": legacy.bytes_freed}


def _readiness(census: dict[str, int], rows: list[dict[str, Any]], writers: inventory.WriterFacts,
               legacy: LegacyEstimate | None = None) -> dict:
    live = _agents(rows)
    to_convert = census["delta"] + census["delta_counters_only"] + census["migrated"] + census["inconsistent"]
    delta_procs = [r["name"] for r in live if r["mode"] == "delta"]
    full_procs = [r["name"] for r in live if r["mode"] == "full"]
    to_full = [
        {"ok": to_convert == 0,
         "text": f"{plural(to_convert, 'thread still needs,threads still need')} conversion to full",
         "link": reverse("threads:list") + "?mode=delta"},
        {"ok": not delta_procs, "text": "processes to restart together with a full-mode config.yaml: "
         + (", ".join(delta_procs) or "none")},
        {"ok": writers.delta_marked + writers.counters_only == 0,
         "text": f"{writers.delta_marked + writers.counters_only} delta checkpoints written in the recent window"},
    ]
    to_delta = [
        {"ok": True, "text": "delta mode reads legacy full checkpoints transparently; no conversion needed"},
        {"ok": not full_procs, "text": "processes to restart together with a delta-mode config.yaml: "
         + (", ".join(full_procs) or "none")},
    ]
    if legacy is not None:  # optional: the space a switch alone never gives back
        to_delta.append(_compact_item(legacy))
    return {"to_full": to_full, "to_delta": to_delta}


#: Seconds the audit reuses its orphan figures (DeerFlow's ``threads_meta`` follows no summary version; orphans
#: change on the scale of their minimum idle age, a day by default).
ORPHAN_FACTS_TTL_S = 60
#: ``threads_meta`` rows without checkpoints listed by the audit (all are counted).
METADATA_LISTED = 50


def deerflow_orphans(rt: DashboardRuntime) -> dict[str, Any] | None:
    """DeerFlow's orphans beside the checkpoints, for the audit (cached :data:`ORPHAN_FACTS_TTL_S` seconds).

    Returns:
        ``{"min_idle_s", "threads", "checkpoints", "bytes": {"checkpoints", "blobs", "writes", "total"},
        "metadata_without_checkpoints": {"count", "threads": [{"thread_id", "title", "owner", "status",
        "updated_at"}]}}`` (counts, bytes, seconds; at most :data:`METADATA_LISTED` rows listed, most recently
        updated first), or ``None`` without DeerFlow's ``threads_meta`` (or SQL tables).
    """
    if not has_sql_tables(rt.saver):
        return None
    min_idle = settings.DASHBOARD_ORPHAN_MIN_IDLE_S
    key = fragment_key("audit-orphans", rt.config.database, min_idle)
    if (hit := cache.get(key)) is not None:
        return hit.get("orphans")
    reader = reader_for(rt.saver)
    tables = deerflow_tables.presence(reader)
    orphans = None
    summarized = summary_table.readable(rt.saver, refresh=False)
    totals = deerflow_tables.orphan_totals(reader, deerflow_tables.orphan_floor(min_idle), tables=tables,
                                           summary=summarized)
    if totals is not None:  # None: no threads_meta
        count, rows = deerflow_tables.metadata_without_checkpoints(reader, limit=METADATA_LISTED, tables=tables,
                                                                   summary=summarized)
        orphans = {
            "min_idle_s": min_idle, "threads": totals.threads, "checkpoints": totals.checkpoints,
            "bytes": {"checkpoints": totals.bytes_checkpoints, "blobs": totals.bytes_blobs,
                      "writes": totals.bytes_writes, "total": totals.bytes_total},
            "metadata_without_checkpoints": {"count": count, "threads": [
                {"thread_id": m.thread_id, "title": m.title, "owner": m.owner, "status": m.status,
                 "updated_at": m.updated_at.isoformat() if m.updated_at else None} for m in rows]},
        }
    cache.set(key, {"orphans": orphans}, ORPHAN_FACTS_TTL_S)
    return orphans


def _window_start(hours: int) -> str:
    # UUIDv6 ids sort by time: build the smallest id at the window's start.
    start = timezone.now() - dt.timedelta(hours=hours)
    ticks = int((start - dt.datetime(1582, 10, 15, tzinfo=dt.UTC)).total_seconds() * 10_000_000)
    hexid = f"{ticks >> 28:08x}{(ticks >> 12) & 0xFFFF:04x}6{ticks & 0xFFF:03x}" + "0" * 16
    return str(uuid.UUID(hexid))


def summary_facts(rt: DashboardRuntime, fleet: int | None, bound: int
                  ) -> tuple[dict[str, dict[str, int]] | None, inventory.CadenceOutliers]:
    """What the audit derives from the thread summary alone, cached under the summary's version.

    ``storage_by_class`` (one ``GROUP BY`` on the summary: it answers the census, the per-mode
    storage and the legacy estimate) and :func:`deerflow.inventory.census.cadence_outliers` (aggregates over
    ``dfa_thread_cadences``) cost a pass over 100k summary rows each at 100k threads. Both depend
    only on the summary tables, which change only in a transaction that bumps
    :func:`deerflow.inventory.summary.version` (after the freshness check, which may refresh them first), so
    they are computed once per version per process (Django's cache, :data:`AUDIT_FACTS_TTL_S` at most)
    and always recomputed while the summary cannot be used (live aggregates follow no version).

    Args:
        rt: the runtime (its saver and ``database:`` block key the cache).
        fleet: the fleet's cadence (``None``: no comparison).
        bound: the supersteps bound in force (count).

    Returns:
        ``(storage_by_class or None without SQL tables, cadence outliers)``.
    """
    version = summary_table.version(rt.saver) if has_sql_tables(rt.saver) else None
    key = fragment_key("audit-summary-facts", rt.config.database, version, fleet, bound)
    if version is not None and (hit := cache.get(key)) is not None:
        return hit
    by_class = inventory.storage_by_class(rt.saver) if has_sql_tables(rt.saver) else None
    facts = (by_class, inventory.cadence_outliers(rt.saver, fleet, bound))
    if version is not None and summary_table.version(rt.saver) == version:  # unchanged while we read
        cache.set(key, facts, AUDIT_FACTS_TTL_S)
    return facts


def _thread_row(thread_id: str, thread_class: str, inference: inventory.CadenceInference | None) -> dict[str, Any]:
    """One ``threads`` row of the audit (``GET /api/audit?threads=1`` and ``audit_modes --json --threads``).

    ``inferred_snapshot_frequency`` is the single cadence when the data proves one (``None`` when it
    proves several); ``cadences`` is the thread's ``cadences.by_thread`` entry (every exact cadence and
    the lower bound later counters prove) and ``multiple_cadences`` says the data proves more than one.
    """
    inference = inference or inventory.CadenceInference(thread_id)
    return {"thread_id": thread_id, "class": thread_class, "inferred_snapshot_frequency": inference.inferred,
            "inferred_exact": inference.is_exact, "cadences": inference.as_dict(),
            "multiple_cadences": inference.several}


def run_audit(rt: DashboardRuntime, *, live: LiveCheck | None = None, hours: int | None = None,
              with_threads: bool = False) -> Audit:
    """Compute the whole audit now (registry, live check, census, cadences, writers, readiness).

    Reads the thread summary, its per-thread cadence facts and its per-thread write facts
    by id bucket (:mod:`deerflow.inventory.summary.writes`; a few aggregate queries) and scans only
    the first bucket (about 7 minutes) of the recent-writes window; never scans
    ``checkpoints`` as a whole, so the page can refresh every few seconds on a database of any size.

    Args:
        rt: the frozen runtime (its saver is the checkpoint database).
        live: a finished live check (default: the newest one, :func:`~dashboard.fleet.control.recent_live_check`,
            never waited for; ``audit_modes`` passes one it broadcast now).
        hours: the recent-writes window (default ``DASHBOARD_WRITER_WINDOW_H``; hours).
        with_threads: also list every thread with its inferred cadence (``threads`` and
            ``cadences.by_thread``): one row per thread, for ``GET /api/audit?threads=1`` and
            ``audit_modes --threads``.
    """
    now = timezone.now()
    hours = hours or settings.DASHBOARD_WRITER_WINDOW_H
    rows = process_rows(now)
    live = live if live is not None else recent_live_check(settings.DASHBOARD_LIVE_CHECK_MAX_AGE_S)
    live_only = live_only_rows(live, rows) if live.supported else []
    serving = rows + live_only
    # Snapshots the supersteps bound may have caused prove no cadence: use the smallest bound in the fleet.
    bound = min([r["max_supersteps"] for r in serving if r["state"] == "live" and r["max_supersteps"]]
                or [max_supersteps()])
    fleet = _fleet_cadence(serving)
    by_class, outliers = summary_facts(rt, fleet, bound)
    if by_class is not None:
        counts = {c: by_class[c]["threads"] for c in inventory.THREAD_CLASSES}
        summaries = thread_census(rt, with_threads=True)[1] if with_threads else []
    else:
        counts, summaries = thread_census(rt, with_threads=with_threads)
    writers = inventory.recent_writer_facts(rt.saver, _window_start(hours), max_supersteps=bound)
    storage = inventory.mode_totals(by_class) if by_class is not None else {}
    full_procs = [r["name"] for r in _agents(serving) if r["mode"] == "full"]
    findings = (registry_findings(serving) + live_findings(live, rows, live_only)
                + readability_findings(full_procs, storage.get("delta", {}).get("threads", 0))
                + _cadence_findings(rt, outliers, fleet) + _writer_findings(writers, serving, hours))
    findings.sort(key=lambda f: SEVERITIES.index(f.severity))
    cadences: dict[str, Any] = {"fleet": fleet, "threads_with_several": outliers.multiple,
                                "threads_differing_from_fleet": outliers.differs}
    threads = []
    if with_threads:
        inferred = inventory.infer_cadences(rt.saver, max_supersteps=bound)
        cadences["by_thread"] = {k: v.as_dict() for k, v in sorted(inferred.items())}
        threads = [_thread_row(s.thread_id, s.thread_class, inferred.get(s.thread_id)) for s in summaries]
    return Audit(
        generated_at=now.isoformat(), processes=rows,
        live={"supported": live.supported, "error": live.error, "answered": sorted(live.replies),
              "unregistered": [r["name"] for r in live_only]},
        findings=findings, census=counts, cadences=cadences,
        writers={"window_hours": hours, **writers.as_dict()},
        readiness=_readiness(counts, serving, writers, legacy_estimate(rt, by_class) if by_class is not None else None),
        threads=threads, storage=storage,
        writers_as_of=writers.as_of if writers.source == "summary" else None,
        orphans=deerflow_orphans(rt),
        history_cache=history_cache(rt.config.database, serving),
    )
