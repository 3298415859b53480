"""Reading stored threads: :class:`ThreadReader` and the typed views it returns.

* :mod:`deerflow.reader.views` -- :class:`StateView`, :class:`CheckpointRow`, facts of a raw tuple;
* :mod:`deerflow.reader.gates` -- the full-mode lineage gate and the replay rule;
* :mod:`deerflow.reader.reader` -- :class:`ThreadReader`, the read path itself.
"""

from deerflow.reader.reader import ThreadReader
from deerflow.reader.views import CheckpointRow, StateView, messages_stored, pending_nodes

__all__ = ["CheckpointRow", "StateView", "ThreadReader", "messages_stored", "pending_nodes"]
