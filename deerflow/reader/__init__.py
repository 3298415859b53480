"""Reading stored threads: :class:`ThreadReader` and the typed views it returns.

* :mod:`deerflow.reader.views` -- :class:`StateView`, :class:`CheckpointRow`, facts of a raw tuple;
* :mod:`deerflow.reader.gates` -- the full-mode lineage gate and the replay rule;
* :mod:`deerflow.reader.reader` -- :class:`ThreadReader`, the read path itself.
"""

from deerflow.reader.blobcheck import Undecodable, decode_error_for, find_undecodable
from deerflow.reader.lineage_gate import lineage_has_delta_evidence
from deerflow.reader.reader import ThreadReader
from deerflow.reader.views import CheckpointRow, StateView, messages_stored, pending_nodes, unknown_channels

__all__ = [
    "CheckpointRow",
    "StateView",
    "ThreadReader",
    "Undecodable",
    "decode_error_for",
    "find_undecodable",
    "lineage_has_delta_evidence",
    "messages_stored",
    "pending_nodes",
    "unknown_channels",
]
