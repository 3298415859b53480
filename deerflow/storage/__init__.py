"""DeerFlow's own tables beside the checkpoints: what the dashboard reads there
(:mod:`deerflow.storage.deerflow_tables`) and the ``checkpoint_write`` reservation it takes in ``runs``
(:mod:`deerflow.storage.reservation`)."""
