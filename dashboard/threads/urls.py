from django.urls import path

from dashboard.threads import views

app_name = "threads"

urlpatterns = [
    path("", views.thread_list, name="list"),
    path("<path:thread_id>/", views.thread_detail, name="detail"),
]
