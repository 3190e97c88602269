r"""Float64 facts, each written once: the overflow limit of ``exp`` and the round-off tolerance of
the structural tests of a head (is it :math:`\lambda I`, a scaled rotation, symmetric?).

Every layer reads them from here (:mod:`particles.extend` for ``meanfield`` and ``metrics``): a
kernel that takes a special path for scalar heads and the code that describes a model as "scalar
heads" agree on which heads those are.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LOG_OVERFLOW", "ROUNDOFF_RTOL", "negligible", "scalar_of", "scalar_heads", "scaled_rotation_of",
           "is_symmetric", "FEW_COORDS", "few_coords", "rowdot"]

#: exp(709.8) is the float64 limit; 700 leaves room for the sum of n terms and the 1/n scale
LOG_OVERFLOW = 700.0

#: a structural defect (``|A - λI|``, ``|M - Mᵀ|``) counts as zero when at most this times the
#: largest entry of the matrix: 64 ulps, far above the few roundings of a matrix built exactly
#: (``lam * eye``, a product by β, a transpose) and far below any deliberate departure
ROUNDOFF_RTOL = 64 * float(np.finfo(np.float64).eps)


def negligible(defect, A) -> bool:
    """Whether ``defect`` (an array or a number) is round-off relative to the entries of ``A``:
    ``max|defect| <= ROUNDOFF_RTOL · max|A|`` (exact equality for A = 0)."""
    return float(np.max(np.abs(defect))) <= ROUNDOFF_RTOL * float(np.max(np.abs(A)))


def scalar_of(A: np.ndarray) -> float | None:
    r"""λ when the square matrix A is :math:`\lambda I` to round-off (:func:`negligible`), else None.

    >>> scalar_of(2.0 * np.eye(3)), scalar_of(np.diag([1.0, 2.0]))
    (2.0, None)
    """
    lam = float(A[0, 0])
    return lam if negligible(A - lam * np.eye(A.shape[0]), A) else None


def scalar_heads(M: np.ndarray, W: np.ndarray):
    r"""(λ, μ), arrays of the heads' strengths, when every head is :math:`M_h = \lambda_h I` and
    :math:`W_h = \mu_h I` (:func:`scalar_of`), else None."""
    lam, mu = [scalar_of(m) for m in M], [scalar_of(w) for w in W]
    if None in lam or None in mu:
        return None
    return np.array(lam), np.array(mu)


def scaled_rotation_of(A: np.ndarray) -> tuple[float, float] | None:
    r"""(r, α) when the 2 × 2 matrix A is :math:`r R(\alpha) = \begin{pmatrix}p & -q\\ q & p\end{pmatrix}`
    to round-off (its action on the circle is a rotation and a scaling), else None.

    >>> scaled_rotation_of(np.array([[0.0, -2.0], [2.0, 0.0]]))
    (2.0, 1.5707963267948966)
    """
    p, q = 0.5 * (A[0, 0] + A[1, 1]), 0.5 * (A[1, 0] - A[0, 1])
    if not negligible(A - np.array([[p, -q], [q, p]]), A):
        return None
    return float(np.hypot(p, q)), float(np.arctan2(q, p))


def is_symmetric(M: np.ndarray) -> bool:
    """Whether every matrix of the stack M (H, d, d) is symmetric to round-off."""
    return negligible(M - np.swapaxes(M, -1, -2), M)


#: up to this many coordinates, row-wise operations loop over the coordinates: numpy runs each as
#: one strided loop over all rows, instead of one tiny inner loop of d entries per row (x3-x5 faster
#: for the d = 2, 3 stacks of phase diagrams); for d >= 3 the loop and einsum may round the last bit
#: differently (einsum's order of the sum is its own), so a row's value depends on the path to round-off
FEW_COORDS = 4


def few_coords(*arrays) -> bool:
    """The arrays share a last axis of at most :data:`FEW_COORDS` coordinates."""
    d = arrays[0].shape[-1] if arrays[0].ndim else 0
    return 0 < d <= FEW_COORDS and all(a.ndim and a.shape[-1] == d for a in arrays)


#: above this many entries (512 KiB) a coordinate loop of 3 or more passes reads operands that no longer sit in
#: a core's L2 cache once per coordinate: einsum's single pass wins (n = 10^5, d = 3: 0.45 against 1.1 ms;
#: two coordinates stay faster by the loop up to 10^5 rows at least)
ROWDOT_CACHED = 2**16


def rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products over the last axis (by coordinates for :func:`few_coords` arrays that sit in
    cache, :data:`ROWDOT_CACHED`)."""
    if few_coords(a, b) and (a.shape[-1] <= 2 or a.size <= ROWDOT_CACHED):
        r = a[..., 0] * b[..., 0]
        for c in range(1, a.shape[-1]):
            r += a[..., c] * b[..., c]
        return r
    return np.einsum("...i,...i->...", a, b)
