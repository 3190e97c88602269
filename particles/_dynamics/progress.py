"""The progress bar of a run: on, off, or (``progress=None``, the default) on once the run, timed as
it goes, is forecast to take more than :data:`AUTO_SECONDS` in all."""

from __future__ import annotations

import time

__all__ = ["AUTO_SECONDS", "progress_bar"]

#: a run forecast above this many seconds (elapsed / fraction done) shows its bar
AUTO_SECONDS = 5.0
#: the forecast waits for this much wall time, so that the first steps' set-up does not decide
_WAIT_SECONDS = 0.5


def _open(tqdm_class, total: float, method: str, initial: float = 0.0):
    # time advances by float steps: show n and total rounded (not 9.299999999999999/10.0)
    return tqdm_class()(total=total, initial=initial, unit="time", desc=f"simulate[{method}]",
                        bar_format="{l_bar}{bar}| t = {n:.4g}/{total:.4g} [{elapsed}<{remaining}]")


class _AutoBar:
    """A bar that opens itself once the forecast of the whole run passes :data:`AUTO_SECONDS`."""

    def __init__(self, tqdm_class, total: float, method: str):
        self.tqdm_class, self.total, self.method = tqdm_class, total, method
        self.start, self.done, self.bar = time.perf_counter(), 0.0, None

    def update(self, dt: float) -> None:
        self.done += dt
        if self.bar is not None:
            self.bar.update(dt)
            return
        elapsed = time.perf_counter() - self.start
        if elapsed > _WAIT_SECONDS and self.done > 0 and elapsed * self.total / self.done > AUTO_SECONDS:
            self.bar = _open(self.tqdm_class, self.total, self.method, initial=self.done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def progress_bar(progress: bool | None, total: float, method: str, tqdm_class):
    """A bar with ``update(dt)`` and ``close()``: tqdm's (``progress=True``), one that opens when the
    run is forecast to be long (``None``), or None (``False``)."""
    if progress is False or total <= 0:
        return None
    return _open(tqdm_class, total, method) if progress else _AutoBar(tqdm_class, total, method)
