"""The tasks' time limit is set below the broker's own timeout (dashboard.brokers), for Redis and RabbitMQ.

The function is tested case by case; then the settings module itself, in a
subprocess, as a worker loads it: the derived limit reaches Celery's
``task_time_limit``, a limit at or above the broker's timeout stops the
process at start-up with the message, and a throttle a countdown task would
wait past the broker's timeout is refused when the job is created.
"""

from __future__ import annotations

import subprocess

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.brokers import BrokerLimits, broker_kind, broker_limits
from dashboard.jobs.services import JobOptions
from tests.integration import helpers

REDIS, AMQP = "redis://127.0.0.1:6379/3", "amqp://guest:guest@127.0.0.1:5672//"


@pytest.mark.parametrize(("url", "kind"), [
    (REDIS, "redis"), ("rediss://h:6380/0", "redis"), (AMQP, "amqp"), ("pyamqp://h//", "amqp"),
    ("filesystem://", "filesystem"), ("sqs://", "other"),
])
def test_broker_kind_by_scheme(url, kind):
    assert broker_kind(url) == kind


def test_limits_are_derived_below_each_brokers_timeout():
    assert broker_limits(REDIS, visibility_timeout_s=900, consumer_timeout_s=1800, time_limit_s=None) == \
        BrokerLimits("redis", 900, 810)
    assert broker_limits(AMQP, visibility_timeout_s=900, consumer_timeout_s=1800, time_limit_s=None) == \
        BrokerLimits("amqp", 1800, 1620)
    assert broker_limits(AMQP, visibility_timeout_s=0, consumer_timeout_s=4, time_limit_s=None) == \
        BrokerLimits("amqp", 4, 3)  # the margin is at least one second
    assert broker_limits(REDIS, visibility_timeout_s=900, consumer_timeout_s=1800, time_limit_s=600) == \
        BrokerLimits("redis", 900, 600)
    assert broker_limits("filesystem://", visibility_timeout_s=0, consumer_timeout_s=1800, time_limit_s=None) == \
        BrokerLimits("filesystem", None, None)


@pytest.mark.parametrize(("url", "setting"), [(REDIS, "DASHBOARD_TASK_VISIBILITY_TIMEOUT_S=900"),
                                              (AMQP, "DASHBOARD_BROKER_CONSUMER_TIMEOUT_S=900")])
def test_a_limit_not_below_the_brokers_timeout_is_refused_with_both_settings_named(url, setting):
    with pytest.raises(ImproperlyConfigured) as err:
        broker_limits(url, visibility_timeout_s=900, consumer_timeout_s=900, time_limit_s=900)
    assert str(err.value).startswith(f"DASHBOARD_TASK_TIME_LIMIT_S=900 must be below the broker's timeout ({setting})")
    assert "delivered again" in str(err.value)


SHOW = ("from django.conf import settings; from dashboard.celery import app; "
        "print(app.conf.task_time_limit, app.conf.broker_transport_options, settings.BROKER_LIMITS)")


def _settings(tmp_path, **env: str) -> subprocess.CompletedProcess:
    environ = helpers.dashboard_env(config_path=tmp_path / "config.yaml", var_dir=tmp_path, **env)
    return subprocess.run([helpers.PYTHON, "-c", f"import django, os; django.setup(); {SHOW}"], cwd=helpers.REPO_ROOT,
                          env=environ, capture_output=True, text=True, timeout=60)


def test_the_worker_settings_carry_the_derived_limit_to_celery(tmp_path):
    redis = _settings(tmp_path, CELERY_BROKER_URL=REDIS, DASHBOARD_TASK_VISIBILITY_TIMEOUT_S="600")
    assert redis.returncode == 0, redis.stderr
    assert redis.stdout.split("\n")[0].startswith("540 {'visibility_timeout': 600} BrokerLimits(kind='redis'")
    amqp = _settings(tmp_path, CELERY_BROKER_URL=AMQP, DASHBOARD_BROKER_CONSUMER_TIMEOUT_S="3600")
    assert amqp.returncode == 0, amqp.stderr
    assert amqp.stdout.startswith("3240 {} BrokerLimits(kind='amqp', broker_timeout_s=3600, time_limit_s=3240)")


def test_a_worker_with_a_limit_above_the_brokers_timeout_does_not_start(tmp_path):
    proc = _settings(tmp_path, CELERY_BROKER_URL=AMQP, DASHBOARD_TASK_TIME_LIMIT_S="3600")
    assert proc.returncode != 0
    assert ("DASHBOARD_TASK_TIME_LIMIT_S=3600 must be below the broker's timeout "
            "(DASHBOARD_BROKER_CONSUMER_TIMEOUT_S=1800)") in proc.stderr


@pytest.mark.django_db
def test_a_throttle_a_countdown_task_would_wait_past_the_brokers_timeout_is_refused(settings, delta_rt):
    from dashboard.errors.jobs import InvalidSelection
    from dashboard.jobs import services
    from tests.dashboard.jobs.conftest import DELTA_SMALL

    settings.BROKER_LIMITS = BrokerLimits("redis", 900, 810)
    with pytest.raises(InvalidSelection) as err:
        services.create_job(None, "dry_run", {"thread_ids": DELTA_SMALL},
                            JobOptions(throttle_delay_s=90, launched_by="t"))
    assert str(err.value).startswith("throttle_delay_s must be below 90 s: a thread task waits for it and then runs "
                                     "(up to 810 s) unacknowledged")
    job = services.create_job(None, "dry_run", {"thread_ids": DELTA_SMALL},
                              JobOptions(throttle_delay_s=89, launched_by="t"))
    assert job.throttle_delay_s == 89
    inline = services.create_job(None, "dry_run", {"thread_ids": DELTA_SMALL}, JobOptions(throttle_delay_s=600,
                                 runner="inline", launched_by="t"))  # no broker holds an inline job's threads
    assert inline.throttle_delay_s == 600


LAUNCH_WITHOUT_BROKER = """
import json
from django.db import transaction
from dashboard.errors.outages import describe_outage
from dashboard.jobs import services
from dashboard.jobs.models import ConversionJob
from tests.conftest import register_live_worker
register_live_worker()  # its heartbeat reached the registry before the broker went down
try:
    with transaction.atomic():
        job = services.create_job(None, "dry_run", {"filter": {"q": "f10"}}, services.JobOptions(launched_by="t"))
        services.launch(job)
except Exception as exc:
    job = ConversionJob.objects.get()
    print("RESULT " + json.dumps({"error": type(exc).__name__, "state": job.state, "rows": job.results.count(),
                                  "outage": describe_outage(exc)}))
"""


def test_an_unreachable_rabbitmq_cancels_a_resolving_job_and_says_rabbitmq(tmp_path):
    """The broker is down when a filter job is launched: nothing can resume a job without threads, so it is
    cancelled (a thread-id job is paused); the 503's hint names RabbitMQ and what happened to the job."""
    import json

    config_path, var_dir = helpers.dashboard_home(tmp_path, "delta")
    url = f"amqp://guest:guest@127.0.0.1:{helpers.free_port()}//"
    env = helpers.dashboard_env(config_path=config_path, var_dir=var_dir, CELERY_BROKER_URL=url)
    helpers.run_manage(["migrate", "--noinput", "-v0"], env)
    out = helpers.run_manage(["shell", "-c", LAUNCH_WITHOUT_BROKER], env).stdout
    result = json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[7:])
    assert (result["error"], result["state"], result["rows"]) == ("OperationalError", "cancelled", 0)
    code, _, hint = result["outage"]
    assert code == "broker_unavailable"
    assert (hint.startswith("RabbitMQ at amqp://guest:***@127.0.0.1:")
            and "a job selecting by filter is cancelled" in hint)
