"""The fleet audit: do all processes agree on mode and cadence, and does the data agree with them?

Spec, "Cross-process invariant": the mode and the cadence must match in every
process sharing one checkpoint database; each process freezes on its own and
nothing reconciles a divergent one; a cadence mismatch is undetectable by the
runtime. :func:`run_audit` compares the registry, a live check and the data
(census, inferred cadences, recent writes) and returns findings, each with a
severity, the evidence and a remediation hint.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone

from dashboard.celery import mode_queue
from dashboard.fleet.control import LiveCheck, live_check
from dashboard.fleet.facts import max_supersteps
from dashboard.fleet.processes import process_rows
from dashboard.jobs.compaction import LegacyEstimate, legacy_estimate
from dashboard.runtime import DashboardRuntime
from dashboard.threads.fragments import fragment_key
from deerflow import census as census_mod
from deerflow import inventory
from deerflow import summary as summary_table
from deerflow.sqlread import has_sql_tables

__all__ = ["AUDIT_FACTS_TTL_S", "Audit", "Finding", "readability_findings", "registry_findings", "run_audit",
           "summary_facts", "thread_census"]

SEVERITIES = ("error", "warning", "info")
#: Seconds the audit's summary-derived facts stay cached under one summary version (:func:`summary_facts`).
AUDIT_FACTS_TTL_S = 600


@dataclass(frozen=True)
class Finding:
    """One audit finding: ``severity`` (error|warning|info), a machine ``code``, words for people."""

    severity: str
    code: str
    message: str
    evidence: str
    hint: str


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
        }
        if with_threads:
            out["threads"] = self.threads
        return out


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    diffs = []
    if a["mode"] != b["mode"]:
        diffs.append(f"checkpoint_channel_mode {a['mode']} ≠ {b['mode']}")
    if a["mode"] == b["mode"] == "delta" and a["snapshot_frequency"] != b["snapshot_frequency"]:
        diffs.append(f"snapshot_frequency {a['snapshot_frequency']} ≠ {b['snapshot_frequency']}")
    return diffs


def _names(rows: list[dict[str, Any]]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = [r["name"] for r in rows]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _verb(rows: list[dict[str, Any]]) -> str:
    return "differs" if len(rows) == 1 else "differ"


def _froze(rows: list[dict[str, Any]]) -> str:
    return "; ".join(f"{r['name']} froze {r['mode']}/{r['snapshot_frequency']} from {r['config_path'] or '?'}"
                     for r in rows)


def _groups(rows: list[dict[str, Any]], key) -> dict[Any, list[dict[str, Any]]]:
    """``rows`` grouped by ``key(row)``, groups and members in first-seen order."""
    out: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def _agreement_findings(serving: list[dict[str, Any]]) -> list[Finding]:
    """Mode, cadence and config.yaml disagreements among serving processes.

    Processes are grouped by value; the group holding the first process
    (web processes first) is the reference, and every other group gets one
    finding naming all its members and all the reference's members, so no
    disagreement hides behind another (a full web process does not mask two
    delta workers with different cadences).
    """
    findings: list[Finding] = []
    if not serving:
        return findings
    by_mode = _groups(serving, lambda r: r["mode"])
    ref_mode = serving[0]["mode"]
    for mode, members in by_mode.items():
        if mode == ref_mode:
            continue
        ref = by_mode[ref_mode]
        findings.append(Finding(
            "error", "mode_mismatch",
            f"{_names(members)} {_verb(members)} from {_names(ref)} in: checkpoint_channel_mode {mode} ≠ {ref_mode}",
            _froze(members + ref),
            "Give every process the same config.yaml and restart them together."))
    delta = [r for r in serving if r["mode"] == "delta"]
    by_cadence = _groups(delta, lambda r: r["snapshot_frequency"])
    if len(by_cadence) > 1:
        ref_k = delta[0]["snapshot_frequency"]
        ref = by_cadence[ref_k]
        for k, members in by_cadence.items():
            if k == ref_k:
                continue
            findings.append(Finding(
                "error", "cadence_mismatch",
                f"{_names(members)} {_verb(members)} from {_names(ref)} in: snapshot_frequency {k} ≠ {ref_k}",
                _froze(members + ref),
                "Give every process the same config.yaml and restart them together: the runtime cannot see "
                "this mismatch, each process snapshots threads at its own cadence."))
    by_bound = _groups([r for r in serving if r["max_supersteps"] is not None], lambda r: r["max_supersteps"])
    if len(by_bound) > 1:
        findings.append(Finding(
            "warning", "max_supersteps_differs",
            "processes see different LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT values: "
            + "; ".join(f"{bound}: {_names(members)}" for bound, members in by_bound.items()),
            "the bound forces a snapshot after that many supersteps without one",
            "Set LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT the same way for every process (or nowhere)."))
    agreeing = _groups(serving, lambda r: (r["mode"], r["snapshot_frequency"] if r["mode"] == "delta" else None))
    for members in agreeing.values():
        # An outside process that sent no config hash is unknown, not different.
        by_sha = _groups([r for r in members if r["config_sha256"]], lambda r: r["config_sha256"])
        if len(by_sha) < 2:
            continue
        (ref_sha, ref), *others = by_sha.items()
        for sha, group in others:
            findings.append(Finding(
                "warning", "config_differs",
                f"{_names(group)} and {_names(ref)} agree on mode and cadence but read different config.yaml files",
                f"sha256 {sha[:12]} ({', '.join(sorted({r['config_path'] for r in group}))}) ≠ "
                f"{ref_sha[:12]} ({', '.join(sorted({r['config_path'] for r in ref}))})",
                "Identical config.yaml files are a deployment requirement; deploy one file everywhere."))
    return findings


def _process_findings(rows: list[dict[str, Any]]) -> list[Finding]:
    findings: list[Finding] = []
    order = {"web": 0, "worker": 1, "external": 2}
    serving = sorted((r for r in rows if r["state"] == "live"), key=lambda r: (order.get(r["role"], 3), r["name"]))
    findings += _agreement_findings(serving)
    for r in rows:
        if r["state"] == "stale":
            findings.append(Finding(
                "warning", "stale_process", f"{r['name']} missed three heartbeats",
                f"last heartbeat {r['last_heartbeat']}",
                "Check whether the process is alive; dismiss it on the audit page once you know it is gone "
                "(a process silent for 24 h counts as gone: no more warning)."))
        if r["state"] == "superseded":
            findings.append(Finding(
                "info", "restarted_process", f"{r['name']} was restarted: {r['superseded_by']} replaced it",
                f"same host, role and config.yaml, started later; last heartbeat {r['last_heartbeat']}",
                "Nothing to fix: dismiss the old process on the audit page."))
        if r["state"] != "live":
            continue
        drift = []
        if r["disk_error"]:
            # The runtime's drift check keeps serving the frozen values when the file
            # cannot be read; only a restart would fail.
            findings.append(Finding(
                "warning", "config_unreadable", f"{r['name']}'s config.yaml cannot be read any more",
                r["disk_error"],
                "The process keeps serving with its frozen mode and cadence, but would not start again: "
                "fix the file before restarting anything."))
        elif r["disk_mode"] and r["disk_mode"] != r["mode"]:
            drift.append(f"checkpoint_channel_mode {r['mode']} (frozen) ≠ {r['disk_mode']} (on disk)")
        elif (r["disk_mode"] == "delta" and r["disk_snapshot_frequency"] is not None
              and r["disk_snapshot_frequency"] != r["snapshot_frequency"]):
            drift.append(f"snapshot_frequency {r['snapshot_frequency']} (frozen) ≠ "
                         f"{r['disk_snapshot_frequency']} (on disk)")
        if drift:
            findings.append(Finding(
                "error", "config_drift", f"{r['name']} is mid mode-flip: {'; '.join(drift)}",
                f"{r['config_path']} changed after the process froze",
                "It answers 503 to thread reads until restarted: restart it (and every process sharing the database)."))
        elif r["disk_sha256"] and r["disk_sha256"] != r["config_sha256"]:
            findings.append(Finding(
                "warning", "config_edited", f"{r['name']}'s config.yaml changed on disk (mode and cadence unchanged)",
                f"sha256 {r['config_sha256'][:12]} (frozen) ≠ {r['disk_sha256'][:12]} (on disk)",
                "Restart the process at a convenient time so it runs what the file says."))
        for q in r["queues"]:
            if q.startswith("checkpoints.") and q != mode_queue(r["mode"]):
                findings.append(Finding(
                    "error", "queue_mode_mismatch", f"{r['name']} ({r['mode']}) consumes {q}",
                    f"queues: {', '.join(r['queues'])}",
                    f"A {r['mode']}-mode worker must consume only {mode_queue(r['mode'])}; fix its -Q option."))
    return findings


def _live_only_rows(live: LiveCheck, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Workers that answered the live check but have no live registry row, as rows for the findings.

    Such a worker serves (it consumes tasks) although its heartbeats do not
    reach this database; its mode and cadence still have to agree.
    """
    registered = {r["instance_id"] for r in rows if r["state"] == "live"}
    out = []
    for node, facts in sorted(live.replies.items()):
        if facts.get("instance_id") and facts["instance_id"] in registered:
            continue
        out.append({
            "name": node, "instance_id": facts.get("instance_id") or "", "role": "worker",
            "host": facts.get("host", ""), "pid": facts.get("pid"), "state": "live",
            "mode": facts.get("mode", ""), "snapshot_frequency": facts.get("snapshot_frequency"),
            "config_path": facts.get("config_path", ""), "config_sha256": facts.get("config_sha256", ""),
            "max_supersteps": facts.get("max_supersteps"), "versions": facts.get("versions") or {},
            "queues": facts.get("queues") or [], "started_at": None, "last_heartbeat": None,
            "disk_sha256": facts.get("disk_sha256", ""), "disk_mode": facts.get("disk_mode", ""),
            "disk_snapshot_frequency": facts.get("disk_snapshot_frequency"),
            "disk_error": facts.get("disk_error", ""),
        })
    return out


def _live_findings(live: LiveCheck, rows: list[dict[str, Any]], live_only: list[dict[str, Any]]) -> list[Finding]:
    if not live.supported:
        return [Finding("info", "live_check_unavailable", "Live check not available", live.error or "",
                        "The audit relies on heartbeats only.")]
    findings = []
    by_instance = {facts.get("instance_id"): (node, facts) for node, facts in live.replies.items()}
    for r in rows:
        if r["role"] != "worker" or r["state"] != "live":
            continue
        if r["instance_id"] not in by_instance:
            findings.append(Finding("warning", "worker_silent", f"{r['name']} did not answer the live check",
                                    f"no reply within {live.timeout_s:.1f} s",
                                    "The worker may be busy, hung, or on another broker; check its log."))
            continue
        node, facts = by_instance[r["instance_id"]]
        diffs = _differences(facts, r)
        if diffs:
            findings.append(Finding("error", "live_differs", f"{node} answers differently from its registry row",
                                    "; ".join(diffs), "Restart the worker so its registry row is rewritten."))
    for r in live_only:
        findings.append(Finding(
            "warning", "worker_unregistered", f"{r['name']} answered the live check but has no live registry row",
            f"{r['name']} froze {r['mode']}/{r['snapshot_frequency']} from {r['config_path'] or '?'}",
            "Its heartbeats do not reach this dashboard's database: check its DASHBOARD_DATABASE_URL "
            "(it is included in the mode and cadence comparisons above)."))
    return findings


def registry_findings(rows: list[dict[str, Any]]) -> list[Finding]:
    """The findings the registry alone proves (mode, cadence and config agreement, drift, unreadable
    config.yaml, stale processes): no live check, no data read. One small query's worth of work, so the
    banner on every page can use it."""
    return _process_findings(rows)


def readability_findings(full_processes: list[str], delta_threads: int) -> list[Finding]:
    """The fleet cannot read some threads: live full-mode processes while delta threads are stored.

    Args:
        full_processes: names of the live processes frozen in full mode.
        delta_threads: threads whose storage is delta (``mode == "delta"`` in the thread summary, count);
            a full-mode process answers 409 for each of them (spec: full mode refuses delta lineage).
    """
    if not full_processes or not delta_threads:
        return []
    names = (full_processes[0] if len(full_processes) == 1
             else f"{', '.join(full_processes[:-1])} and {full_processes[-1]}")
    return [Finding(
        "error", "full_fleet_unreadable_threads",
        f"{delta_threads:,} delta thread(s) cannot be read by the full-mode process(es) {names}: they answer 409",
        f"{delta_threads:,} thread(s) stored in delta mode; {len(full_processes)} live full-mode process(es)",
        "Convert those threads to full (Threads, mode delta, Convert to full), or run every process in delta mode.")]


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


def _fleet_cadence(rows: list[dict[str, Any]]) -> int | None:
    cadences = Counter(r["snapshot_frequency"] for r in rows if r["state"] == "live" and r["mode"] == "delta")
    return cadences.most_common(1)[0][0] if cadences else None


def _cadence_findings(outliers: census_mod.CadenceOutliers, fleet: int | None) -> list[Finding]:
    findings = []
    if outliers.multiple:
        findings.append(Finding(
            "warning", "thread_multiple_cadences", f"{outliers.multiple} thread(s) were written at several cadences",
            ", ".join(f"{c.thread_id}: {c.exact}" + (f", then ≥{c.lower_bound}" if c.lower_bound else "")
                      for c in outliers.multiple_examples),
            "Processes with different snapshot_frequency wrote these threads; align config.yaml everywhere."))
    if fleet is not None and outliers.differs:
        findings.append(Finding(
            "warning", "thread_cadence_differs",
            f"{outliers.differs} thread(s) were written at a cadence other than the fleet's {fleet}",
            ", ".join(f"{c.thread_id}: {c.exact}" for c in outliers.differs_examples),
            "A writer with another snapshot_frequency shares this database (the mismatch the runtime "
            "cannot see). Find it with the writers section below."))
    return findings


def _writer_findings(writers: census_mod.WriterFacts, rows: list[dict[str, Any]], hours: int) -> list[Finding]:
    findings = []
    live_modes = {r["mode"] for r in rows if r["state"] == "live"}
    delta_written = writers.delta_marked + writers.counters_only
    if delta_written and live_modes == {"full"}:
        findings.append(Finding(
            "error", "delta_writes_full_fleet",
            f"delta checkpoints were written in the last {hours} h, but every registered process is in full mode",
            f"{delta_written} delta checkpoints in {writers.threads} thread(s)",
            "An unregistered writer runs in delta mode. Register it (POST /api/processes/heartbeat) and align modes."))
    if writers.counters_only:
        findings.append(Finding(
            "warning", "markerless_writes", f"{writers.counters_only} delta checkpoints without DeerFlow's marker "
            f"were written in the last {hours} h", "counters_since_delta_snapshot present, marker absent",
            "A plain LangGraph writer uses DeltaChannel; DeerFlow's full-mode gate misses its snapshot checkpoints."))
    fleet = _fleet_cadence(rows)
    if len(writers.cadences) > 1 or (fleet is not None and writers.cadences and set(writers.cadences) != {fleet}):
        findings.append(Finding(
            "warning", "writer_cadences", f"writers in the last {hours} h used cadence(s) "
            f"{sorted(writers.cadences)}" + (f"; the fleet froze {fleet}" if fleet is not None else ""),
            ", ".join(f"{k}: {n} snapshots" for k, n in sorted(writers.cadences.items())),
            "Align checkpoint_delta.snapshot_frequency in every writer's config.yaml."))
    return findings


def _compact_item(legacy: LegacyEstimate) -> dict[str, Any]:
    """The "compact legacy threads" item of the delta checklist, with the bytes compaction would free."""
    text = (f"compact legacy threads: {legacy.threads} thread(s) in full storage (full and migrated) hold "
            f"{filesizeformat(legacy.bytes_total)}")
    if not legacy.threads:
        text = "compact legacy threads: none left in full storage"
    elif legacy.bytes_freed is None:
        text += "; run a compaction dry run of them for the bytes it would free"
    else:
        text += (f"; compacting them would free about {filesizeformat(legacy.bytes_freed)} "
                 f"({legacy.freed_ratio:.0%}, the share the {legacy.measured_threads} measured compaction(s) freed)")
    return {"ok": legacy.threads == 0, "text": text, "link": reverse("threads:list") + "?mode=full",
            "threads": legacy.threads, "bytes_total": legacy.bytes_total, "bytes_freed": legacy.bytes_freed}


def _readiness(census: dict[str, int], rows: list[dict[str, Any]], writers: census_mod.WriterFacts,
               legacy: LegacyEstimate | None = None) -> dict:
    live = [r for r in rows if r["state"] == "live"]
    to_convert = census["delta"] + census["delta_counters_only"] + census["migrated"] + census["inconsistent"]
    delta_procs = [r["name"] for r in live if r["mode"] == "delta"]
    full_procs = [r["name"] for r in live if r["mode"] == "full"]
    to_full = [
        {"ok": to_convert == 0, "text": f"{to_convert} thread(s) still need conversion to full",
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
    if legacy is not None:  # optional: the space a switch alone never gives back (issue 11, item 4)
        to_delta.append(_compact_item(legacy))
    return {"to_full": to_full, "to_delta": to_delta}


def _window_start(hours: int) -> str:
    # UUIDv6 ids sort by time: build the smallest id at the window's start.
    start = timezone.now() - dt.timedelta(hours=hours)
    ticks = int((start - dt.datetime(1582, 10, 15, tzinfo=dt.UTC)).total_seconds() * 10_000_000)
    hexid = f"{ticks >> 28:08x}{(ticks >> 12) & 0xFFFF:04x}6{ticks & 0xFFF:03x}" + "0" * 16
    return str(uuid.UUID(hexid))


def summary_facts(rt: DashboardRuntime, fleet: int | None, bound: int
                  ) -> tuple[dict[str, dict[str, int]] | None, census_mod.CadenceOutliers]:
    """What the audit derives from the thread summary alone, cached under the summary's version.

    ``storage_by_class`` (one ``GROUP BY`` on the summary: it answers the census, the per-mode
    storage and the legacy estimate) and :func:`deerflow.census.cadence_outliers` (aggregates over
    ``dfa_thread_cadences``) cost a pass over 100k summary rows each at 100k threads. Both depend
    only on the summary tables, which change only in a transaction that bumps
    :func:`deerflow.summary.version` (after the freshness check, which may refresh them first), so
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
    facts = (by_class, census_mod.cadence_outliers(rt.saver, fleet, bound))
    if version is not None and summary_table.version(rt.saver) == version:  # unchanged while we read
        cache.set(key, facts, AUDIT_FACTS_TTL_S)
    return facts


def run_audit(rt: DashboardRuntime, *, live: LiveCheck | None = None, hours: int | None = None,
              with_threads: bool = False) -> Audit:
    """Compute the whole audit now (registry, live check, census, cadences, writers, readiness).

    Reads the thread summary, its per-thread cadence facts and its per-thread write facts
    by id bucket (:mod:`deerflow.summary.writes`; a few aggregate queries) and scans only
    the first bucket (about 7 minutes) of the recent-writes window; never scans
    ``checkpoints`` as a whole, so the page can refresh every few seconds on a database of any size.

    Args:
        rt: the frozen runtime (its saver is the checkpoint database).
        live: a finished live check (default: broadcast one now).
        hours: the recent-writes window (default ``DASHBOARD_WRITER_WINDOW_H``; hours).
        with_threads: also list every thread with its inferred cadence (``threads`` and
            ``cadences.by_thread``): one row per thread, for ``GET /api/audit?threads=1`` and
            ``audit_modes --threads``.
    """
    now = timezone.now()
    hours = hours or settings.DASHBOARD_WRITER_WINDOW_H
    rows = process_rows(now)
    live = live if live is not None else live_check()
    live_only = _live_only_rows(live, rows) if live.supported else []
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
    writers = census_mod.recent_writer_facts(rt.saver, _window_start(hours), max_supersteps=bound)
    storage = inventory.mode_totals(by_class) if by_class is not None else {}
    full_procs = [r["name"] for r in serving if r["state"] == "live" and r["mode"] == "full"]
    findings = (_process_findings(serving) + _live_findings(live, rows, live_only)
                + readability_findings(full_procs, storage.get("delta", {}).get("threads", 0))
                + _cadence_findings(outliers, fleet) + _writer_findings(writers, serving, hours))
    findings.sort(key=lambda f: SEVERITIES.index(f.severity))
    cadences: dict[str, Any] = {"fleet": fleet, "threads_with_several": outliers.multiple,
                                "threads_differing_from_fleet": outliers.differs}
    threads = []
    if with_threads:
        inferred = census_mod.infer_cadences(rt.saver, max_supersteps=bound)
        cadences["by_thread"] = {k: {"exact": v.exact, "lower_bound": v.lower_bound}
                                 for k, v in sorted(inferred.items())}
        threads = [{"thread_id": s.thread_id, "class": s.thread_class,
                    "inferred_snapshot_frequency": inferred[s.thread_id].inferred if s.thread_id in inferred else None,
                    "inferred_exact": inferred[s.thread_id].is_exact if s.thread_id in inferred else False}
                   for s in summaries]
    return Audit(
        generated_at=now.isoformat(), processes=rows,
        live={"supported": live.supported, "error": live.error, "answered": sorted(live.replies),
              "unregistered": [r["name"] for r in live_only]},
        findings=findings, census=counts, cadences=cadences,
        writers={"window_hours": hours, **writers.as_dict()},
        readiness=_readiness(counts, serving, writers, legacy_estimate(rt, by_class) if by_class is not None else None),
        threads=threads, storage=storage,
        writers_as_of=writers.as_of if writers.source == "summary" else None,
    )
