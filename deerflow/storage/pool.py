"""A psycopg connection pool that outlives server restarts and answers at once while its server is known down.

Restarts: a pooled session a server restart ended would fail the next call
that borrows it. When PostgreSQL ends a session (a restart's fast shutdown,
``pg_terminate_backend``) it tells the client, so that connection's socket
turns readable while it sits idle in the pool. :class:`FailFastConnectionPool`
polls the socket when lending a connection (no round trip, no wait) and only
then runs psycopg_pool's ``check_connection``, which fails and gets the
connection replaced; a healthy idle connection costs one ``select``.

Outages:
psycopg_pool makes every caller wait its whole ``timeout`` for a connection
while the server cannot be reached, so during an outage each request of a
web process holds a worker for that long, and a few refreshing operators
saturate it (health checks included). :class:`FailFastConnectionPool` tells
an outage from a busy pool after a ``PoolTimeout``: it connects once
directly; if that fails too, that caller gets :class:`ServerUnreachable` (a
``PoolTimeout`` carrying libpq's reason), and later callers get it at once
for ``cooldown_s`` seconds while the pool keeps reconnecting in the background. A pool that timed out because every
connection was busy (the direct connection succeeds) is left as it is.
"""

from __future__ import annotations

import select
import threading
import time
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.abc import CT  # the pool's connection type (default Connection[TupleRow])

__all__ = ["FailFastConnectionPool", "ServerUnreachable", "check_if_told"]


def check_if_told(conn: Any) -> None:
    """Run ``ConnectionPool.check_connection`` on ``conn`` only if it is closed or the server sent it something.

    An idle connection has nothing to read unless the server ended the session
    (its termination notice) or the peer went away; ``select`` with a zero
    timeout tells without a round trip.

    Raises:
        psycopg.OperationalError: the connection is unusable (the pool discards it).
    """
    if conn.closed or select.select([conn.fileno()], [], [], 0)[0]:
        ConnectionPool.check_connection(conn)


class ServerUnreachable(PoolTimeout):
    """The pool's server cannot be reached: a direct connection failed (see :class:`FailFastConnectionPool`).

    Raised after a ``PoolTimeout`` whose direct connection attempt failed, and
    then at once, without waiting, while the cooldown lasts.

    Attributes:
        reason: the first line of libpq's error for that direct attempt
            (e.g. ``connection to server at "10.0.0.5", port 5432 failed: Connection refused``).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class FailFastConnectionPool(ConnectionPool[CT]):
    """``psycopg_pool.ConnectionPool`` that fails at once for ``cooldown_s`` seconds after an outage was seen.

    Args:
        cooldown_s: seconds callers get :class:`ServerUnreachable` at once after a
            ``PoolTimeout`` whose direct connection attempt also failed (0 turns it off).
        probe_timeout_s: ``connect_timeout`` of that direct attempt (seconds).
        Everything else as for ``ConnectionPool`` (``check`` is this class's own: module docstring).
    """

    def __init__(self, conninfo: str = "", *args: Any, cooldown_s: float = 5.0, probe_timeout_s: int = 2,
                 **kwargs: Any) -> None:
        self.cooldown_s = cooldown_s
        self.probe_timeout_s = probe_timeout_s
        self._down_until = 0.0
        self._down_reason = ""
        self._down_lock = threading.Lock()
        super().__init__(conninfo, *args, check=check_if_told, **kwargs)

    @property
    def down_reason(self) -> str | None:
        """Why the server was last found unreachable, while the cooldown lasts; else ``None``."""
        return self._down_reason if time.monotonic() < self._down_until else None

    def getconn(self, timeout: float | None = None) -> Any:
        """``ConnectionPool.getconn``; on its ``PoolTimeout``, tell an outage from a busy pool.

        Raises:
            ServerUnreachable: at once during a cooldown; or after the pool's
                timeout when a direct connection (``probe_timeout_s``) fails too.
            PoolTimeout: the pool timed out but the server answers (every connection is busy).
        """
        reason = self.down_reason
        if reason is not None:
            raise ServerUnreachable(f"the server was unreachable moments ago ({reason}); "
                                    f"not waiting for it again for up to {self.cooldown_s:g} s", reason)
        try:
            return super().getconn(timeout)
        except PoolTimeout as exc:
            reason = self._direct_connection_error()
            if reason is None:
                raise  # the server answers: the pool was only busy
            if self.cooldown_s > 0:
                with self._down_lock:
                    self._down_reason = reason
                    self._down_until = time.monotonic() + self.cooldown_s
            raise ServerUnreachable(f"no pooled connection in time and a direct connection failed: {reason}",
                                    reason) from exc

    def _direct_connection_error(self) -> str | None:
        """The first line of libpq's error for one direct connection attempt, or ``None`` if it connects."""
        try:
            # psycopg_pool 3.3 takes conninfo and kwargs as values or as callables that make them.
            conninfo = self.conninfo if isinstance(self.conninfo, str) else self.conninfo()
            kwargs = self.kwargs() if callable(self.kwargs) else self.kwargs
            with psycopg.connect(conninfo, connect_timeout=self.probe_timeout_s, **(kwargs or {})):
                return None
        except psycopg.Error as exc:
            return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
