from django.urls import path

from dashboard.fleet import api, views

urlpatterns = [
    path("audit/", views.audit_page, name="audit"),
    path("audit/dismiss", views.dismiss_process, name="audit-dismiss"),
    path("audit/clear-stopped", views.clear_stopped_processes, name="audit-clear-stopped"),
    path("api/audit", api.audit, name="api-audit"),
    path("api/processes/heartbeat", api.heartbeat, name="api-heartbeat"),
]
