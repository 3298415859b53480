"""The public surface issue 3 lists, at the module paths the spec gives, and a Django-free import."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

REQUIRED = {
    "deerflow.agents.thread_state": [
        "ThreadState", "DeltaThreadState", "delta_messages_field", "DELTA_MESSAGES_FIELD",
        "merge_message_writes", "get_thread_state_schema", "adapt_state_schema_for_mode",
        "normalize_middleware_state_schemas", "THREAD_STATE_REDUCER_FIELDS",
    ],
    "deerflow.runtime.checkpoint_mode": [
        "CHECKPOINT_MODE_METADATA_KEY", "INTERNAL_CHECKPOINT_MODE_KEY", "CheckpointModeMismatchError",
        "CheckpointModeReconfigurationError", "freeze_checkpoint_channel_mode", "frozen_checkpoint_channel_mode",
        "freeze_checkpoint_snapshot_frequency", "frozen_checkpoint_snapshot_frequency",
        "resolve_checkpoint_snapshot_frequency", "inject_checkpoint_mode", "checkpoint_metadata_uses_delta",
        "checkpoint_tuple_uses_delta", "state_snapshot_uses_delta", "raise_if_snapshot_incompatible",
        "raise_if_checkpoint_tuple_incompatible", "ensure_checkpoint_mode_compatible",
        "aensure_checkpoint_mode_compatible",
    ],
    "deerflow.runtime.checkpoint_state": [
        "CheckpointStateAccessor", "build_state_mutation_graph", "DegradedFullModeReadAccessor",
    ],
}
OWN_MODULES = [
    "deerflow.agents.thread_state", "deerflow.runtime.checkpoint_mode", "deerflow.runtime.checkpoint_state",
    "deerflow.errors", "deerflow.convert.digest", "deerflow.storage.savers", "deerflow.config",
    "deerflow.config.loader",
    "deerflow.config.database_config",
]


@pytest.mark.parametrize("module_name", list(REQUIRED))
def test_required_names_are_importable_from_the_spec_module_path(module_name):
    module = importlib.import_module(module_name)
    for name in REQUIRED[module_name]:
        assert hasattr(module, name), f"{module_name}.{name}"
        assert name in module.__all__, f"{name} missing from {module_name}.__all__"


def test_accessor_and_methods_exist_with_async_twins():
    from deerflow.runtime.checkpoint_state import CheckpointStateAccessor

    for sync_name in ("get", "history", "get_metadata", "update"):
        assert callable(getattr(CheckpointStateAccessor, sync_name))
        assert inspect.iscoroutinefunction(getattr(CheckpointStateAccessor, "a" + sync_name))
    assert isinstance(inspect.getattr_static(CheckpointStateAccessor, "bind"), classmethod)
    from deerflow.runtime import checkpoint_mode

    assert inspect.iscoroutinefunction(checkpoint_mode.aensure_checkpoint_mode_compatible)
    assert not inspect.iscoroutinefunction(checkpoint_mode.ensure_checkpoint_mode_compatible)


def test_runtime_re_exports_the_accessor_and_mode_symbols():
    import deerflow.runtime as runtime
    from deerflow.runtime import checkpoint_mode, checkpoint_state

    for source, names in ((checkpoint_mode, REQUIRED["deerflow.runtime.checkpoint_mode"]),
                          (checkpoint_state, REQUIRED["deerflow.runtime.checkpoint_state"])):
        for name in names:
            assert name in runtime.__all__, name
            assert getattr(runtime, name) is getattr(source, name), name
    for name in runtime.__all__:
        assert hasattr(runtime, name), name
    assert len(runtime.__all__) == len(set(runtime.__all__))


def test_error_classes_are_one_tree():
    from deerflow import errors
    from deerflow.runtime import checkpoint_mode

    assert checkpoint_mode.CheckpointModeMismatchError is errors.CheckpointModeMismatchError
    assert checkpoint_mode.CheckpointModeReconfigurationError is errors.CheckpointModeReconfigurationError
    for cls in (errors.CheckpointModeMismatchError, errors.CheckpointModeReconfigurationError, errors.ConfigError,
                errors.ThreadNotFoundError, errors.CheckpointNotFoundError):
        assert issubclass(cls, errors.DeerFlowError)


@pytest.mark.parametrize("module_name", OWN_MODULES)
def test_dunder_all_is_sorted_complete_and_resolvable(module_name):
    module = importlib.import_module(module_name)
    exported = module.__all__
    assert exported == sorted(exported), f"{module_name}.__all__ is not sorted"
    assert len(exported) == len(set(exported))
    for name in exported:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name}"
    # every public top-level def, class or assignment of the module itself
    tree = ast.parse(inspect.getsource(module))
    defined_here: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined_here.add(node.name)
        elif isinstance(node, ast.Assign):
            defined_here.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined_here.add(node.target.id)
    defined_here = {n for n in defined_here if not n.startswith("_")} - {"__all__"}
    missing = defined_here - set(exported)
    assert not missing, f"{module_name}: public names not in __all__: {sorted(missing)}"


@pytest.mark.parametrize(
    "first_import",
    ["deerflow.agents.thread_state", "deerflow.runtime", "deerflow.runtime.checkpoint_state",
     "deerflow.runtime.checkpoint_mode", "deerflow.storage.savers", "deerflow.config"],
)
def test_runtime_imports_in_any_order_without_django(first_import):
    """Each entry point imported first in a fresh interpreter (no import cycle), and Django stays out."""
    code = (
        f"import {first_import}\n"
        "import deerflow, deerflow.runtime, deerflow.agents.thread_state, deerflow.storage.savers, deerflow.config\n"
        "import deerflow.convert.digest, deerflow.errors\n"
        "import sys\n"
        "from deerflow.runtime import CheckpointStateAccessor\n"
        "from deerflow.agents.thread_state import get_thread_state_schema\n"
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))\n"
    )
    env_free = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), env=env_free)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# -- one public face per package ---------------------------------------------------
def _packages() -> list[str]:
    return sorted(".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "deerflow").rglob("__init__.py")
                  if p.parent != ROOT / "deerflow")


def test_every_package_is_listed_here():
    assert _packages() == sorted(FACES)


#: Each package's curated public names: a change to a face is a change to this list, reviewed as such.
FACES = {
    "deerflow.agents": [],
    "deerflow.config": ["CheckpointCacheConfig", "CheckpointDeltaConfig", "DatabaseConfig", "LoadedConfig",
                        "config_path_from_env", "load_config"],
    "deerflow.convert": [
        "BackupAlreadyPurgedError", "BackupInfo", "BackupNotFoundError", "EMPTY_MESSAGES_SHA256", "LANGGRAPH_TABLES",
        "MAX_SUPERSTEPS", "ReclaimReport", "STATUSES", "ThreadReport", "canonical_messages", "channels_sha256",
        "compact_thread", "convert_thread", "database_sizes", "dry_run_compact", "dry_run_thread", "list_backups",
        "messages_sha256", "purge_backup", "reclaim_space", "revert_thread"],
    "deerflow.inventory": [
        "CadenceInference", "CadenceOutliers", "CheckpointBytes", "InvalidCursorError", "LIST_CLASSES", "Namespace",
        "ORPHANED", "SORTS", "THREAD_CLASSES", "ThreadClass", "ThreadSummary", "WriterFacts", "cadence_outliers",
        "checkpoint_bytes", "class_counts", "classify", "count_threads", "current_summary", "decode_cursor",
        "deerflow_tables", "encode_cursor",
        "get_thread_summary", "has_subgraph_namespaces", "infer_cadences", "list_threads", "mode_totals",
        "recent_writer_facts", "storage_by_class", "storage_by_mode", "stored_bytes", "stored_summary", "summary",
        "summary_from_row", "thread_namespaces", "validate_list_args"],
    "deerflow.inventory.deerflow_tables": [
        "ABSENT", "ACTIVE_RUN_STATUSES", "DEFAULT_ORPHAN_MIN_IDLE_S", "MAX_OWNER_LENGTH", "OrphanTotals", "Presence",
        "RUNS_SHOWN", "RunRecord", "RunStatus", "ThreadFacts", "ThreadMeta", "ThreadOperationKind", "annotate",
        "list_conditions", "live_filter", "metadata_without_checkpoints", "orphan_floor", "orphan_totals",
        "orphaned_thread_ids", "presence", "still_orphaned", "thread_facts", "thread_meta", "thread_runs",
        "validate_owner"],
    "deerflow.inventory.summary": [
        "Freshness", "MIGRATIONS", "QUANTILES", "RefreshReport", "access", "depth_quantiles", "ensure_fresh",
        "ensure_schema", "freshness", "id_floor", "is_denied", "is_summary_table_missing", "readable", "refresh",
        "refresh_threads", "replay_depth_counts", "row_params", "row_select_sql", "summary_age_seconds", "version"],
    "deerflow.reader": [
        "CheckpointRow", "StateView", "ThreadReader", "Undecodable", "decode_error_for", "find_undecodable",
        "lineage_has_delta_evidence", "messages_stored", "pending_nodes", "unknown_channels"],
    "deerflow.retention": None,  # checked below against its own __all__ (sorted, resolvable)
    "deerflow.runtime": None,
    "deerflow.runtime.checkpoint_cache": None,
    "deerflow.seed": [
        "MAX_TEMPLATES", "MAX_THREADS", "MAX_TURNS", "MODES", "SUMMARY_TABLES", "SeedInterrupted", "SeedPlan",
        "SeedReport", "SeedTargetError", "SeededThread", "ThreadExistsError", "analyze", "check_target",
        "describe_database", "seed_threads"],
    "deerflow.storage": [
        "ActiveRun", "ConversionSession", "Dialect", "FailFastConnectionPool", "Reservation", "RunInFlightError",
        "SQLITE_SAVER_TABLES", "ServerUnreachable", "SqlReader", "Tx", "checkpoint_time", "config_for", "driver_error",
        "has_sql_tables", "is_sqlite_outage", "is_wal_file", "open_async_checkpointer", "open_checkpointer",
        "open_session", "owner_id", "postgres_connect_kwargs", "postgres_connection", "reader_for", "release_expired",
        "reserve_checkpoint_write", "sqlite_checkpoint_path", "storage_error", "table_exists", "translated"],
}


@pytest.mark.parametrize("package", sorted(FACES))
def test_each_package_face_is_curated_sorted_and_its_own(package):
    """A docstring naming its job, a sorted ``__all__`` equal to the reviewed list, every name defined inside it."""
    module = importlib.import_module(package)
    assert (module.__doc__ or "").strip(), f"{package} has no docstring"
    exported = list(getattr(module, "__all__", []))
    assert exported == sorted(exported) and len(exported) == len(set(exported)), f"{package}.__all__"
    if FACES[package] is not None:
        assert sorted(FACES[package]) == exported
    for name in exported:
        value = getattr(module, name)
        home = getattr(value, "__module__", None) or getattr(value, "__name__", "")
        if inspect.ismodule(value) or inspect.isclass(value) or inspect.isfunction(value):
            assert home.startswith(package) or home.startswith("deerflow.errors"), f"{package}.{name} from {home}"
