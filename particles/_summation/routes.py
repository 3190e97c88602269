"""Fast routes of one head: how its logits factor (circle, scalar, Gaussian of rank <= 3), the
truncation of each Fourier series to an error budget, and the FINUFFT calls.

Contract: :func:`fast_route` returns a :class:`Route` with ``route`` in {"constant", "circle",
"scalar", "gauss"} or ``None`` with the ``reason``; each truncation returns the number of
modes and the tail it leaves, which the plan adds to its error bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import erfc, ive

from .._core.numerics import scalar_of, scaled_rotation_of

__all__ = ["Route", "fast_route", "fast_available", "nufft_library", "Transforms", "NUFFT_LIBRARY", "NUFFT_SAFETY"]

# relative singular values below this are dropped from a head's factorisation (their sum is
# added to the bound): 1e-13 sits a decade above the SVD's own round-off of ~n eps
_RANK_RTOL = 1e-13


def _finufft():
    """The finufft module; its loader goes through numpy.ctypeslib, which on numpy < 1.25 imports the
    deprecated numpy.distutils (a DeprecationWarning that is numpy's, not a problem of the caller's)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*`numpy.distutils` is deprecated", category=DeprecationWarning)
        import finufft
    return finufft


def fast_available() -> bool:
    """Whether the FINUFFT package imports (the fast path needs it)."""
    try:
        _finufft()
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Route:
    """How one head's logits factor: ``route`` in {"circle", "scalar", "gauss"} or None.

    circle: βM = a R_alpha on S^1; scalar: βM = a I on the sphere (any d ≤ 3);
    gauss: βM = U Σ Vᵀ of rank r ≤ 3 (``U``, ``s``, ``Vt`` kept, ``dropped`` the sum of
    the singular values left out).
    """

    route: str | None
    a: float = 0.0
    alpha: float = 0.0
    U: np.ndarray | None = None
    s: np.ndarray | None = None
    Vt: np.ndarray | None = None
    dropped: float = 0.0
    reason: str = ""


def fast_route(BM: np.ndarray, on_sphere: bool) -> Route:
    """The fast route for one head with logit matrix ``BM`` = β M (d × d), or why none."""
    d = BM.shape[0]
    scale = float(np.max(np.abs(BM)))
    if scale == 0.0:
        # beta = 0 or M = 0: every weight is 1, the sums are plain (weighted) means, O(n)
        return Route("constant")
    if on_sphere and d == 2:
        rotation = scaled_rotation_of(BM)
        if rotation is not None:
            return Route("circle", a=rotation[0], alpha=rotation[1])
    if on_sphere and d <= 3:
        a = scalar_of(BM)
        if a is not None:
            return Route("scalar", a=a)
    U, s, Vt = np.linalg.svd(BM)
    r = int(np.sum(s > _RANK_RTOL * s[0]))
    if r > 3:
        return Route(None, reason=f"rank {r} > 3 (the fast path needs heads of rank <= 3: scalar heads on S^1/S^2 "
                                  "or low-rank M = Q^T K)")
    return Route("gauss", U=U[:, :r], s=s[:r], Vt=Vt[:r], dropped=float(s[r:].sum()))


#: the NUFFT library of the fast routes when set (benchmarks time both in one process); None: ducc0's
#: transforms when the package imports (2.4x faster than FINUFFT's at equal accuracy on the S^2 route at
#: n = 10^6, benchmarks/README.md), else FINUFFT's
NUFFT_LIBRARY: list = [None]
#: ducc0's double-precision transforms stop at this tolerance; below it FINUFFT serves
_DUCC0_EPS_MIN = 2.1e-13
#: per library, the constant C of its pointwise error: one transform at tolerance ε errs by at most
#: C ε per unit ℓ¹ norm of its input (a type-1 mode by ≤ C ε Σ_j |c_j|, a type-2 value by ≤ C ε Σ_k |a_k|).
#: The libraries' ε is an L2-type target, not this bound, so C is measured: the largest error of one unit
#: point (type 1) or one unit mode (type 2) over 2·10^5 positions and the corner modes of a 3-D grid,
#: ε = 1e-14..1e-5, was 1.44 ε for ducc0 (0.40-0.42) and 5.25 ε for FINUFFT 2.5 (9.73 ε for 2.2-2.4, at 1e-10:
#: the project requires FINUFFT 2.5); the constants leave a margin over both (tests/particles/
#: test_nufft_libraries.py measures it again, also at the declared floors)
NUFFT_SAFETY = {"ducc0": 2.0, "finufft": 8.0}


def nufft_library(eps: float = 1e-8) -> str:
    """``"ducc0"`` or ``"finufft"``: the library that runs the transforms at tolerance ``eps``."""
    if NUFFT_LIBRARY[0] is not None:
        return NUFFT_LIBRARY[0] if eps >= _DUCC0_EPS_MIN else "finufft"
    try:
        import ducc0.nufft  # noqa: F401
    except ImportError:
        return "finufft"
    return "ducc0" if eps >= _DUCC0_EPS_MIN else "finufft"


class Transforms:
    """The type-1 transform from the sources and the type-2 transform at the targets on one grid of modes
    (-K..K per axis), with the threads of :func:`particles.num_threads`; with ducc0 one plan (the sorted
    points) serves both when the targets are the sources."""

    def __init__(self, src: np.ndarray, tgt: np.ndarray, n_modes: tuple, eps: float, same: bool = False):
        self.src, self.tgt, self.n_modes, self.eps, self.same = src, tgt, tuple(n_modes), eps, same
        self.library = nufft_library(eps)
        self.safety = NUFFT_SAFETY[self.library]
        from .._core.threads import num_threads

        self.threads = num_threads()
        self._plans: dict = {}

    def _ducc0_plan(self, kind: int, eps: float | None = None):
        import ducc0

        eps = self.eps if eps is None else eps
        # one plan (one sort of the points) serves both transforms at one tolerance on one point set
        key = (1 if self.same else kind, eps)
        if key not in self._plans:
            coord = np.ascontiguousarray(self.src if key[0] == 1 else self.tgt)
            self._plans[key] = ducc0.nufft.plan(nu2u=kind == 1, coord=coord, grid_shape=self.n_modes,
                                                epsilon=eps, nthreads=self.threads)
        return self._plans[key]

    def type1(self, data: np.ndarray) -> np.ndarray:
        """Σ_j data[t, j] e^{-i k·x_j} on the modes, shape (n_trans, *n_modes)."""
        if self.library == "ducc0":
            return self._ducc0_plan(1).nu2u(forward=True, points=data)
        return self._finufft(1, self.src, data, self.eps)

    def type2(self, data: np.ndarray, eps: float | None = None) -> np.ndarray:
        """Σ_k data[t, k] e^{i k·y_i} at the targets, shape (n_trans, m), at tolerance ``eps`` (default: the
        type-1 tolerance; never below it, so the library stays the one chosen for type 1)."""
        eps = self.eps if eps is None else max(self.eps, eps)
        if self.library == "ducc0":
            out = self._ducc0_plan(2, eps).u2nu(forward=False, grid=np.ascontiguousarray(data))
            return out.reshape(data.shape[0], -1)
        return self._finufft(2, self.tgt, data, eps)

    def _finufft(self, kind: int, pts: np.ndarray, data: np.ndarray, eps: float) -> np.ndarray:
        finufft = _finufft()
        n_trans = data.shape[0]
        plan = finufft.Plan(kind, self.n_modes, n_trans=n_trans, eps=eps, isign=-1 if kind == 1 else 1,
                            modeord=0, nthreads=self.threads)
        plan.setpts(*[np.ascontiguousarray(pts[:, k]) for k in range(pts.shape[1])])
        out = plan.execute(data[0] if n_trans == 1 else data)
        if kind == 1:
            return out.reshape((n_trans,) + self.n_modes)
        return out.reshape(n_trans, -1)


def _pack(c: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The d + 1 real columns c ⊙ [1, y] as ⌈(d+1)/2⌉ complex strength vectors (written in place: at
    n = 10^6 the temporaries of a concatenate cost as much as a quarter of a transform)."""
    n, d = Y.shape
    out = np.zeros(((d + 2) // 2, n), complex)
    parts = out.view(float).reshape(out.shape[0], n, 2)  # [..., 0] real, [..., 1] imaginary parts
    parts[0, :, 0] = c
    for k in range(d):
        np.multiply(c, Y[:, k], out=parts[(k + 1) // 2, :, (k + 1) % 2])
    return out


def _unpack(out: np.ndarray, d: int) -> np.ndarray:
    """Inverse of :func:`_pack` on a type-2 output: real columns [T, S_1..S_d], shape (m, d+1)."""
    cols = np.empty((2 * out.shape[0], out.shape[1]))
    cols[0::2] = out.real
    cols[1::2] = out.imag
    return cols[: d + 1].T


def _truncate_gauss(sigma: float, P: float, budget: float) -> tuple[int, float]:
    """Modes K with tail Σ_{|k|>K} of the periodised Gaussian's coefficients ≤ budget."""
    # Σ_{k>K} ĝ_k ≤ ½ erfc(s0/√2) with s0 = 2πKσ/P (integral bound), twice for both signs
    s0 = np.sqrt(2.0) * np.sqrt(-np.log(max(budget, 1e-300)))
    K = int(np.ceil(s0 * P / (2 * np.pi * sigma)))
    while erfc(2 * np.pi * K * sigma / P / np.sqrt(2.0)) > budget:
        K += 1
    return K, float(erfc(2 * np.pi * K * sigma / P / np.sqrt(2.0)))


def _truncate_bessel(a: float, budget: float) -> tuple[int, float]:
    """Modes K with tail 2 Σ_{k>K} Ĩ_k(|a|) ≤ budget (the scaled Bessel coefficients sum to 1)."""
    a = abs(a)
    # Ĩ_k(a) ≈ exp(−k²/(2a))/√(2πa) for k ≪ a and decays factorially beyond: this cap is ample
    kmax = int(np.ceil(np.sqrt(2 * (a + 1) * np.log(1 / max(budget, 1e-300))) + 4 * np.log1p(a) + 40))
    terms = ive(np.arange(kmax + 1), a)
    tail = 2 * np.cumsum(terms[::-1])[::-1]  # tail[k] = 2 Σ_{j ≥ k}
    ok = np.flatnonzero(np.append(tail[1:], 0.0) <= budget)
    K = int(ok[0])
    return K, float(tail[K + 1]) if K + 1 <= kmax else 0.0


