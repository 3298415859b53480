"""The process registry: one row per OS process that froze a channel mode."""

from __future__ import annotations

from django.db import models


class ProcessRecord(models.Model):
    """A web process, Celery worker, or outside DeerFlow process and what it froze.

    Written at start-up, refreshed by heartbeats, marked stopped on clean
    shutdown. ``disk_*`` fields are what the process saw in its config.yaml
    at its last heartbeat (for drift findings). ``dismissed_*``: an operator
    dismissed the row of a process that stopped beating (the audit leaves it out of its findings).
    """

    ROLE_CHOICES = [("web", "web"), ("worker", "worker"), ("external", "external")]

    instance_id = models.CharField(max_length=64, unique=True)
    role = models.CharField(max_length=16, choices=ROLE_CHOICES)
    name = models.CharField(max_length=255)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    last_heartbeat = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)
    mode = models.CharField(max_length=8)
    snapshot_frequency = models.IntegerField()
    config_path = models.CharField(max_length=1024, blank=True)
    config_sha256 = models.CharField(max_length=64, blank=True)
    max_supersteps = models.IntegerField(null=True, blank=True)
    versions = models.JSONField(default=dict, blank=True)
    queues = models.JSONField(default=list, blank=True)
    disk_sha256 = models.CharField(max_length=64, blank=True)
    disk_mode = models.CharField(max_length=8, blank=True)
    disk_snapshot_frequency = models.IntegerField(null=True, blank=True)
    disk_error = models.TextField(blank=True)
    #: DeerFlow's ``database.checkpoint_cache`` as the process reported it (``{"type", "max_entries", "ttl_seconds",
    #: "key_prefix", "redis"}``, :func:`dashboard.fleet.history_cache.cache_setting`); ``{}`` if never reported.
    checkpoint_cache = models.JSONField(default=dict, blank=True)
    heartbeat_interval_s = models.FloatField(default=15.0)
    #: When and by whom a stale (or restarted, or gone) process was dismissed on the audit page; a heartbeat clears it.
    dismissed_at = models.DateTimeField(null=True, blank=True)
    dismissed_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["role", "host", "pid"]
        # Heartbeats (POST /api/processes/heartbeat) need it: staff alone may look, not add fleet members.
        permissions = [("report_heartbeat", "May report an outside process's heartbeat"),
                       ("dismiss_process", "May dismiss a stale or restarted process on the audit page")]
        indexes = [models.Index(fields=["stopped_at", "last_heartbeat"])]

    def __str__(self) -> str:
        return self.name
