"""Cadence inference and writer facts from checkpoint metadata (no materialization).

The spec says a cadence mismatch between processes "is undetectable by the
runtime" because the cadence is not stamped into checkpoints. It is visible
in the data, though: LangGraph writes ``counters_since_delta_snapshot
["messages"] = [updates, supersteps]`` on every non-snapshot delta checkpoint
and drops it on the checkpoint that took a ``_DeltaSnapshot``. A superstep
adds one to ``supersteps`` (and to ``updates`` when it wrote ``messages``) and
snapshots when ``updates`` reaches ``snapshot_frequency`` (or ``supersteps``
reaches ``DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT``), so for a snapshot
checkpoint ``S`` whose parent ``P`` carries ``[u, s]``::

    snapshot_frequency == u + 1        (unless s + 1 >= the supersteps bound)

Two kinds of counter-less children are not cadence snapshots and are left out:

* a child without the DeerFlow marker under a marked parent: a full-mode
  process wrote onto a delta thread (DeerFlow stamps the marker on every
  delta write, snapshots included);
* a child that is not its parent's first child: a run started from a
  checkpoint that already had children (a fork, a replay), where LangGraph
  forces a snapshot of the channels it writes whatever the counters say.

Other forced snapshots (an ``Overwrite`` write, a resume that drops loaded
writes) look exactly like cadence snapshots in the metadata and would show as
an extra, smaller exact value.

Before any snapshot only a lower bound is known: ``snapshot_frequency > max(u)``.
Several distinct exact values mean several processes wrote the thread at
different cadences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deerflow.inventory import summary as summary_table
from deerflow.inventory.summary.cadences import counter_expr, snapshot_sql, thread_snapshot_sql
from deerflow.inventory.summary.writes import bucket_bounds
from deerflow.storage.sqlread import checkpoint_time, reader_for, table_exists

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["CadenceInference", "CadenceOutliers", "WriterFacts", "cadence_outliers", "infer_cadences",
           "recent_writer_facts"]

#: LangGraph's default ``DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT``.
DEFAULT_MAX_SUPERSTEPS = 5000


@dataclass
class CadenceInference:
    """What the metadata says about the cadence(s) that wrote one thread.

    Attributes:
        thread_id: the thread.
        exact: distinct cadences proven by snapshot checkpoints (sorted counts).
        lower_bound: smallest cadence consistent with the counters seen when no
            snapshot proves an exact value (count), else ``None``.
        snapshots: snapshot checkpoints seen (count).
    """

    thread_id: str
    exact: list[int] = field(default_factory=list)
    lower_bound: int | None = None
    snapshots: int = 0

    @property
    def inferred(self) -> int | None:
        """The single inferred cadence: the exact one if unique (and no later counters exceed it), else the
        lower bound when nothing is exact, else ``None``."""
        if len(self.exact) == 1 and self.lower_bound is None:
            return self.exact[0]
        return None if self.exact else self.lower_bound

    @property
    def is_exact(self) -> bool:
        """True when exactly one cadence is proven and no counter proves another."""
        return len(self.exact) == 1 and self.lower_bound is None

    @property
    def several(self) -> bool:
        """True when the data proves more than one cadence: several exact ones, or counters that grew past
        every proven one (a cadence change after an exact proof, e.g. 10 then 1,000)."""
        return len(self.exact) > 1 or bool(self.exact and self.lower_bound is not None)

    def as_dict(self) -> dict[str, Any]:
        """``{"exact": [cadence, ...], "lower_bound": cadence or None}``: the audit's JSON of a thread."""
        return {"exact": list(self.exact), "lower_bound": self.lower_bound}

    def describe(self) -> str:
        """Every cadence the data proves, then the lower bound later counters prove: ``"10, then ≥41"``."""
        parts = [", ".join(str(k) for k in self.exact)] if self.exact else []
        if self.lower_bound is not None:
            parts.append(f"≥{self.lower_bound}")
        return ", then ".join(parts) if parts else "unknown"


def _cadence_of(row: dict[str, Any], max_supersteps: int) -> int | None:
    """``u + 1`` for a snapshot row, ``None`` when the supersteps bound may have caused it."""
    if row["s"] is not None and int(row["s"]) + 1 >= max_supersteps:
        return None
    return int(row["u"]) + 1


def _summary_cadences_ready(saver: BaseCheckpointSaver[Any]) -> bool:
    """True when ``dfa_thread_cadences`` is readable and filled by a refresh since it was (re)built."""
    if not summary_table.readable(saver):
        return False
    r = reader_for(saver)
    return table_exists(r, "dfa_thread_cadences") and r.query(
        "SELECT watermark FROM dfa_summary_state WHERE id = 1")[0]["watermark"] is not None


def infer_cadences(saver: BaseCheckpointSaver[Any], thread_ids: list[str] | None = None,
                   max_supersteps: int = DEFAULT_MAX_SUPERSTEPS, *,
                   use_summary: bool = True) -> dict[str, CadenceInference]:
    """Infer each delta thread's snapshot cadence from its checkpoint metadata.

    Args:
        saver: SQLite or Postgres saver.
        thread_ids: restrict to these threads (default: every thread).
        max_supersteps: the supersteps bound in force (snapshots caused by it are ignored).
        use_summary: read the per-thread facts the summary refresh keeps
            (:mod:`deerflow.inventory.summary.cadences`) when they are available, instead
            of scanning ``checkpoints`` (same result, as of the last refresh).

    Returns:
        ``{thread_id: CadenceInference}`` for threads with any counters.
    """
    if thread_ids is not None and not thread_ids:
        return {}
    r = reader_for(saver)
    if use_summary and _summary_cadences_ready(saver):
        return _from_summary(r, thread_ids, max_supersteps)
    return _from_scan(r, thread_ids, max_supersteps)


def _from_summary(r: Any, thread_ids: list[str] | None, max_supersteps: int) -> dict[str, CadenceInference]:
    """:func:`infer_cadences` from ``dfa_thread_cadences`` (the caller checked it is ready)."""
    out: dict[str, CadenceInference] = {}
    where, params = "", []
    if thread_ids is not None:
        where, params = f"WHERE thread_id IN ({', '.join('?' for _ in thread_ids)})", list(thread_ids)
    for row in r.query("SELECT thread_id, kind, cadence, snapshots, min_supersteps FROM dfa_thread_cadences "
                       f"{where} ORDER BY thread_id, kind, cadence", params):
        inf = out.setdefault(row["thread_id"], CadenceInference(row["thread_id"]))
        if row["kind"] == "bound":
            inf.lower_bound = int(row["cadence"])
            continue
        inf.snapshots += int(row["snapshots"])
        if int(row["min_supersteps"]) + 1 < max_supersteps:
            inf.exact.append(int(row["cadence"]))
    return _settled(out)


def _from_scan(r: Any, thread_ids: list[str] | None, max_supersteps: int) -> dict[str, CadenceInference]:
    """:func:`infer_cadences` by scanning ``checkpoints`` (their metadata only)."""
    out: dict[str, CadenceInference] = {}
    where, params = "", []
    if thread_ids is not None:
        where = f"AND c.thread_id IN ({', '.join('?' for _ in thread_ids)})"
        params = list(thread_ids)
    u_c = counter_expr(r, "c", 0)
    bounds_sql = (f"SELECT c.thread_id, MAX({u_c}) AS max_updates FROM checkpoints c "
                  f"WHERE {r.counters('c')} {where} GROUP BY c.thread_id")
    if thread_ids is None:
        for row in r.query(bounds_sql, params):
            _add_bound(out, row)
        for row in r.query(snapshot_sql(r, where), params):
            _add_snapshot(out, row, max_supersteps)
        return _settled(out)
    # Named threads (the thread page): one round trip, and the one-pass sibling ranking.
    for row in r.query(f"SELECT thread_id, 1 AS bound, max_updates, NULL AS u, NULL AS s FROM ({bounds_sql}) b "
                       f"UNION ALL SELECT thread_id, 0, NULL, u, s FROM ({thread_snapshot_sql(r, where)}) sn",
                       params + params):
        if row["bound"]:
            _add_bound(out, row)
        else:
            _add_snapshot(out, row, max_supersteps)
    return _settled(out)


def _add_bound(out: dict[str, CadenceInference], row: dict[str, Any]) -> None:
    """A thread's ``max(u) + 1`` lower bound (row: ``thread_id, max_updates``)."""
    out.setdefault(row["thread_id"], CadenceInference(row["thread_id"])).lower_bound = int(row["max_updates"] or 0) + 1


def _add_snapshot(out: dict[str, CadenceInference], row: dict[str, Any], max_supersteps: int) -> None:
    """One cadence snapshot of a thread (row: ``thread_id, u, s``, as :func:`snapshot_sql` gives it)."""
    inf = out.setdefault(row["thread_id"], CadenceInference(row["thread_id"]))
    inf.snapshots += 1
    k = _cadence_of(row, max_supersteps)
    if k is not None and k not in inf.exact:
        inf.exact.append(k)


def _settled(out: dict[str, CadenceInference]) -> dict[str, CadenceInference]:
    """Exact cadences sorted; the lower bound kept beside them only when it exceeds every one.

    A cadence ``k`` never lets ``counters_since_delta_snapshot.messages[0]`` reach ``k``
    (it snapshots at ``k - 1 + 1``), so counters reaching ``max(exact)`` or more prove a
    later cadence of at least ``max(u) + 1`` besides the proven ones.
    """
    for inf in out.values():
        inf.exact.sort()
        if inf.exact and (inf.lower_bound is None or inf.lower_bound <= inf.exact[-1]):
            inf.lower_bound = None
    return out


@dataclass
class CadenceOutliers:
    """Threads whose proven cadences disagree, counted, with a few examples.

    Attributes:
        multiple: threads with several proven cadences (count).
        differs: threads with a proven cadence other than the fleet's (count; 0 without a fleet cadence).
        multiple_examples, differs_examples: up to ``limit`` of each, by thread id.
    """

    multiple: int = 0
    differs: int = 0
    multiple_examples: list[CadenceInference] = field(default_factory=list)
    differs_examples: list[CadenceInference] = field(default_factory=list)


def cadence_outliers(saver: BaseCheckpointSaver[Any], fleet: int | None, max_supersteps: int = DEFAULT_MAX_SUPERSTEPS,
                     *, limit: int = 10) -> CadenceOutliers:
    """Threads written at several cadences, and at a cadence other than ``fleet``, for the audit.

    Reads the summary's per-thread facts with two aggregate queries when they
    are available (cost independent of the number of checkpoints); otherwise
    infers every thread's cadences by scanning (:func:`infer_cadences`).

    Args:
        saver: SQLite or Postgres saver.
        fleet: the cadence the live delta processes froze (``None``: no comparison).
        max_supersteps: the supersteps bound in force.
        limit: examples kept per kind (count).
    """
    out = CadenceOutliers()
    if not _summary_cadences_ready(saver):
        cadences = infer_cadences(saver, max_supersteps=max_supersteps, use_summary=False)
        multi = [c for c in cadences.values() if c.several]
        off = [c for c in cadences.values() if fleet is not None and c.exact and any(k != fleet for k in c.exact)]
        return CadenceOutliers(len(multi), len(off), sorted(multi, key=lambda c: c.thread_id)[:limit],
                               sorted(off, key=lambda c: c.thread_id)[:limit])
    r = reader_for(saver)
    proven = "FROM dfa_thread_cadences WHERE kind = 'exact' AND min_supersteps + 1 < ?"
    # several proven cadences, or a bound (max(u) + 1) past every proven one (see _settled)
    multi_sql = (f"SELECT e.thread_id FROM (SELECT thread_id, COUNT(*) AS n, MAX(cadence) AS top {proven} "
                 "GROUP BY thread_id) e LEFT JOIN dfa_thread_cadences b ON b.thread_id = e.thread_id "
                 "AND b.kind = 'bound' WHERE e.n > 1 OR b.cadence > e.top")
    out.multiple, examples = _count_and_first(r, multi_sql, [max_supersteps], limit)
    off_ids: list[str] = []
    if fleet is not None:
        off_sql = f"SELECT DISTINCT thread_id {proven} AND cadence <> ?"
        out.differs, off_ids = _count_and_first(r, off_sql, [max_supersteps, fleet], limit)
    named = _from_summary(r, sorted(set(examples) | set(off_ids)), max_supersteps) if examples or off_ids else {}
    out.multiple_examples = [named[t] for t in examples if t in named]
    out.differs_examples = [named[t] for t in off_ids if t in named]
    return out


def _count_and_first(r: Any, sql: str, params: list[Any], limit: int) -> tuple[int, list[str]]:
    """``(rows of sql, the first limit thread ids in order)`` in one pass (a window count beside the page)."""
    rows = r.query(f"SELECT q.thread_id, COUNT(*) OVER () AS total FROM ({sql}) q ORDER BY q.thread_id "
                   f"LIMIT {max(int(limit), 1)}", params)
    return (int(rows[0]["total"]) if rows else 0), [row["thread_id"] for row in rows[:max(int(limit), 0)]]


@dataclass
class WriterFacts:
    """Modes and cadences written in a recent window, from metadata.

    Attributes:
        since_checkpoint_id: lower bound of the window (a UUIDv6 checkpoint id).
        checkpoints: checkpoints written in the window (count).
        delta_marked: of which carry the DeerFlow marker (count).
        counters_only: of which carry LangGraph counters but no marker (count).
        plain: of which carry neither (full-mode writes, or snapshot checkpoints) (count).
        threads: distinct threads written (count).
        cadences: ``{cadence: snapshot checkpoints proving it}`` among the window's snapshots.
        last_write_at: time of the newest checkpoint (ISO 8601) or ``None``.
        source: ``"summary"`` (the refresh's write facts: as current as the summary) or ``"scan"``
            (read from ``checkpoints`` now); not part of :meth:`as_dict`.
        as_of: with ``source="summary"``, when the summary was last refreshed (ISO 8601): checkpoints
            written since count at the next refresh; not part of :meth:`as_dict`.
    """

    since_checkpoint_id: str
    checkpoints: int = 0
    delta_marked: int = 0
    counters_only: int = 0
    plain: int = 0
    threads: int = 0
    cadences: dict[int, int] = field(default_factory=dict)
    last_write_at: str | None = None
    source: str = "scan"
    as_of: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly copy (without ``source`` and ``as_of``)."""
        kept = {k: v for k, v in self.__dict__.items() if k not in ("source", "as_of")}
        return dict(json.loads(json.dumps(kept, default=str)))


def _summary_writes_refreshed_at(saver: BaseCheckpointSaver[Any]) -> str | None:
    """When the summary (and its write facts) were last refreshed (ISO 8601), or ``None`` when
    ``dfa_thread_writes`` is not readable or not filled by a refresh since it was (re)built."""
    if not summary_table.readable(saver):
        return None
    r = reader_for(saver)
    if not table_exists(r, "dfa_thread_write_snapshots"):
        return None
    state = r.query("SELECT watermark, refreshed_at FROM dfa_summary_state WHERE id = 1")[0]
    return state["refreshed_at"] if state["watermark"] is not None else None


def recent_writer_facts(saver: BaseCheckpointSaver[Any], since_checkpoint_id: str,
                        max_supersteps: int = DEFAULT_MAX_SUPERSTEPS,
                        *, use_summary: bool = True) -> WriterFacts:
    """What was written since ``since_checkpoint_id`` (ids sort by creation time).

    Counts by marker kind, and the cadences proven by the window's snapshots
    (parent counters + 1, the same snapshots :func:`infer_cadences` uses); no materialization.

    Args:
        saver: SQLite or Postgres saver.
        since_checkpoint_id: the window's lower bound (exclusive), a UUIDv6 checkpoint id.
        max_supersteps: the supersteps bound in force (snapshots it may have caused prove no cadence).
        use_summary: read the per-thread, per-bucket write facts the summary refresh keeps
            (:mod:`deerflow.inventory.summary.writes`: sums over the buckets after the window's first one, plus
            an index range scan of that bucket) when they are available, instead of scanning every
            checkpoint of the window. Same result as the scan as of the summary's last refresh
            (``source`` says which was read).
    """
    r = reader_for(saver)
    if use_summary and bucket_bounds(since_checkpoint_id) is not None:
        refreshed_at = _summary_writes_refreshed_at(saver)
        if refreshed_at is not None:
            return _writes_from_summary(r, since_checkpoint_id, max_supersteps, refreshed_at)
    return _writes_scan(r, since_checkpoint_id, "", [since_checkpoint_id], max_supersteps, WriterFacts(
        since_checkpoint_id, source="scan"))


def _writes_scan(r: Any, since: str, upper: str, params: list[str], max_supersteps: int,
                 facts: WriterFacts) -> WriterFacts:
    """Add to ``facts`` the checkpoints with ``since < id`` (and ``id < upper`` when ``upper``) from ``checkpoints``."""
    window = "c.checkpoint_id > ?" + (" AND c.checkpoint_id < ?" if upper else "")
    row = r.query(
        f"SELECT COUNT(*) AS n, COUNT(DISTINCT c.thread_id) AS threads, MAX(c.checkpoint_id) AS newest, "
        f"SUM({r.truthy(r.marker())}) AS marked, "
        f"SUM({r.truthy(f'{r.counters()} AND NOT {r.marker()}')}) AS counters_only "
        f"FROM checkpoints c WHERE {window}", params)[0]
    facts.checkpoints += int(row["n"] or 0)
    facts.threads += int(row["threads"] or 0)
    facts.delta_marked += int(row["marked"] or 0)
    facts.counters_only += int(row["counters_only"] or 0)
    facts.plain = facts.checkpoints - facts.delta_marked - facts.counters_only
    _newest(facts, row["newest"])
    for snap in r.query(snapshot_sql(r, f"AND {window}"), params):
        k = _cadence_of(snap, max_supersteps)
        if k is not None:
            facts.cadences[k] = facts.cadences.get(k, 0) + 1
    facts.cadences = dict(sorted(facts.cadences.items()))
    return facts


def _newest(facts: WriterFacts, newest: str | None) -> None:
    moment = checkpoint_time(newest)
    if moment is not None and (facts.last_write_at is None or moment.isoformat() > facts.last_write_at):
        facts.last_write_at = moment.isoformat()


def _writes_from_summary(r: Any, since: str, max_supersteps: int, refreshed_at: str) -> WriterFacts:
    """:func:`recent_writer_facts` from the summary's write facts (the caller checked they are ready)."""
    bounds = bucket_bounds(since)
    assert bounds is not None
    bucket, upper = bounds
    facts = WriterFacts(since, source="summary", as_of=refreshed_at)
    row = r.query("SELECT SUM(checkpoints) AS n, SUM(marked) AS marked, SUM(counters_only) AS counters_only "
                  "FROM dfa_thread_writes WHERE bucket > ?", [bucket])[0]
    facts.checkpoints, facts.delta_marked = int(row["n"] or 0), int(row["marked"] or 0)
    facts.counters_only = int(row["counters_only"] or 0)
    for snap in r.query("SELECT cadence, SUM(snapshots) AS n FROM dfa_thread_write_snapshots "
                        "WHERE bucket > ? AND supersteps + 1 < ? GROUP BY cadence", [bucket, max_supersteps]):
        facts.cadences[int(snap["cadence"])] = int(snap["n"])
    # A thread was written in the window iff its newest checkpoint is in it (MAX over every namespace).
    threads = r.query("SELECT COUNT(*) AS n, MAX(last_checkpoint_id) AS newest FROM dfa_thread_summary "
                      "WHERE last_checkpoint_id > ?", [since])[0]
    newest = threads["newest"]
    _writes_scan(r, since, upper, [since, upper], max_supersteps, facts)  # the window's first bucket, live
    facts.threads = int(threads["n"] or 0)
    _newest(facts, newest)
    return facts
