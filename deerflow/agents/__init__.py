"""DeerFlow agent-side state schemas (``deerflow.agents.thread_state``)."""
