from django.urls import path

from dashboard.threads import api

app_name = "api"

urlpatterns = [
    path("threads", api.thread_list, name="threads"),
    path("threads/<path:thread_id>/state", api.thread_state, name="state"),
    path("threads/<path:thread_id>/history", api.thread_history, name="history"),
    path("threads/<path:thread_id>/namespaces", api.thread_namespaces, name="namespaces"),
]
