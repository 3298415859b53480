"""DeerFlow's thread state schemas for both checkpoint channel modes, at DeerFlow's module path.

Spec section "State schemas". The schemas, their reducers and the delta
``messages`` reducer :func:`merge_message_writes` are defined in
:mod:`deerflow.runtime.state_schemas` (the runtime compiles them and they read
its mode freeze); this module is the path DeerFlow imports them from, with the
same names, signatures and objects.
"""

from __future__ import annotations

from deerflow.runtime.state_schemas import (
    DELTA_MESSAGES_FIELD,
    THREAD_STATE_REDUCER_FIELDS,
    DeltaThreadState,
    ThreadState,
    adapt_state_schema_for_mode,
    delta_messages_field,
    get_thread_state_schema,
    merge_artifacts,
    merge_goal,
    merge_list_unique,
    merge_message_writes,
    merge_promoted,
    merge_sandbox,
    merge_todos,
    merge_viewed_images,
    normalize_middleware_state_schemas,
)

__all__ = [
    "DELTA_MESSAGES_FIELD",
    "DeltaThreadState",
    "THREAD_STATE_REDUCER_FIELDS",
    "ThreadState",
    "adapt_state_schema_for_mode",
    "delta_messages_field",
    "get_thread_state_schema",
    "merge_artifacts",
    "merge_goal",
    "merge_list_unique",
    "merge_message_writes",
    "merge_promoted",
    "merge_sandbox",
    "merge_todos",
    "merge_viewed_images",
    "normalize_middleware_state_schemas",
]
