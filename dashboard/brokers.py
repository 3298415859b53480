"""The broker's own time limit and the tasks' time limits, set consistently (docs/reliability.md, "Brokers").

Every task is acknowledged late (``CELERY_TASK_ACKS_LATE``): the broker
holds its message unacknowledged while it runs. Each broker gives up on an
unacknowledged message after a while:

* **Redis**: ``broker_transport_options["visibility_timeout"]`` (client
  side, Kombu): a message unacknowledged that long is delivered again, to any
  worker, while the first run may still be going.
* **RabbitMQ**: the server's ``consumer_timeout`` (``rabbitmq.conf``; 30 min by
  default; per queue through the ``x-consumer-timeout`` argument from 3.12 on):
  the server closes the consumer's channel and requeues every message it held.
  The server checks it once a minute.

So a task must never run (or wait for its countdown) as long as that: the
hard ``task_time_limit`` is set below the broker's timeout, so that a thread
task that runs too long is stopped (the pool process is killed, its
conversion transaction dies with its connection, as in a SIGKILL) and
recorded on its row as ``time_limit`` -- neither run a second time by a
redelivery nor lost. No soft limit: ``SoftTimeLimitExceeded`` is raised
wherever the task happens to be, and code that turns a decoder's failure into
a finding (``deerflow.convert``) would report it as an integrity mismatch. A
redelivery that happens anyway (a worker that lost the broker for a moment)
is guarded by the row's claim number
(:func:`dashboard.jobs.services.run_thread`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

__all__ = ["BrokerLimits", "broker_kind", "broker_limits"]

#: Seconds kept between the time limit and the broker's timeout, as a fraction of the timeout (at least 1 s).
_MARGIN = 0.1


def broker_kind(url: str) -> str:
    """``"redis"``, ``"amqp"`` (RabbitMQ), ``"filesystem"`` or ``"other"`` for a Celery broker URL."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("redis", "rediss", "redis+socket"):
        return "redis"
    if scheme in ("amqp", "amqps", "pyamqp"):
        return "amqp"
    return "filesystem" if scheme == "filesystem" else "other"


@dataclass(frozen=True)
class BrokerLimits:
    """Seconds: the broker's redelivery timeout (``None``: the broker has none) and the hard task time limit."""

    kind: str
    broker_timeout_s: int | None
    time_limit_s: int | None


def broker_limits(url: str, *, visibility_timeout_s: int, consumer_timeout_s: int,
                  time_limit_s: int | None) -> BrokerLimits:
    """The task time limits for broker ``url``, checked against the broker's timeout.

    Args:
        url: ``CELERY_BROKER_URL``.
        visibility_timeout_s: Redis's visibility timeout the dashboard sets (``DASHBOARD_TASK_VISIBILITY_TIMEOUT_S``).
        consumer_timeout_s: the RabbitMQ server's ``consumer_timeout`` in seconds
            (``DASHBOARD_BROKER_CONSUMER_TIMEOUT_S``; a server setting the dashboard cannot change, declared
            so the limits can be derived from it).
        time_limit_s: ``DASHBOARD_TASK_TIME_LIMIT_S``, or ``None`` to derive it (90% of the broker's timeout).

    Returns:
        :class:`BrokerLimits`; for brokers without a timeout (filesystem, other) the given limit or none.

    Raises:
        ImproperlyConfigured: the time limit is not below the broker's timeout.
    """
    kind = broker_kind(url)
    timeout = {"redis": visibility_timeout_s, "amqp": consumer_timeout_s}.get(kind)
    if timeout is None:
        return BrokerLimits(kind, None, time_limit_s)
    margin = max(1, int(timeout * _MARGIN))
    limit = time_limit_s if time_limit_s is not None else timeout - margin
    setting = "DASHBOARD_TASK_VISIBILITY_TIMEOUT_S" if kind == "redis" else "DASHBOARD_BROKER_CONSUMER_TIMEOUT_S"
    if limit >= timeout:
        raise ImproperlyConfigured(
            f"DASHBOARD_TASK_TIME_LIMIT_S={limit} must be below the broker's timeout ({setting}={timeout}): a "
            "task still running when the broker gives up on it is delivered again. Lower the time limit or raise "
            "the broker's timeout (docs/reliability.md, 'Brokers').")
    return BrokerLimits(kind, timeout, limit)
