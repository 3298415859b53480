"""The job-kind registry's laws (``dashboard/jobs/kinds/__init__.py``) hold for every kind."""

from __future__ import annotations

from dashboard.jobs import kinds
from dashboard.jobs.models import Kind


def test_every_model_kind_is_declared_once_under_its_own_name():
    assert sorted(kinds.KINDS) == sorted(Kind.values)
    assert all(kinds.get(k).name == k for k in Kind.values)


def test_a_writing_kind_and_its_dry_run_name_each_other():
    pairs = {(w.name, w.estimated_by) for w in kinds.KINDS.values() if w.estimated_by}
    assert pairs == {("convert", "dry_run"), ("compact", "compact_dry_run"), ("prune", "prune_dry_run")}
    for writer, dry in pairs:
        assert kinds.get(dry).dry_run_of == writer and not kinds.get(dry).writes_threads
        assert kinds.get(writer).confirmation is not None and kinds.get(writer).would_write


def test_the_kinds_that_write_threads_and_their_permissions():
    assert {k.name for k in kinds.KINDS.values() if k.writes_threads} == {"convert", "compact", "prune", "revert"}
    assert {k.name for k in kinds.writing_kinds()} == {"convert", "compact", "prune"}
    retention = {k.name for k in kinds.KINDS.values() if k.permission == kinds.MANAGE_RETENTION}
    assert retention == {"prune_dry_run", "prune"}
    assert [k.name for k in kinds.KINDS.values() if k.permission_from_source] == ["revert"]


def test_worker_modes_follow_what_each_kind_reads():
    modes = {k.name: k.worker_mode for k in kinds.KINDS.values()}
    assert modes == {"dry_run": "thread", "convert": "thread", "compact_dry_run": "delta", "compact": "delta",
                     "prune_dry_run": "delta", "prune": "delta", "revert": "delta", "reclaim": "any"}


def test_a_refusal_names_the_permission_to_ask_for():
    for permission in kinds.JOB_PERMISSIONS:
        view = kinds.refusal(permission)
        assert (view.status, view.code) == (403, "permission_denied") and permission in view.hint
    assert all(p in kinds.refusal().hint for p in kinds.JOB_PERMISSIONS)


def test_launch_permissions_of_bodies_that_name_no_known_backup_or_kind():
    assert kinds.launch_permissions(Kind.REVERT, None, {"backup_ids": "not a list"}) == {kinds.MANAGE_CONVERSIONS}
    assert kinds.launch_permissions("no such kind") == {kinds.MANAGE_CONVERSIONS}
    assert kinds.launch_permissions(Kind.PRUNE) == {kinds.MANAGE_RETENTION}
