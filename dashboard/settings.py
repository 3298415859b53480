"""Django settings, from environment variables only (listed in README and docker/.env.example).

DeerFlow's own ``config.yaml`` (``DEER_FLOW_CONFIG_PATH``) is read separately
by :mod:`dashboard.runtime` at start-up.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from dashboard.brokers import broker_kind, broker_limits
from dashboard.env import env_bool, env_float, env_int, env_list, env_proxy_ssl_header, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("DASHBOARD_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set. Set it to a long random string (or set DJANGO_DEBUG=1 for a local run)."
        )
    SECRET_KEY = "insecure-development-key-set-DJANGO_SECRET_KEY"  # noqa: S105 - DEBUG only
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])

INSTALLED_APPS = [
    # Superusers browse lockouts (axes) and the audit log at /admin/.
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "axes",
    "dashboard.accounts",
    "dashboard.threads",
    "dashboard.fleet",
    "dashboard.jobs",
]
# ``manage.py run_benchmarks`` lives with the benchmarks (they import the dashboard, never the other way);
# a source checkout has the package, the Docker image does not.
if importlib.util.find_spec("benchmarks") is not None:
    INSTALLED_APPS.append("benchmarks")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # HEAD answered as GET, headers only, on every route (dashboard.http_methods).
    "dashboard.http_methods.HeadAsGetMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "dashboard.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Token-authenticated API requests carry no ambient credential: no CSRF check for them.
    "dashboard.middleware.BearerTokenCsrfMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Anonymous /api/ requests answer 401 before the CSRF check could call them CSRF failures.
    "dashboard.middleware.AnonymousApiMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # Cache-Control: no-store on every authenticated response (thread content stays out of caches).
    "dashboard.middleware.NoStoreMiddleware",
    # Who wrote what, when, from where (dashboard.accounts.audit; superusers browse it in the admin).
    "dashboard.accounts.audit.AuditLogMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Django's bare 405s (require_GET/require_POST) answered as JSON under /api/, the error page elsewhere.
    "dashboard.errors.middleware.MethodNotAllowedMiddleware",
    # NUL bytes and integers past 64 bits in path parameters, queries and forms: 400 (dashboard.validation).
    "dashboard.validation.HostileInputMiddleware",
    # Last, so their process_exception runs first: a damaged checkpoint answers 422 naming it,
    # outages answer 503 with a hint (dashboard.errors.outages).
    "dashboard.errors.middleware.DamagedCheckpointMiddleware",
    "dashboard.errors.middleware.OutageMiddleware",
    # Turns a lockout flagged during authentication into the 429 (dashboard.accounts.throttle).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.context_processors.runtime",
                "dashboard.context_processors.banners",
            ],
            # when, thousands, plural, size, reveal: the one formatting layer, in every template.
            "builtins": ["dashboard.templatetags.formatting"],
        },
    },
]

# Form widgets through Jinja2 (Django's own widget templates for it): the filter and page forms' selects cost
# several milliseconds a page through the Django template engine, a fraction of that through Jinja2.
FORM_RENDERER = "django.forms.renderers.Jinja2"

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DASHBOARD_DATABASE_URL", f"sqlite:///{VAR_DIR / 'dashboard.sqlite3'}"),
        conn_max_age=60,
        # A kept connection is checked when a request starts: after a server restart the first request
        # reconnects instead of failing (Django's CONN_HEALTH_CHECKS).
        conn_health_checks=True,
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# django-axes first: it refuses a locked-out client before any backend checks a password or token.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "dashboard.accounts.backends.ModelBackend",  # Django's, with permissions read in one query
    "dashboard.accounts.backends.ApiTokenBackend",
]
# Login throttling (dashboard.accounts.throttle): this many failures for one username, or from one address,
# lock it for DASHBOARD_LOGIN_COOLOFF_S seconds (answered 429 with Retry-After). Bad API tokens count too.
AXES_FAILURE_LIMIT = env_int("DASHBOARD_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = dt.timedelta(seconds=env_int("DASHBOARD_LOGIN_COOLOFF_S", 900, minimum=1))
# Who a failure counts against: passwords per username and per address, tokens per address and token prefix,
# valid tokens never (dashboard/accounts/throttle.py; docs/security.md, Throttling).
AXES_LOCKOUT_PARAMETERS = "dashboard.accounts.throttle.lockout_parameters"
AXES_USERNAME_CALLABLE = "dashboard.accounts.throttle.attempt_username"
AXES_WHITELIST_CALLABLE = "dashboard.accounts.throttle.is_valid_credential"
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True
# Lockout log lines name the username and address (operators need them; passwords and tokens stay masked).
AXES_SENSITIVE_PARAMETERS: list[str] = []
# No "AXES: BEGIN ..." banner on every start of every command; lockout lines still name username and address.
AXES_VERBOSE = False
AXES_LOCKOUT_CALLABLE = "dashboard.accounts.throttle.lockout_response"
AXES_CLIENT_IP_CALLABLE = "dashboard.accounts.throttle.client_ip"
# GET /metrics (Prometheus) answers only with Authorization: Bearer <this>; empty: metrics are off (404).
DASHBOARD_METRICS_TOKEN = env_str("DASHBOARD_METRICS_TOKEN", "")
# Reverse proxies in front of the dashboard that append to X-Forwarded-For (0: clients connect directly).
DASHBOARD_PROXY_COUNT = env_int("DASHBOARD_PROXY_COUNT", 0, minimum=0)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "threads:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
try:  # WhiteNoise serves from the finders but warns about a missing STATIC_ROOT; no collectstatic step needed
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
except OSError:
    pass  # a read-only VAR_DIR only costs that warning
STATICFILES_DIRS = [BASE_DIR / "dashboard" / "static"]
# Serve straight from the source directories (no collectstatic step needed).
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
# A failed CSRF check answers the error page (JSON under /api/) with what to do, not Django's bare page.
CSRF_FAILURE_VIEW = "dashboard.errors.handlers.csrf_failure"
SECURE_CONTENT_TYPE_NOSNIFF = True

# Behind TLS (docs/security.md, docs/operations.md "Deployment"; docker/compose.yaml turns every switch on through
# docker/.env.example). Off by default so that `runserver` over plain HTTP keeps working.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DASHBOARD_SECURE_COOKIES", False)
SECURE_HSTS_SECONDS = env_int("DASHBOARD_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DASHBOARD_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DASHBOARD_HSTS_PRELOAD", False)
# The header (and value) a TLS-terminating proxy sets; trust it only behind such a proxy.
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("DASHBOARD_PROXY_SSL_HEADER")
SECURE_SSL_REDIRECT = env_bool("DASHBOARD_SSL_REDIRECT", False)
# Container health checks probe plain HTTP on the loopback.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# Celery: the embedded default is Kombu's filesystem transport (no service
# needed); production and the test suite use Redis.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", f"file://{VAR_DIR / 'celery' / 'results'}")
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(VAR_DIR / "celery" / "broker"),
        "data_folder_out": str(VAR_DIR / "celery" / "broker"),
        "processed_folder": str(VAR_DIR / "celery" / "processed"),
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
        # Kombu polls the folder once a second by default: a round trip per thread task of up to a second.
        # A listing every 0.1 s costs nothing measurable and lets a job of small threads move at their pace.
        "polling_interval": env_float("DASHBOARD_FILESYSTEM_POLL_S", 0.1, minimum=0.01),
    }
    if CELERY_BROKER_URL.startswith("filesystem://")
    # Redis redelivers a task whose worker died without acknowledging it (acks_late)
    # after this many seconds; the task time limits below stay under it.
    else {"visibility_timeout": env_int("DASHBOARD_TASK_VISIBILITY_TIMEOUT_S", 900, minimum=2)}
    if broker_kind(CELERY_BROKER_URL) == "redis"
    else {}
)
# The broker gives up on an unacknowledged task after its timeout (Redis: the visibility timeout above;
# RabbitMQ: the server's consumer_timeout, declared here): every task's hard time limit is set below
# it, so a task that runs too long is stopped and recorded, never delivered twice (dashboard.brokers;
# docs/reliability.md, "Brokers"). No soft limit: it raises wherever the task happens to be.
BROKER_LIMITS = broker_limits(
    CELERY_BROKER_URL, visibility_timeout_s=CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 0),
    consumer_timeout_s=env_int("DASHBOARD_BROKER_CONSUMER_TIMEOUT_S", 1800, minimum=2),
    time_limit_s=env_int("DASHBOARD_TASK_TIME_LIMIT_S", 0, minimum=0) or None)
CELERY_TASK_TIME_LIMIT = BROKER_LIMITS.time_limit_s
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Kombu's filesystem transport (the embedded default) needs its folders to exist.
    for _folder in CELERY_BROKER_TRANSPORT_OPTIONS.values():
        if isinstance(_folder, str):
            Path(_folder).mkdir(parents=True, exist_ok=True)
if CELERY_RESULT_BACKEND.startswith("file://"):
    Path(CELERY_RESULT_BACKEND[len("file://"):]).mkdir(parents=True, exist_ok=True)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "dashboard"
# Thread summary (deerflow.inventory.summary): incremental refresh every 30 s, full reconcile hourly. Run a beat
# (``celery -A dashboard beat``, or ``worker -B`` for one worker). ``expires`` drops runs no worker took in time.
CELERY_BEAT_SCHEDULE = {
    "thread-summary-refresh": {"task": "threads.refresh_summary", "schedule": 30.0, "options": {"expires": 25}},
    "thread-summary-reconcile": {"task": "threads.refresh_summary", "schedule": 3600.0, "kwargs": {"full": True},
                                 "options": {"expires": 1800}},
    # Conversion jobs: send again the thread tasks a broker lost (dashboard.jobs.stalls).
    "jobs-requeue-stalled": {"task": "jobs.requeue_stalled", "schedule": 60.0, "options": {"expires": 50}},
    # Retention policies (dashboard.jobs.policies): start the enabled policies whose crontab fell due.
    "jobs-run-due-policies": {"task": "jobs.run_due_policies", "schedule": 60.0, "options": {"expires": 50}},
}

# DeerFlow config.yaml (read by dashboard.runtime).
DEER_FLOW_CONFIG_PATH = env_str("DEER_FLOW_CONFIG_PATH", str(Path.cwd() / "config.yaml"))
DASHBOARD_PAGE_SIZE = env_int("DASHBOARD_PAGE_SIZE", 50, minimum=1)
# A conversion whose estimated size after exceeds this needs explicit confirmation (dashboard.jobs).
CONVERSION_SIZE_LIMIT_BYTES = env_int("DASHBOARD_CONVERSION_SIZE_LIMIT_MB", 1024, minimum=1) * 1024 * 1024
# Conversion jobs: seconds a thread task may stay queued past its due time before it is presumed lost by the
# broker and sent again (dashboard.jobs.stalls); keep it above the longest wait in a busy queue.
DASHBOARD_REQUEUE_AFTER_S = float(env_int("DASHBOARD_REQUEUE_AFTER_S", 600, minimum=10))
# Job batches (dashboard.jobs.batches): one thread task runs up to this many threads of up to this many stored
# bytes in all (the thread summary's count), so small threads do not each pay a broker round trip. Keep a
# batch's work well inside the task time limit: 1 thread per task restores one round trip per thread.
DASHBOARD_BATCH_THREADS = env_int("DASHBOARD_BATCH_THREADS", 25, minimum=1)
DASHBOARD_BATCH_BYTES = env_int("DASHBOARD_BATCH_MB", 8, minimum=1) * 1024 * 1024
# Writing jobs beside a live DeerFlow: seconds of the checkpoint_write reservation's lease in DeerFlow's runs
# table (renewed every third of it while a thread is rewritten; a killed worker's row is swept after it).
DASHBOARD_RESERVATION_LEASE_S = float(env_int("DASHBOARD_RESERVATION_LEASE_S", 60, minimum=5))
# Largest JSON body the API accepts (dashboard.jsonbody), in KiB; a job selects many threads with a filter.
DASHBOARD_MAX_JSON_BODY_BYTES = env_int("DASHBOARD_MAX_JSON_BODY_KB", 256, minimum=1) * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, DASHBOARD_MAX_JSON_BODY_BYTES)  # Django's default, or more
# Fleet audit: seconds between process heartbeats; stale after three missed beats.
DASHBOARD_HEARTBEAT_S = float(env_int("DASHBOARD_HEARTBEAT_S", 15, minimum=1))
# Fleet audit: window (hours) of recent checkpoints used to infer what writers write.
DASHBOARD_WRITER_WINDOW_H = env_int("DASHBOARD_WRITER_WINDOW_H", 24, minimum=1)
# Pages (audit, GET /api/audit, /metrics, /jobs/workers) show the newest live check (a 1 s Celery broadcast), never
# waiting for one; one older than this is refreshed in the background (dashboard.fleet.recent). 0: a new check on
# every page.
DASHBOARD_LIVE_CHECK_MAX_AGE_S = env_int("DASHBOARD_LIVE_CHECK_MAX_AGE_S", 10, minimum=0)
# Beside a live DeerFlow: a checkpoint thread without DeerFlow's threads_meta row is an orphan once its newest
# checkpoint is this many seconds old (DeerFlow writes the row before the first checkpoint). Default one day.
DASHBOARD_ORPHAN_MIN_IDLE_S = env_int("DASHBOARD_ORPHAN_MIN_IDLE_S", 86_400, minimum=0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("DASHBOARD_LOG_LEVEL", "INFO")},
}
