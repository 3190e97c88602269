"""Validation of stacks of saved states and their times (trajectory-level inputs)."""

from __future__ import annotations

import numpy as np

from .arrays import check_finite, check_real_array, unit_hint
from .errors import InvalidParameterError
from .validation import _fmt

__all__ = ["check_states", "check_times"]


def check_states(xs, name: str = "xs", caller: str = "", *, d: int | None = None, min_times: int = 1,
                 on_sphere: bool = True, atol: float = 1e-8) -> np.ndarray:
    """Validate saved states of shape ``(n_times, n, d)`` (a trajectory's ``x``).

    ``min_times`` is the number of saved times the caller needs (e.g. 3 for a derivative).
    """
    if xs is None or isinstance(xs, (str, bytes)):
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} must be an array of shape (n_times, n, d); got {type(xs).__name__}. "
            "Simulate with SaveAt(x=True)."
        )
    arr = np.asarray(xs)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise InvalidParameterError(f"{name}{_fmt(caller)} must hold real numbers; got dtype {arr.dtype}.")
    if arr.ndim != 3:
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} must have shape (n_times, n, d); got shape {arr.shape}."
        )
    if arr.shape[1] < 1 or arr.shape[2] < 1:
        raise InvalidParameterError(f"{name}{_fmt(caller)} must hold at least one point with one coordinate; got "
                                    f"shape {arr.shape}.")
    if arr.shape[0] < min_times:
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} needs at least {min_times} saved times; got {arr.shape[0]}. "
            "Save more times (SaveAt(ts=...))."
        )
    if d is not None and arr.shape[2] != d:
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} has d = {arr.shape[2]} components but the model is {d}-dimensional."
        )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    check_finite(arr, name, caller)
    if on_sphere:
        dev = float(np.max(np.abs(np.linalg.norm(arr, axis=-1) - 1.0)))
        if dev > atol:
            raise InvalidParameterError(
                f"{name}{_fmt(caller)} must lie on the unit sphere (max |‖x_i‖ − 1| = {dev:.1e} > atol={atol:g}); "
                + unit_hint(name, getattr(xs, "dtype", None), dev)
            )
    return arr


def check_times(ts, n_times: int, name: str = "ts", caller: str = "") -> np.ndarray:
    """Validate strictly increasing finite times of length ``n_times``."""
    t = check_real_array(ts, name, caller, finite=False, min_size=0, expected=f"an array of shape ({n_times},)")
    if t.shape != (n_times,):
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} must have shape ({n_times},) to match the saved states; got shape {t.shape}."
        )
    check_finite(t, name, caller)
    if n_times > 1 and np.any(np.diff(t) <= 0):
        raise InvalidParameterError(f"{name}{_fmt(caller)} must be strictly increasing.")
    return t
