"""What the dashboard reads and writes in DeerFlow's own application tables beside the checkpoints
(``runs``: the ``checkpoint_write`` reservation, :mod:`deerflow.storage.reservation`)."""

__all__: list[str] = []
