"""DeerFlow's agent-side state schemas at DeerFlow's module path (``deerflow.agents.thread_state``).

A face over :mod:`deerflow.runtime.state_schemas`: this package imports the runtime, never the reverse.
"""
