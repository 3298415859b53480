"""The fleet audit's findings about processes: what the registry rows and the live check prove.

Spec, "Cross-process invariant": every process sharing one checkpoint database
must freeze the same mode and (in delta mode) the same cadence. The dashboard's
job workers are maintenance processes (:func:`is_maintenance`): they freeze
delta whatever the fleet runs, so only their cadence is compared (the cadence
their compactions write at), never their mode. Only live processes are
compared: a process whose heartbeat lease ran out drives no finding about
drift or a mode flip (it is ``gone``: an info finding). These findings
compare the registry's rows with each other, with each process's config.yaml
on disk, and with the live check's replies; no stored thread is read.
:func:`registry_findings` is cheap enough for the banner on every page.
:mod:`dashboard.fleet.audit` adds the findings the data proves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dashboard.celery import mode_queue
from dashboard.fleet.control import LiveCheck
from dashboard.formatting import plural, when_text

__all__ = ["MAINTENANCE_ROLES", "SEVERITIES", "Finding", "is_maintenance", "live_findings", "live_only_rows",
           "readability_findings", "registry_findings"]

SEVERITIES = ("error", "warning", "info")
#: Registry roles of maintenance processes: the dashboard's Celery workers (delta whatever the fleet runs).
MAINTENANCE_ROLES = ("worker",)


def is_maintenance(row: dict[str, Any]) -> bool:
    """Whether a registry row is a maintenance process (:data:`MAINTENANCE_ROLES`), not a DeerFlow process."""
    return row["role"] in MAINTENANCE_ROLES


@dataclass(frozen=True)
class Finding:
    """One audit finding: ``severity`` (error|warning|info), a machine ``code``, words for people."""

    severity: str
    code: str
    message: str
    evidence: str
    hint: str
    #: the threads that prove the finding, each ``{"thread_id", "url", "cadences", "last_write"}`` (ISO 8601 or
    #: ``None``): the page links them, whatever the age of their last write.
    threads: tuple[dict[str, Any], ...] = ()


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


def _agreement_findings(serving: list[dict[str, Any]], maintenance: list[dict[str, Any]]) -> list[Finding]:
    """Mode, cadence and config.yaml disagreements among serving processes.

    Processes are grouped by value; the group holding the first process
    (web processes first) is the reference, and every other group gets one
    finding naming all its members and all the reference's members, so no
    disagreement hides behind another (a full web process does not mask two
    delta processes with different cadences). ``maintenance`` rows (the
    dashboard's workers, always delta) join only the cadence and supersteps
    comparisons, after the DeerFlow processes.
    """
    findings: list[Finding] = []
    if serving:
        findings += _mode_findings(serving)
    delta = [r for r in serving if r["mode"] == "delta"] + maintenance
    findings += _cadence_findings(delta)
    findings += _bound_findings(serving + maintenance)
    findings += _config_findings(serving)
    return findings


def _mode_findings(serving: list[dict[str, Any]]) -> list[Finding]:
    findings: list[Finding] = []
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
    return findings


def _cadence_findings(delta: list[dict[str, Any]]) -> list[Finding]:
    findings: list[Finding] = []
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
    return findings


def _bound_findings(rows: list[dict[str, Any]]) -> list[Finding]:
    findings: list[Finding] = []
    by_bound = _groups([r for r in rows if r["max_supersteps"] is not None], lambda r: r["max_supersteps"])
    if len(by_bound) > 1:
        findings.append(Finding(
            "warning", "max_supersteps_differs",
            "processes see different LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT values: "
            + "; ".join(f"{bound}: {_names(members)}" for bound, members in by_bound.items()),
            "the bound forces a snapshot after that many supersteps without one",
            "Set LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT the same way for every process (or nowhere)."))
    return findings


def _config_findings(serving: list[dict[str, Any]]) -> list[Finding]:
    findings: list[Finding] = []
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
    live = sorted((r for r in rows if r["state"] == "live"), key=lambda r: (order.get(r["role"], 3), r["name"]))
    findings += _agreement_findings([r for r in live if not is_maintenance(r)], [r for r in live if is_maintenance(r)])
    for r in rows:
        findings += _lifecycle_findings(r)
    for r in live:
        findings += _config_file_findings(r)
        for q in r["queues"]:
            if q.startswith("checkpoints.") and q != mode_queue(r["mode"]):
                findings.append(Finding(
                    "error", "queue_mode_mismatch", f"{r['name']} ({r['mode']}) consumes {q}",
                    f"queues: {', '.join(r['queues'])}",
                    f"A {r['mode']}-mode worker must consume only {mode_queue(r['mode'])}; fix its -Q option."))
    return findings


def _lifecycle_findings(r: dict[str, Any]) -> list[Finding]:
    """Info about a process whose lease ran out: restarted (superseded) or gone; never a drift or a flip."""
    if r["state"] == "gone":
        return [Finding(
            "info", "process_gone",
            f"{r['name']} is gone: no heartbeat since {when_text(r['last_heartbeat'])} and no clean stop",
            f"its lease ({r.get('lease_s', 0):g} s) ran out; a process that stops cleanly deregisters",
            "Nothing serves from it any more. If it should be running, look at its host and log; "
            "otherwise dismiss it on the audit page.")]
    if r["state"] == "superseded":
        return [Finding(
            "info", "restarted_process", f"{r['name']} was restarted: {r['superseded_by']} replaced it",
            f"same host, role and config.yaml, started later; last heartbeat {when_text(r['last_heartbeat'])}",
            "Nothing to fix: dismiss the old process on the audit page.")]
    return []


def _config_file_findings(r: dict[str, Any]) -> list[Finding]:
    """A live process's config.yaml on disk against what it froze: unreadable, drifted, or edited.

    A maintenance process froze delta whatever mode the file names: only a cadence change drifts it.
    """
    if r["disk_error"]:
        # The runtime's drift check keeps serving the frozen values when the file
        # cannot be read; only a restart would fail.
        return [Finding(
            "warning", "config_unreadable", f"{r['name']}'s config.yaml cannot be read any more",
            r["disk_error"],
            "The process keeps serving with its frozen mode and cadence, but would not start again: "
            "fix the file before restarting anything.")]
    maintenance = is_maintenance(r)
    if r["disk_mode"] and r["disk_mode"] != r["mode"] and not maintenance:
        drift = f"is mid mode-flip: checkpoint_channel_mode {r['mode']} (frozen) ≠ {r['disk_mode']} (on disk)"
    elif ((r["disk_mode"] == "delta" or (maintenance and r["disk_mode"])) and r["disk_snapshot_frequency"] is not None
          and r["disk_snapshot_frequency"] != r["snapshot_frequency"]):
        drift = (f"is mid cadence change: snapshot_frequency {r['snapshot_frequency']} (frozen) ≠ "
                 f"{r['disk_snapshot_frequency']} (on disk)")
    elif r["disk_sha256"] and r["disk_sha256"] != r["config_sha256"]:
        return [Finding(
            "warning", "config_edited", f"{r['name']}'s config.yaml changed on disk (mode and cadence unchanged)",
            f"sha256 {r['config_sha256'][:12]} (frozen) ≠ {r['disk_sha256'][:12]} (on disk)",
            "Restart the process at a convenient time so it runs what the file says.")]
    else:
        return []
    answer = ("It refuses new thread tasks (503) until restarted" if maintenance
              else "It answers 503 to thread reads until restarted")
    return [Finding(
        "error", "config_drift", f"{r['name']} {drift}", f"{r['config_path']} changed after the process froze",
        f"{answer}: restart it (and every process sharing the database).")]


def live_only_rows(live: LiveCheck, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def live_findings(live: LiveCheck, rows: list[dict[str, Any]], live_only: list[dict[str, Any]]) -> list[Finding]:
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
    processes = plural(len(full_processes), "full-mode process,full-mode processes").split(" ", 1)[1]
    return [Finding(
        "error", "full_fleet_unreadable_threads",
        f"{plural(delta_threads, 'delta thread')} cannot be read by the {processes} {names}: "
        f"{'it answers' if len(full_processes) == 1 else 'they answer'} 409",
        f"{plural(delta_threads, 'thread')} stored in delta mode; "
        f"{plural(len(full_processes), 'live full-mode process,live full-mode processes')}",
        "Convert those threads to full (Threads, mode delta, Convert to full), or run every process in delta mode.")]
