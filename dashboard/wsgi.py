"""WSGI entry point (gunicorn, and ``runserver``, which loads it at start-up).

The process freezes its checkpoint channel mode and cadence from config.yaml
here, before serving any request; a bad config.yaml stops start-up with a
message naming the file, the key and the allowed values.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

application = get_wsgi_application()

from django.conf import settings  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from dashboard.runtime import serving_startup  # noqa: E402
from deerflow.errors import ConfigError  # noqa: E402

try:
    _runtime = serving_startup(settings.DEER_FLOW_CONFIG_PATH)
except ConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from exc

from dashboard.fleet.registry import register  # noqa: E402

register(_runtime, "web")
