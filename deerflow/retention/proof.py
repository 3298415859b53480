"""What proves, without reading a value, that a prune leaves every kept checkpoint reading as before.

A kept checkpoint reads its own rows, the writes rows of its kept ancestors
and whatever its *chain start* (the oldest kept checkpoint of its line, whose
parent goes) gives it. When each chain start reads only its own rows
(:func:`chain_starts_on_own_rows`), the kept checkpoints' stored bytes, the
same before and after (:func:`kept_bytes_digests`), prove their readings.
The batch prune (:mod:`deerflow.retention.setbatch`) runs the same two halves
inside its deleting statement (:func:`chain_starts_storing`,
:func:`walks_past`, :func:`kept_digest_sql`); the per-thread set-based path
(:mod:`deerflow.retention.setprune`) and LangGraph's own ``prune``
(:mod:`deerflow.retention.delegate`) use the functions here.
"""

from __future__ import annotations

from deerflow.retention.plan import Plan
from deerflow.retention.reading import replayed_channels
from deerflow.retention.setbased import key_columns
from deerflow.storage.sessions import ConversionSession

__all__ = ["UNNEST_KEYS", "chain_starts_on_own_rows", "chain_starts_storing", "kept_bytes_digests",
           "kept_digest_sql", "walks_past"]

_Key = tuple[str, str]
_Start = tuple[str, str, str]

#: A relation of ``(thread_id, checkpoint_ns, checkpoint_id)`` keys from three array parameters.
UNNEST_KEYS = "SELECT * FROM unnest(?::text[], ?::text[], ?::text[])"


def chain_starts_on_own_rows(session: ConversionSession, plans: dict[str, Plan]) -> set[_Start]:
    """``{(thread_id, checkpoint_ns, checkpoint_id)}`` of the plans' chain starts that LangGraph's reader reads from
    their own rows alone, so that their rows' bytes, unchanged, prove their readings (two statements).

    LangGraph's reader (``channels_from_checkpoint``) rebuilds a channel from a checkpoint's ancestors only when
    it is one of :func:`~deerflow.retention.reading.replayed_channels` with a version and nothing stored at the
    checkpoint. So such a chain start stores a value for every one of those channels it has a version of
    (:func:`chain_starts_storing`), and no writes row outside the plan's kept checkpoints holds one it has no
    version of (a reading of a kept checkpoint below it would walk past it into those rows;
    :func:`walks_past`). Its ``channel_versions`` hold every channel its ancestors wrote (LangGraph copies a
    checkpoint's versions into its child's), so no deleted checkpoint names another. A kept checkpoint below it
    reads its own rows, its kept ancestors' writes rows and at most the chain start's stored values: all rows
    the prune keeps.
    """
    storing = chain_starts_storing(session, plans)
    if not storing:
        return set()
    kept = sorted((t, *k) for t, plan in plans.items() for k in plan.kept)
    written: dict[tuple[str, str], set[str]] = {}
    for r in session.query(
            f"SELECT DISTINCT thread_id, checkpoint_ns, channel FROM {session.dialect.writes_table} "
            "WHERE thread_id = ANY(?) AND channel = ANY(?) AND (thread_id, checkpoint_ns, checkpoint_id) NOT IN "
            f"({UNNEST_KEYS})",
            [sorted(plans), sorted(replayed_channels()), *key_columns(kept)]):
        written.setdefault((r["thread_id"], r["checkpoint_ns"]), set()).add(r["channel"])
    return set(storing) - walks_past(storing, written)


def chain_starts_storing(session: ConversionSession,
                         plans: dict[str, Plan]) -> dict[_Start, frozenset[str]]:
    """The plans' chain starts that store a value for every one of the
    :func:`~deerflow.retention.reading.replayed_channels` they have a version of (a blob of that version that is
    not the saver's ``empty`` or ``null`` marker, or an inline value that is not ``null``), one statement.

    Returns:
        ``{(thread_id, checkpoint_ns, checkpoint_id): the replayed channels it has a version of}``; a chain start
        that leaves one of them unstored is not in it.
    """
    starts = sorted((t, *k) for t, plan in plans.items() for k in plan.chain_starts)
    if not starts:
        return {}
    rows = session.query(
        "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, v.key AS channel, "
        "(EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = "
        "c.checkpoint_ns AND b.channel = v.key AND b.version = v.value AND b.type NOT IN ('empty', 'null')) "
        "OR COALESCE(c.checkpoint -> 'channel_values' -> v.key, 'null'::jsonb) <> 'null'::jsonb) AS stored "
        "FROM checkpoints c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
        f"WHERE (c.thread_id, c.checkpoint_ns, c.checkpoint_id) IN ({UNNEST_KEYS}) AND v.key = ANY(?)",
        [*key_columns(starts), sorted(replayed_channels())])
    versioned: dict[_Start, set[str]] = {s: set() for s in starts}
    for r in rows:
        key = (r["thread_id"], r["checkpoint_ns"], r["checkpoint_id"])
        if not r["stored"]:
            versioned.pop(key, None)
        elif key in versioned:
            versioned[key].add(r["channel"])
    return {k: frozenset(v) for k, v in versioned.items()}


def walks_past(storing: dict[_Start, frozenset[str]],
               written: dict[tuple[str, str], set[str]]) -> set[_Start]:
    """The chain starts of ``storing`` (:func:`chain_starts_storing`) that a reading would walk past: a writes row
    the prune does not keep, of their namespace (``written``: ``{(thread_id, checkpoint_ns): channels}``), holds
    a replayed channel they have no version of."""
    return {k for k, channels in storing.items() if written.get((k[0], k[1]), set()) - channels}


def kept_bytes_digests(session: ConversionSession, kept: dict[str, set[_Key]]) -> dict[str, str]:
    """What :func:`deerflow.retention.setbased.read_bytes_digest` proves, for the ``kept`` checkpoints of several
    threads in one statement (:func:`kept_digest_sql`): ``{thread_id: digest}`` (``""`` for a thread with no
    kept row), compared before and after a change inside one transaction."""
    keys = key_columns(sorted((t, *k) for t, ks in kept.items() for k in ks))
    rows = session.query(kept_digest_sql(session.dialect.writes_table, UNNEST_KEYS), [*keys, *keys, *keys])
    out = dict.fromkeys(kept, "")
    out.update({r["thread_id"]: str(r["digest"]) for r in rows})
    return out


def kept_digest_sql(writes_table: str, keys: str) -> str:
    """A query of ``(thread_id, digest)``, one row per thread with a row among ``keys``: a digest of the stored
    bytes those checkpoints are read from.

    The checkpoints rows are digested by content (without the parent link, which a prune clears). The blobs they
    name (found from the kept rows' own ``channel_versions``, so no node is needed) and their writes rows are
    digested by row version (``ctid``, ``xmin``): Postgres writes a new row version for any change of a row, so
    an unchanged version is unchanged bytes, and no blob is read or decompressed.

    Args:
        writes_table: the writes table's name (``checkpoint_writes``).
        keys: a query of ``(thread_id, checkpoint_ns, checkpoint_id)`` rows, used three times (e.g.
            :data:`UNNEST_KEYS`, whose parameters are then given three times over).
    """
    in_keys = f"(thread_id, checkpoint_ns, checkpoint_id) IN ({keys})"
    return ("SELECT thread_id, md5(string_agg(h, ',' ORDER BY h)) AS digest FROM ("
            "SELECT thread_id, md5(concat_ws('/', checkpoint_ns, checkpoint_id, type, checkpoint::text, "
            f"metadata::text)) AS h FROM checkpoints WHERE {in_keys} UNION ALL "
            "SELECT DISTINCT b.thread_id, md5(concat_ws('/', b.checkpoint_ns, b.channel, b.version, b.ctid, "
            "b.xmin)) FROM checkpoints c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') "
            "AS v JOIN checkpoint_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
            f"AND b.channel = v.key AND b.version = v.value WHERE (c.thread_id, c.checkpoint_ns, c.checkpoint_id) "
            f"IN ({keys}) UNION ALL SELECT thread_id, md5(concat_ws('/', checkpoint_ns, checkpoint_id, task_id, "
            f"idx::text, ctid, xmin)) FROM {writes_table} WHERE {in_keys}) AS parts GROUP BY thread_id")
