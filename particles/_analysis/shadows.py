r"""Radial shadows of the head outputs and the radial-dominance margin (docs/theory.md §3).

For head outputs :math:`f^h_i` at tokens :math:`x_i` on the sphere: the radial shadow
:math:`a^h_i = \langle f^h_i, x_i\rangle`, the tangential part
:math:`\|P f^h_i\|^2 = \|f^h_i\|^2 - (a^h_i)^2`, the other heads' shadows
:math:`\sum_{k\ne h}|a^k_i|`, and the margin of Condition 8,
:math:`m^h_i = \|P f^h_i\|^2 - \|f^h_i\|\sum_{k\ne h}|a^k_i|`. One place computes them for
:func:`~particles.diagnose`, :func:`~particles.rd_margins` and :func:`~particles.head_rate_bounds`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RadialParts", "radial_parts"]


@dataclass(frozen=True)
class RadialParts:
    """Per head and token, shape (H, n): ``shadow`` a, ``norm2`` ‖f‖², ``tangential2`` ‖Pf‖²,
    ``others`` Σ_{k≠h}|a^k|, ``margin`` m (Condition 8 holds iff every entry is >= 0)."""

    shadow: np.ndarray
    norm2: np.ndarray
    tangential2: np.ndarray
    others: np.ndarray
    margin: np.ndarray


def radial_parts(f: np.ndarray, x: np.ndarray) -> RadialParts:
    """The radial parts of head outputs ``f`` (H, n, d) at tokens ``x`` (n, d)."""
    a = np.einsum("hid,id->hi", f, x)
    f2 = np.einsum("hid,hid->hi", f, f)
    # ‖Pf‖² = ‖f‖² − a² up to round-off, which may dip below 0 for a radial output
    tang2 = np.maximum(f2 - a * a, 0.0)
    others = np.abs(a).sum(axis=0)[None] - np.abs(a)
    return RadialParts(a, f2, tang2, others, tang2 - np.sqrt(f2) * others)
