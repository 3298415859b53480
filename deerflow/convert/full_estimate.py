"""Delta->full conversion's dry run: the bytes a thread will occupy once converted, without writing."""

from __future__ import annotations

import json
from typing import Any

from langgraph.checkpoint.base import get_checkpoint_metadata, get_serializable_checkpoint_metadata

from deerflow.convert.encoding import MessageEncoder
from deerflow.convert.full_rows import VersionPlan, rewritten
from deerflow.convert.walk import Entry
from deerflow.storage.sessions import ConversionSession

__all__ = ["Estimate"]


class Estimate:
    """Bytes the thread will occupy after conversion, accumulated as rewritten checkpoints pass.

    ``bytes_before`` minus what is replaced plus what is written. Each
    rewritten ``checkpoints`` row is built and serialized as the saver's ``put``
    stores it (SQLite: the checkpoint blob and metadata JSON; Postgres: the two
    JSONB documents, sized by the server) and replaces the stored row. On
    Postgres each planned ``messages`` blob (one per namespace and version) also
    replaces the blob stored at the original version.
    """

    def __init__(self, session: ConversionSession, thread_id: str, bytes_before: int):
        self.session, self.thread_id = session, thread_id
        self.serde = session.saver.serde
        self.encoder = MessageEncoder(self.serde)
        self.plan = VersionPlan(session.dialect)
        self.sizes = session.checkpoint_row_sizes(thread_id)
        self.blobs = session.messages_blob_sizes(thread_id)
        self.total = bytes_before
        self._documents: list[Any] = []
        self._old_seen: set[tuple[str, str]] = set()
        self._new_seen: set[tuple[str, str]] = set()

    def add(self, e: Entry) -> None:
        """Account for one rewritten checkpoint."""
        target = self.plan.target(e)
        config, checkpoint, metadata, _versions = rewritten(self.thread_id, e, target, self.encoder)
        self.total -= self.sizes.get((e.ns, e.checkpoint_id), 0)
        if not self.session.dialect.json_columns:  # msgpack checkpoint + JSON metadata bytes, values inline
            self.total += len(self.serde.dumps_typed(checkpoint)[1]) + len(
                json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode("utf-8", "ignore"))
            return
        from psycopg.types.json import Jsonb

        inline = {k: v for k, v in checkpoint["channel_values"].items()
                  if v is None or isinstance(v, (str, int, float, bool))}
        self._documents += [Jsonb({**checkpoint, "channel_values": inline}),
                            Jsonb(get_serializable_checkpoint_metadata(config, metadata))]
        if len(self._documents) >= 512:
            self._flush()
        if target is None:
            return
        old = (e.ns, str(e.tup.checkpoint["channel_versions"]["messages"]))
        if old not in self._old_seen:
            self._old_seen.add(old)
            self.total -= self.blobs.get(old, 0)
        new = (e.ns, str(target))
        if new not in self._new_seen:
            self._new_seen.add(new)
            self.total += len(self.serde.dumps_typed(checkpoint["channel_values"]["messages"])[1])

    def _flush(self) -> None:
        if self._documents:
            self.total += int(self.session.query(
                "SELECT COALESCE(SUM(pg_column_size(d)), 0) AS b FROM unnest(?::jsonb[]) AS d",
                [self._documents])[0]["b"])
            self._documents = []

    def result(self) -> int:
        """The estimated bytes after conversion."""
        self._flush()
        return self.total
