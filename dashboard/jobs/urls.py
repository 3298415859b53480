from django.urls import path

from dashboard.jobs import confirm_views, policy_views, prune_views, reclaim_views, revert_views, views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="list"),
    path("launch", views.launch, name="launch"),
    path("compact/launch", views.compact_launch, name="compact_launch"),
    path("prune/launch", prune_views.prune_launch, name="prune_launch"),
    path("policies/", policy_views.policy_list, name="policies"),
    path("policies/new", policy_views.policy_edit, name="policy-new"),
    path("policies/<int:policy_id>/", policy_views.policy_edit, name="policy-edit"),
    path("reclaim", reclaim_views.reclaim, name="reclaim"),
    path("workers", views.worker_status, name="workers"),
    path("backups/", views.backup_list, name="backups"),
    path("backups/purge", revert_views.backup_purge, name="purge"),
    path("backups/revert", revert_views.backup_revert, name="revert-backup"),
    path("<int:job_id>/", views.job_detail, name="detail"),
    path("<int:job_id>/progress", views.job_progress, name="progress"),
    path("<int:job_id>/convert", views.confirm_convert, name="convert"),
    path("<int:job_id>/compact", views.confirm_compact, name="compact"),
    path("<int:job_id>/confirm", confirm_views.convert_confirm, name="confirm"),
    path("<int:job_id>/revert", confirm_views.revert_confirm, name="revert-confirm"),
    path("<int:job_id>/prune", prune_views.confirm_prune, name="prune"),
    path("<int:job_id>/prune/confirm", prune_views.prune_confirm, name="prune-confirm"),
    path("<int:job_id>/action", views.job_action, name="action"),
]
