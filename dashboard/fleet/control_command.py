"""The ``deerflow_facts`` Celery remote-control command a worker answers the live check with.

Registered when Django starts (:meth:`dashboard.fleet.apps.FleetConfig.ready`), so
``dashboard.celery`` does not import the fleet app (it imports nothing back).
"""

from __future__ import annotations

from typing import Any

from celery.worker.control import control_command

__all__ = ["deerflow_facts"]


@control_command()
def deerflow_facts(state) -> dict[str, Any]:
    """Remote-control command: this worker's frozen mode, cadence, config and versions."""
    from dashboard.fleet.facts import process_facts
    from dashboard.runtime import get_runtime

    queues = [q.name for q in state.consumer.task_consumer.queues] if state.consumer.task_consumer else []
    facts = process_facts(get_runtime(), role="worker", queues=queues)
    facts["instance_id"] = getattr(state.consumer.app, "deerflow_instance_id", "")
    return facts
