"""What the sums of a run did: the route each head took and the largest a-posteriori bound met.

:func:`recording` opens a record for the calls made inside it (``simulate`` opens one per run);
:func:`note` is called with the :class:`HeadSums` of every pass, and does nothing when no record
is open. A context variable holds the record, so concurrent runs in threads keep their own.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging

__all__ = ["SummationRecord", "recording", "note", "note_exact"]

logger = logging.getLogger("headflow.summation")

_OPEN: contextvars.ContextVar[SummationRecord | None] = contextvars.ContextVar("headflow_summation", default=None)


class SummationRecord:
    """The routes of each head (``"exact"`` or the fast route; several when a run changed route)
    and the largest bound on the relative error of a partition function (0: exact sums)."""

    def __init__(self):
        self.routes: dict[int, set] = {}
        self.bound_max = 0.0

    def add(self, head: int, method: str, bound: float) -> None:
        self.routes.setdefault(head, set()).add(method)
        self.bound_max = max(self.bound_max, float(bound))

    def summary(self) -> dict:
        """``{"route": one str per head ("exact", "circle", "exact+circle", ...), "bound_max": float}``,
        or ``{}`` when no sum was noted (a field of its own)."""
        if not self.routes:
            return {}
        return {"route": ["+".join(sorted(self.routes[h])) for h in sorted(self.routes)],
                "bound_max": self.bound_max}


def note(results, head: int | None = None) -> None:
    """Note the sums of every head (``results`` a list of HeadSums), or of one head (``head``)."""
    rec = _OPEN.get()
    if rec is None:
        return
    for h, res in ([(head, results)] if head is not None else enumerate(results)):
        rec.add(h, res.method, res.bound)


def note_exact(n_heads: int) -> None:
    """Note exact sums (bound 0) for heads 0..n_heads-1 (an ensemble's batched passes)."""
    rec = _OPEN.get()
    for h in range(n_heads if rec is not None else 0):
        rec.add(h, "exact", 0.0)


@contextlib.contextmanager
def recording(caller: str):
    """Open a :class:`SummationRecord` for the sums computed inside the block (nested blocks
    each keep their own); at its end, log the routes and the bound at INFO level."""
    rec = SummationRecord()
    token = _OPEN.set(rec)
    try:
        yield rec
    finally:
        _OPEN.reset(token)
    if rec.routes:
        said = rec.summary()
        logger.info("%s: summation route per head %s, largest error bound %.3g", caller, said["route"],
                    said["bound_max"])
