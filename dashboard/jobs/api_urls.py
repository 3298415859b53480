from django.urls import path

from dashboard.jobs import api

app_name = "jobs_api"

urlpatterns = [
    path("jobs", api.jobs, name="jobs"),
    path("jobs/<int:job_id>", api.job, name="job"),
]
