"""URL configuration: pages under /threads/, the JSON API under /api/, login under /accounts/."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.http import require_safe
from django.views.generic import RedirectView

from dashboard.accounts import tokens as token_views
from dashboard.accounts.views import LoginView
from dashboard.health import healthz
from dashboard.metrics import metrics
from dashboard.threads import views as thread_views


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico`` (browsers ask for it whatever the page links): the static SVG icon, permanently."""
    return HttpResponsePermanentRedirect(static("dashboard/favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    # Unauthenticated liveness (frozen mode only, no data): container health checks.
    path("healthz", healthz, name="healthz"),
    # Prometheus scrapes with DASHBOARD_METRICS_TOKEN (dashboard.metrics); no session.
    path("metrics", metrics, name="metrics"),
    path("", RedirectView.as_view(pattern_name="threads:list", permanent=False), name="home"),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/tokens/", token_views.token_list, name="tokens"),
    path("accounts/tokens/create", token_views.token_create, name="token-create"),
    path("accounts/tokens/revoke", token_views.token_revoke, name="token-revoke"),
    path("threads/", include("dashboard.threads.urls")),
    # Outside /threads/ so that no thread id (which may contain "/") can shadow it.
    path("history/<path:thread_id>/", thread_views.thread_history, name="thread-history"),
    # Thread ids that are a dot segment ("." or "..") cannot travel in a path:
    # browsers collapse them (see dashboard.threads.links).
    path("thread/", thread_views.thread_detail_by_query, name="thread-detail-by-query"),
    path("history/", thread_views.thread_history_by_query, name="thread-history-by-query"),
    path("api/", include("dashboard.threads.api_urls")),
    path("jobs/", include("dashboard.jobs.urls")),
    path("api/", include("dashboard.jobs.api_urls")),
    path("", include("dashboard.fleet.urls")),
    # Superusers: login lockouts (django-axes), API tokens and the audit log of writes.
    path("admin/", admin.site.urls),
]

# Django's error handlers answer in the project's format (dashboard.errors.handlers): JSON under /api/, the error page
# elsewhere. CSRF failures: settings.CSRF_FAILURE_VIEW; 405s: dashboard.errors.middleware.MethodNotAllowedMiddleware.
handler400 = "dashboard.errors.handlers.bad_request"
handler403 = "dashboard.errors.handlers.permission_denied"
handler404 = "dashboard.errors.handlers.not_found"
handler500 = "dashboard.errors.handlers.server_error"
