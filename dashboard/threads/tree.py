"""The checkpoint history drawn as a tree, one page at a time (``git log --graph`` style, newest first).

Rows come newest first (the saver's ``list`` order). Each *lane* (column)
waits for one checkpoint id: the parent of the row drawn last in it. A row
takes the lane waiting for it (a new lane when none is: the tip of a
branch); when several lanes wait for the same id, that checkpoint is a
*fork point* and the extra lanes end there. After the row, its lane waits
for the row's parent.

Paging: the lanes still open at the end of a page (``lanes_after``) travel
to the next page as a comma-separated list of ids, so the tree continues.
A bad list only draws oddly; it never changes which rows are shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TreeRow", "draw_tree", "parse_lanes"]

#: Lanes kept at most (more branches than this draw in the last column).
MAX_LANES = 12


@dataclass(frozen=True)
class TreeRow:
    """A history row with its place in the tree.

    Attributes:
        row: the :class:`dashboard.threads.services.CheckpointRow`.
        cells: one glyph per lane: ``●`` this checkpoint, ``│`` a branch passing by,
            ``┘`` a branch that forked from this checkpoint, ``" "`` nothing.
        column: the lane of this checkpoint (0-based; the indentation).
        fork_children: branches that meet here (>= 2 at a fork point, else 0).
        branch_tip: this checkpoint starts a branch below the page's first row (newest of its branch).
        kind: ``snapshot`` (a ``_DeltaSnapshot``), ``delta step`` (delta, messages only as writes),
            ``full value`` (the whole list stored) or ``no messages``.
    """

    row: Any
    cells: tuple[str, ...]
    column: int
    fork_children: int
    branch_tip: bool
    kind: str


def parse_lanes(text: str | None) -> list[str | None]:
    """The lanes of a ``lanes=`` parameter (``""`` entries are free lanes)."""
    if not text:
        return []
    return [part or None for part in text.split(",")[:MAX_LANES]]


def _kind(row: Any) -> str:
    if row.messages_stored == "delta_snapshot":
        return "snapshot"
    if row.messages_stored == "plain":
        return "full value"
    return "delta step" if row.mode == "delta" else "no messages"


def draw_tree(rows: list[Any], lanes: list[str | None], *, first_page: bool) -> tuple[list[TreeRow], str]:
    """Place ``rows`` (newest first) in lanes continuing ``lanes`` from the page above.

    Args:
        rows: history rows with ``checkpoint_id`` and ``parent_checkpoint_id``.
        lanes: the ids each lane waits for (from :func:`parse_lanes`).
        first_page: the first row is the head (not a "branch tip").

    Returns:
        ``(tree rows, lanes_after)``; ``lanes_after`` is the ``lanes=`` value for the next page.
    """
    lanes = list(lanes)
    out = []
    for position, row in enumerate(rows):
        waiting = [i for i, lane in enumerate(lanes) if lane == row.checkpoint_id]
        tip = not waiting
        if waiting:
            column = waiting[0]
        elif None in lanes:
            column = lanes.index(None)
        elif len(lanes) < MAX_LANES:
            lanes.append(None)
            column = len(lanes) - 1
        else:
            column = len(lanes) - 1
        merging = set(waiting[1:])
        cells = tuple("●" if i == column else "┘" if i in merging else "│" if lane else " "
                      for i, lane in enumerate(lanes))
        for i in merging:
            lanes[i] = None
        lanes[column] = row.parent_checkpoint_id
        while lanes and lanes[-1] is None:
            lanes.pop()
        out.append(TreeRow(row=row, cells=cells, column=column,
                           fork_children=len(waiting) if len(waiting) > 1 else 0,
                           branch_tip=tip and not (first_page and position == 0), kind=_kind(row)))
    return out, ",".join(lane or "" for lane in lanes)
