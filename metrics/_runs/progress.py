"""When a progress bar shows, and what it says: one rule for every sweep, study and reference.

- nothing left to do (a rerun that loads every cell from its store): no bar, whatever ``progress``;
- ``progress=False``: no bar; ``progress=True``: a bar at once;
- ``progress=None`` (the default of every study and sweep): a bar that appears once the work has
  run :data:`AUTO_DELAY` seconds (tqdm's ``delay``), so a quick run stays silent and a long one
  shows its progress without being asked.

The label names the work: ``"S^2 study"``, ``"phase diagram"``, ``"chaos study"``, ``"reference"``,
``"sweep"``.
"""

from __future__ import annotations

import contextlib

from particles import tqdm_class

__all__ = ["AUTO_DELAY", "progress_bar", "progress_step"]

#: seconds of work after which a bar appears when ``progress=None``
AUTO_DELAY = 2.0


def progress_bar(progress: bool | None, *, total: int, done: int = 0, desc: str, unit: str = "cell"):
    """A tqdm bar over ``total`` units of which ``done`` are finished already, or None (module rule)."""
    if progress is False or total - done <= 0:
        return None
    return tqdm_class()(total=total, initial=done, desc=desc, unit=unit, delay=0.0 if progress else AUTO_DELAY)


@contextlib.contextmanager
def progress_step(progress: bool | None, desc: str):
    """A one-step bar around work that reports no progress of its own (e.g. building a reference):
    under the module rule it shows, with the elapsed time, when the step is long or asked for."""
    bar = progress_bar(progress, total=1, desc=desc, unit="step")
    try:
        yield
        if bar is not None:
            bar.update(1)
    finally:
        if bar is not None:
            bar.close()
