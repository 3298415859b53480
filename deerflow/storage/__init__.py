"""Storage: DeerFlow's own tables beside the checkpoints (:mod:`deerflow.storage.deerflow_tables`)."""
