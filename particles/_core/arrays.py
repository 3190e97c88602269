"""Checkers of array input (the array half of :mod:`particles._core.validation`, same contract):
real float64 arrays, point clouds (on the sphere or not), weights, square matrix stacks, and
the value a user's callable returns on a probe call."""

from __future__ import annotations

import warnings

import numpy as np

from .errors import InvalidParameterError
from .numerics import rowdot
from .validation import _fmt, _typename

__all__ = ["check_finite", "check_real_array", "check_points", "check_weights", "check_source_weights",
           "check_square_stack", "check_returned", "check_within", "check_integers", "check_varies", "check_scale"]


def check_finite(a: np.ndarray, name: str, caller: str = "") -> None:
    """Raise if ``a`` holds NaN or inf.

    The cheap O(1)-memory test (``isfinite(sum)``) runs first; only on failure is the
    element-wise pass made, to say whether NaN or inf was found and how many.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        # the sum may overflow to inf for huge finite entries: the slow pass then decides
        total = a.sum()
    if np.isfinite(total):
        return
    n_nan = int(np.isnan(a).sum())
    n_inf = int(np.isinf(a).sum())
    if n_nan == 0 and n_inf == 0:
        return
    # (the subject is worded as by the other array checkers: ``name`` may already be a phrase)
    raise InvalidParameterError(
        f"{name}{_fmt(caller)} must be finite; got {n_nan} NaN and {n_inf} inf entries. "
        "Remove or replace them before calling."
    )


def check_real_array(a, name: str, caller: str = "", *, ndim: int | tuple | None = None, shape: tuple | None = None,
                     finite: bool = True, min_size: int = 1, expected: str = "", within: tuple | None = None,
                     ) -> np.ndarray:
    """Convert ``a`` to a C-contiguous float64 array, refusing what would be cast silently.

    Refused: ``None``, strings, ragged or object arrays, booleans, complex numbers (numpy
    would drop the imaginary part with only a warning), non-finite entries (unless
    ``finite=False``), fewer than ``min_size`` entries, and a wrong ``ndim`` or ``shape``
    (``None`` entries of ``shape`` match any length), and with ``within = (lo, hi)`` an entry outside
    the domain [lo, hi] beyond round-off (:func:`check_within`).
    """
    what = expected or (f"a real array of shape {shape}" if shape is not None else "a real array")
    where = f"{name}{_fmt(caller)}"
    if a is None or isinstance(a, (str, bytes, dict, set)) or callable(a):
        raise InvalidParameterError(f"{where} must be {what}; got {_typename(a)}.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a ragged sequence must not become an object array quietly
            arr = np.asarray(a)
    except Exception as exc:
        raise InvalidParameterError(
            f"{where} must be {what}; got {_typename(a)} that numpy cannot turn into a rectangular array ({exc})."
        ) from None
    if np.iscomplexobj(arr):
        raise InvalidParameterError(
            f"{where} must be real; got complex dtype {arr.dtype}. Pass the real part explicitly (np.real(...))."
        )
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise InvalidParameterError(f"{where} must hold real numbers; got dtype {arr.dtype}. Pass a float array.")
    ndims = (ndim,) if isinstance(ndim, int) else ndim
    if shape is not None:
        ok = arr.ndim == len(shape) and all(s is None or s == k for s, k in zip(shape, arr.shape))
        if not ok:
            spec = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
            raise InvalidParameterError(f"{where} must have shape {spec}; got shape {arr.shape}.")
    elif ndims is not None and arr.ndim not in ndims:
        raise InvalidParameterError(
            f"{where} must be {what} with {' or '.join(map(str, ndims))} dimension(s); got shape {arr.shape}."
        )
    if arr.size < min_size:
        raise InvalidParameterError(f"{where} must have at least {min_size} entries; got shape {arr.shape}.")
    arr = np.asarray(arr, dtype=np.float64, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if finite:
        check_finite(arr, name, caller)
    return arr if within is None else check_within(arr, within, where)


def check_integers(a, name: str, caller: str = "", *, what: str = "integers") -> np.ndarray:
    """The rule of integer input (ids, indices): an integer dtype, returned as int64. Floats are refused even
    when integral (``[1.0, 2.0]`` is more likely positions or weights than ids), and so are booleans."""
    arr = np.asarray(a) if isinstance(a, (list, tuple, np.ndarray)) else None
    if arr is None or arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise InvalidParameterError(f"{name}{_fmt(caller)} must be {what} of an integer dtype; got "
                                    f"{_typename(a) if arr is None else arr.dtype}. Floats are not taken as integers, "
                                    f"even integral ones: if they are, pass np.asarray({name}, dtype=np.int64).")
    return arr.astype(np.int64)


def check_varies(arr: np.ndarray, name: str, caller: str = "", *, why: str) -> None:
    """The rule of a degenerate input: entries all equal (to round-off) where the result needs them to differ
    are refused, not turned into a NaN or a meaningless number; ``why`` says what they would make of it."""
    if not (np.ptp(arr) if arr.size else 0.0) > 1e-12 * np.max(np.abs(arr), initial=0.0):
        raise InvalidParameterError(f"{name}{_fmt(caller)} must not be constant ({why}); got {arr.size} "
                                    f"value(s) all equal to {float(arr.flat[0]) if arr.size else np.nan:.6g}.")


def check_within(arr: np.ndarray, domain: tuple, where: str) -> np.ndarray:
    """The rule of a bounded domain: an entry outside ``[lo, hi]`` by more than round-off (1e-12 of the
    bound) is refused, never clipped without a word; one outside by round-off is put on the boundary."""
    (lo, hi), slack = domain, 1e-12  # (NaN, where allowed, is neither in nor out)
    out = ((arr < lo - slack * max(1.0, abs(lo))) | (arr > hi + slack * max(1.0, abs(hi))))
    if np.any(out):
        raise InvalidParameterError(f"{where} must lie in [{lo:g}, {hi:g}] (its domain; a value outside is not "
                                    f"clipped); got {int(out.sum())} value(s) outside, e.g. {arr[out].flat[0]:.6g}.")
    return np.clip(arr, lo, hi)


def check_points(x, name: str = "x", caller: str = "", *, on_sphere: bool = True, atol: float = 1e-10, min_d: int = 2,
                 min_n: int = 1, d: int | None = None) -> np.ndarray:
    """Validate a point cloud of shape ``(n, d)``.

    Parameters
    ----------
    x : array_like of shape (n, d)
        Points (rows). Converted to C-contiguous float64.
    on_sphere : bool
        Require unit rows: ``max_i |‖x_i‖ − 1| <= atol``.
    d : int, optional
        Required number of columns (the ambient dimension of the other arguments).

    Returns
    -------
    ndarray of shape (n, d), float64
    """
    where = f"{name}{_fmt(caller)}"
    if isinstance(x, (str, bytes)) or x is None:
        raise InvalidParameterError(f"{where} must be an array of shape (n, d); got {_typename(x)}.")
    arr = check_real_array(x, name, caller, finite=False, min_size=0, expected="an array of shape (n, d)")
    if arr.ndim != 2 or arr.shape[1] < min_d or arr.shape[0] < min_n:
        raise InvalidParameterError(
            f"{where} must have shape (n, d) with n >= {min_n} and d >= {min_d}; got shape {arr.shape}."
        )
    if d is not None and arr.shape[1] != d:
        raise InvalidParameterError(
            f"{where} must have d = {d} columns to match the other arguments; got shape {arr.shape}."
        )
    check_finite(arr, name, caller)
    if on_sphere:
        dev = float(np.max(np.abs(np.sqrt(rowdot(arr, arr)) - 1.0)))
        if dev > atol:
            raise InvalidParameterError(f"{name} must lie on the unit sphere (max |‖x_i‖ − 1| = {dev:.1e} > "
                                        f"atol={atol:g}); " + unit_hint(name, getattr(x, "dtype", None), dev))
    return arr


def unit_hint(name: str, dtype, dev: float = 1.0) -> str:
    """How to put points on the sphere: a float32 (float16) array normalised in its own precision has norms off
    by ~1e-7, so it is cast to float64 first (said too for a deviation ``dev`` that small: a lost dtype)."""
    if isinstance(dtype, np.dtype) and dtype.kind == "f" and dtype.itemsize < 8:  # (else: the deviation tells)
        return (f"{name} is {dtype.name} (norms good to ~{np.finfo(dtype).eps:.0e} only, whatever the "
                f"normalisation): cast it first, {name} = np.asarray({name}, dtype=np.float64), then "
                f"{name} / np.linalg.norm({name}, axis=-1, keepdims=True).")
    tail = " in float64 (norms off by < 1e-6: normalised in float32? cast to float64 first)" if dev < 1e-6 else ""
    return f"use {name} / np.linalg.norm({name}, axis=-1, keepdims=True){tail}."


def check_weights(weights, n: int, name: str = "weights", caller: str = "") -> np.ndarray:
    """Validate probability weights of length ``n``; ``None`` means uniform.

    Weights must be finite, non-negative and sum to 1 within 1e-8 (they are then
    renormalised exactly, so the returned vector sums to 1 to round-off).
    """
    if weights is None:
        return np.full(n, 1.0 / n)
    w = check_real_array(weights, name, caller, finite=False, min_size=0, expected=f"an array of shape ({n},)")
    if w.shape != (n,):
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} must have shape ({n},) to match the points; got shape {w.shape}."
        )
    check_finite(w, name, caller)
    if np.any(w < 0):
        raise InvalidParameterError(f"{name}{_fmt(caller)} must be non-negative; got min {w.min():.3g}.")
    s = w.sum()
    if abs(s - 1.0) > 1e-8:
        raise InvalidParameterError(f"{name}{_fmt(caller)} must sum to 1; got sum {s:.12g}. Use {name} / {name}.sum().")
    return w / s


def check_source_weights(weights, n: int, caller: str = "") -> np.ndarray:
    """Validate non-negative source weights of shape (n,) (any total, unlike :func:`check_weights`)."""
    w = check_real_array(weights, "weights", caller, ndim=(1,), expected=f"source weights of shape ({n},)")
    if w.shape != (n,) or np.any(w < 0):
        raise InvalidParameterError(f"weights{_fmt(caller)} must be non-negative with shape ({n},) (one per "
                                    f"source); got shape {w.shape}, min {w.min():.3g}.")
    return check_scale(w, "weights", caller)


def check_scale(arr: np.ndarray, name: str, caller: str = "") -> np.ndarray:
    """The rule of values whose scale does not matter (weights, a density up to a constant): the largest must be
    a normal float64 (>= 2.2e-308); subnormal values carry fewer digits and their products underflow (0/0: NaN)."""
    if 0 < np.max(np.abs(arr), initial=0.0) < np.finfo(np.float64).tiny:
        raise InvalidParameterError(f"{name}{_fmt(caller)} are all below 2.2e-308, where float64 loses digits (and "
                                    "products underflow to 0); the result does not depend on their scale: multiply "
                                    "them by a constant, e.g. 1e300.")
    return arr


def check_square_stack(a, name: str, d: int | None = None, caller: str = "") -> np.ndarray:
    """Validate a stack of square matrices; a single ``(d, d)`` matrix becomes ``(1, d, d)``."""
    if a is None or isinstance(a, (str, bytes)):
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} must be an array of shape (d, d) or (H, d, d); got {type(a).__name__}."
        )
    arr = check_real_array(a, name, caller, finite=False, min_size=0, expected="an array of shape (d, d) or (H, d, d)")
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} must have shape (d, d) or (H, d, d); got shape {np.shape(a)}."
        )
    if d is not None and arr.shape[1] != d:
        raise InvalidParameterError(
            f"{name}{_fmt(caller)} must be {d} x {d} to match the other matrices; got shape {np.shape(a)}."
        )
    check_finite(arr, name, caller)
    return np.ascontiguousarray(arr)


def check_returned(value, what: str, expected_shape: tuple, caller: str = "", *, fix: str = "") -> np.ndarray:
    """Validate the value returned by a user callable on a probe call.

    ``what`` names the call (e.g. ``"field(t0, x0)"``); the value must be a finite real
    array of exactly ``expected_shape`` (no broadcasting).
    """
    if value is None:
        raise InvalidParameterError(
            f"{what}{_fmt(caller)} returned None; it must return an array of shape {expected_shape}. {fix}".rstrip()
        )
    arr = check_real_array(value, what, caller, finite=False, min_size=0,
                           expected=f"an array of shape {expected_shape}")
    if arr.shape != tuple(expected_shape):
        raise InvalidParameterError(
            f"{what}{_fmt(caller)} must return an array of shape {tuple(expected_shape)}; got shape {arr.shape} "
            f"(it is not broadcast). {fix}".rstrip()
        )
    return arr
