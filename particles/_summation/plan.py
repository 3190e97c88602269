r"""The summation layer: every exponential attention sum, exact or fast, with its error bound.

Every quantity of an exp-kernel head (USA and softmax velocity, :math:`E_h`, the Theorem 11
rate, radial shadows, attention entropy, the mean-field velocity of a weighted measure)
comes from two sums per head and target point:

.. math::

    Z_i = \sum_j w_j e^{\beta\langle x_i, M y_j\rangle}, \qquad
    S_i = \sum_j w_j e^{\beta\langle x_i, M y_j\rangle}\, y_j ,

returned as :class:`HeadSums` (``logz`` = :math:`\log Z_i`, ``mean`` = :math:`S_i/Z_i`),
with targets :math:`x_i` (m of them), sources :math:`y_j` (n) and weights :math:`w_j \ge 0`
(1 for particles, the atom or cell masses for measures). Two evaluations:

``"exact"``
    Row-blocked GEMM + exp, O(mn) time, O(m · block) memory; the logits are shifted by the
    Cauchy–Schwarz bound :math:`\beta\|M^\top x_i\|\max_j\|y_j\|` folded into the GEMM, so
    nothing overflows at any β, and rows whose sum underflows under that shift are redone
    with the exact row maximum. This is the reference.
``"fast"``
    Non-uniform FFTs (FINUFFT), O((m + n) w^r + N^r log N) for a head of rank r ≤ 3:

    - *circle* route (S^1, heads :math:`\beta M = a R_\alpha`, a scaled rotation, which
      includes scalar heads): :math:`e^{a\cos(\theta-\varphi-\alpha)} = e^{|a|}\sum_k
      \tilde I_k(a) e^{ik(\theta-\varphi-\alpha)}` with :math:`\tilde I_k = I_k e^{-|a|}`
      (``scipy.special.ive``), one 1-D type-1 NUFFT of the weights at the source angles,
      a product with :math:`\tilde I_k e^{-ik\alpha}` per head, one 1-D type-2 NUFFT back;
    - *Gaussian* route (any d, :math:`\beta M = U\Sigma V^\top` of rank r ≤ 3): with
      :math:`q_i = \Sigma^{1/2}U^\top x_i`, :math:`k_j = \Sigma^{1/2}V^\top y_j` in
      :math:`\mathbb R^r`, :math:`e^{\langle q, k\rangle} = e^{|q|^2/2}e^{|k|^2/2}
      e^{-|q-k|^2/2}`: a discrete Gauss transform, periodised on a box of period
      :math:`P = L + \delta\sigma` (L the extent of the points, σ the Gaussian width),
      evaluated as a type-1 NUFFT, a product with the Gaussian's Fourier coefficients
      :math:`\frac{\sqrt{2\pi}\sigma}{P}e^{-(2\pi k\sigma/P)^2/2}` per axis, and a type-2
      NUFFT. Scalar heads on S^2 (:math:`M_h = \lambda_h I`, :math:`|x| = 1`) use the
      unscaled points :math:`e^{a\langle x,y\rangle} = e^{|a|}e^{-\frac{|a|}2|x \mp y|^2}`,
      so heads of similar |a| share one type-1 transform and one batched type-2 plan
      (a negative a is the reflected mode array).

    The d + 1 real weight columns :math:`w_j(1, y_j)` ride in ⌈(d+1)/2⌉ complex strength
    vectors, batched through one plan (``n_trans``).
``"auto"``
    Fast where it is cheaper and its bound meets ``tol``, exact otherwise; the reason of
    every fallback is logged on the ``headflow.summation`` logger (level INFO).

Error bound (a posteriori, per target row)
------------------------------------------
Write :math:`Z_i = e^{o_i} T_i`, :math:`T_i = \sum_j c_j K(x_i, y_j)` with a kernel
:math:`0 < K \le 1` and :math:`c_j \ge 0` (:math:`o_i` collects the constant factors).
Truncating the Fourier series, periodising, and the two NUFFTs each err by at most a
constant times :math:`\|c\|_1` pointwise (the NUFFT errors because the spreading kernel's
error is uniform and :math:`\sum_k|\hat K_k| \le 1`), so

.. math::

    |\tilde T_i - T_i| \le \varepsilon_K \|c\|_1, \qquad
    \eta_i = \frac{\varepsilon_K\|c\|_1}{\tilde T_i - \varepsilon_K\|c\|_1}
    \ \ge\ \frac{|\tilde Z_i - Z_i|}{Z_i},

with :math:`\varepsilon_K = \varepsilon_{\rm trunc} + \varepsilon_{\rm alias} +
C\sqrt2(\varepsilon_1 + \varepsilon_2)` (:math:`\varepsilon_{1,2}` FINUFFT's tolerances,
√2 for the complex packing, C = :data:`NUFFT_SAFETY`). :math:`\eta_i` bounds the relative
error of :math:`Z_i` (so of :math:`E_h` and of USA weights), :math:`2\eta_i\max_j|y_j|` the
error of the softmax mean, and :math:`\eta_i(1 + 2\beta\|M\|\max|y|)` that of the attention
entropy. Its size is set by :math:`\|c\|_1/T_i`, the ratio of the total weight to the
kernel mass seen by row i: about :math:`2\beta\lambda` for uniform tokens on S^2 and ≈ 1
in a cluster, but up to 1/w_i for a token isolated from all mass (only its own weight
near it). The FINUFFT tolerances are chosen from an exact estimate of that ratio on a few
sampled rows; rows whose bound still exceeds ``tol`` are recomputed exactly (O(n) each),
and if more than a fraction :data:`MAX_EXACT_FRACTION` of the rows would need that, the
head is evaluated exactly ("auto") or an :class:`~particles.InvalidParameterError` says
which bound failed ("fast"). Tight clusters do not change the cost or the error of the
Fourier routes.

ReLU kinds are not smooth and always use the exact pass.

References
----------
Barnett, Magland, af Klinteberg, *A parallel nonuniform fast Fourier transform library
based on an "exponential of semicircle" kernel*, SIAM J. Sci. Comput. 41 (2019);
Greengard, Strain, *The fast Gauss transform*, SIAM J. Sci. Stat. Comput. 12 (1991).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from scipy.special import erfc, ive

from .validation import InvalidParameterError

__all__ = [
    "HeadSums",
    "SUMMATIONS",
    "DEFAULT_TOL",
    "NUFFT_SAFETY",
    "MAX_EXACT_FRACTION",
    "fast_available",
    "exp_sums",
    "exact_exp_sums",
    "relu_sums",
    "fast_route",
]

logger = logging.getLogger("headflow.summation")

#: the evaluations a model may ask for
SUMMATIONS = ("exact", "fast", "auto")
#: default bound on the relative error of every partition function Z_i
DEFAULT_TOL = 1e-10
#: safety factor between FINUFFT's requested tolerance and the pointwise error per unit ‖c‖₁
NUFFT_SAFETY = 4.0
#: above this fraction of rows failing the bound, the head is not worth patching row by row
MAX_EXACT_FRACTION = 0.05
#: below this many target × source pairs "auto" stays exact (NUFFT set-up costs more)
AUTO_MIN_PAIRS = 2**22
#: FINUFFT cannot do better than this in double precision
_EPS_MIN = 1e-14
#: at most this many complex modes on one fine grid (memory guard, 16 bytes each)
_MAX_FINE_GRID = 2**27
# a row partition function below this (in shifted units) is recomputed with the exact max
_UNDERFLOW = 1e-250
# relative singular values below this are dropped from a head's factorisation (error added to the bound)
_RANK_RTOL = 1e-13
# rows sampled exactly to set the FINUFFT tolerance
_N_PROBE = 16


@dataclass(frozen=True)
class HeadSums:
    """Sums of one head over all target rows.

    ``exp`` kinds: ``logz[i] = log Z_i``, ``mean[i] = S_i / Z_i``; ``relu`` kinds: ``logz``
    is ``None``, ``total[i] = Σ_j ReLU(β s_ij)``, ``mean[i] = Σ_j ReLU(β s_ij) y_j``.
    ``method`` is ``"exact"`` or the fast route used, ``bound`` the a-posteriori bound
    max_i η_i on the relative error of Z_i (0 for exact sums: round-off only), ``n_exact``
    the rows recomputed exactly, ``reason`` why "auto" chose the exact pass (else "").
    """

    mean: np.ndarray
    logz: np.ndarray | None = None
    total: np.ndarray | None = None
    method: str = "exact"
    bound: float = 0.0
    n_exact: int = 0
    reason: str = ""


def fast_available() -> bool:
    """Whether the FINUFFT package imports (the fast path needs it)."""
    try:
        import finufft  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------- exact passes


def _rows_per_block(m: int, n: int, block_elements: int) -> int:
    return max(1, min(m, block_elements // max(n, 1)))


def _with_column(A: np.ndarray, col) -> np.ndarray:
    """[A, col]: one extra column, so that a shift or a row sum rides along a GEMM."""
    out = np.empty((A.shape[0], A.shape[1] + 1))
    out[:, :-1] = A
    out[:, -1] = col
    return out


def _values(Y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """[w ⊙ Y, w]: the right factor whose product with exp(logits) gives [S, Z]."""
    Ya = _with_column(Y, 1.0)
    if w is not None:
        Ya *= w[:, None]
    return Ya


def _finish(L, Y, Ya, out, logshift) -> HeadSums:
    """Normalise the accumulated [S, Z]; rows whose Z underflowed under the Cauchy–Schwarz
    shift (it overshot the true row max by > ~575) are recomputed with the exact row max."""
    d = Y.shape[1]
    z = out[:, d]
    bad = np.flatnonzero(~(z > _UNDERFLOW))
    if bad.size:
        T = L[bad] @ Y.T
        # weights enter linearly, so a zero-weight column must not set the max
        pos = Ya[:, d] > 0
        mx = np.where(pos[None, :], T, -np.inf).max(axis=1)
        T -= mx[:, None]
        np.exp(T, out=T)
        out[bad] = T @ Ya
        logshift[bad] = mx
        z = out[:, d]
    with np.errstate(divide="ignore", invalid="ignore"):
        # a row with no mass at all (every weight 0) has log Z = -inf and no mean, on purpose
        return HeadSums(mean=out[:, :d] / z[:, None], logz=logshift + np.log(z))


def exact_exp_sums(L: np.ndarray, Y: np.ndarray, w: np.ndarray | None, block_elements: int,
                   symmetric: bool = False) -> HeadSums:
    r"""Exact :math:`(\log Z_i, S_i/Z_i)` of the logits ``L @ Y.T`` (row-blocked GEMM + exp).

    Parameters
    ----------
    L : ndarray of shape (m, d)
        Left factors :math:`\beta M^\top x_i` of the targets (logit :math:`\langle L_i, y_j\rangle`).
    Y : ndarray of shape (n, d)
        Sources (keys and values).
    w : ndarray of shape (n,) or None
        Source weights (None: all 1).
    block_elements : int
        Entries of one logit tile.
    symmetric : bool
        The logit matrix is symmetric (targets are the sources and M = Mᵀ): each
        off-diagonal tile then serves both its rows and, transposed, its columns, so half
        the exps are done, under one global shift.
    """
    m, d = L.shape
    n = Y.shape[0]
    R = float(np.sqrt(np.max(np.einsum("ij,ij->i", Y, Y))))
    Ya = _values(Y, w)
    YaT = np.ascontiguousarray(_with_column(Y, 1.0).T)
    if symmetric:
        shift = float(np.sqrt(np.max(np.einsum("ij,ij->i", L, L)))) * R
        La = _with_column(L, -shift)
        out = np.zeros((m, d + 1))
        side = max(64, int(np.sqrt(block_elements)))
        tile = np.empty((side, side))
        for I in range(0, m, side):
            sI = slice(I, min(m, I + side))
            for J in range(I, m, side):
                sJ = slice(J, min(m, J + side))
                T = tile[: sI.stop - sI.start, : sJ.stop - sJ.start]
                np.matmul(La[sI], YaT[:, sJ], out=T)
                np.exp(T, out=T)
                out[sI] += T @ Ya[sJ]
                if J != I:
                    out[sJ] += T.T @ Ya[sI]
        return _finish(L, Y, Ya, out, np.full(m, shift))
    shift = np.sqrt(np.einsum("ij,ij->i", L, L)) * R
    La = _with_column(L, -shift)
    out = np.empty((m, d + 1))
    B = _rows_per_block(m, n, block_elements)
    tile = np.empty((B, n))
    for start in range(0, m, B):
        stop = min(m, start + B)
        T = tile[: stop - start]
        np.matmul(La[start:stop], YaT, out=T)
        np.exp(T, out=T)
        np.matmul(T, Ya, out=out[start:stop])
    return _finish(L, Y, Ya, out, shift)


def relu_sums(L: np.ndarray, Y: np.ndarray, block_elements: int) -> HeadSums:
    """Σ_j ReLU(L_i·y_j) y_j and Σ_j ReLU(L_i·y_j), row-blocked (always exact)."""
    m, d = L.shape
    Ya = _with_column(Y, 1.0)
    YT = np.ascontiguousarray(Y.T)
    out = np.empty((m, d + 1))
    B = _rows_per_block(m, Y.shape[0], block_elements)
    tile = np.empty((B, Y.shape[0]))
    for start in range(0, m, B):
        stop = min(m, start + B)
        T = tile[: stop - start]
        np.matmul(L[start:stop], YT, out=T)
        np.maximum(T, 0.0, out=T)
        np.matmul(T, Ya, out=out[start:stop])
    return HeadSums(mean=out[:, :d], total=out[:, d])


# ---------------------------------------------------------------------- fast routes


@dataclass(frozen=True)
class _Head:
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


def fast_route(BM: np.ndarray, on_sphere: bool) -> _Head:
    """The fast route for one head with logit matrix ``BM`` = β M (d × d), or why none."""
    d = BM.shape[0]
    scale = float(np.max(np.abs(BM)))
    if scale == 0.0:
        # beta = 0 or M = 0: every weight is 1, the sums are plain (weighted) means, O(n)
        return _Head("constant")
    if on_sphere and d == 2:
        p, q = 0.5 * (BM[0, 0] + BM[1, 1]), 0.5 * (BM[1, 0] - BM[0, 1])
        conformal = np.array([[p, -q], [q, p]])
        if np.max(np.abs(BM - conformal)) <= 1e-14 * scale:
            return _Head("circle", a=float(np.hypot(p, q)), alpha=float(np.arctan2(q, p)))
    if on_sphere and d <= 3:
        a = BM[0, 0]
        if np.max(np.abs(BM - a * np.eye(d))) <= 1e-14 * scale:
            return _Head("scalar", a=float(a))
    U, s, Vt = np.linalg.svd(BM)
    r = int(np.sum(s > _RANK_RTOL * s[0]))
    if r > 3:
        return _Head(None, reason=f"rank {r} > 3 (the fast path needs heads of rank <= 3: scalar heads on S^1/S^2 "
                                  "or low-rank M = Q^T K)")
    return _Head("gauss", U=U[:, :r], s=s[:r], Vt=Vt[:r], dropped=float(s[r:].sum()))


def _nufft(kind: int, pts: list, n_modes: tuple, data: np.ndarray, eps: float) -> np.ndarray:
    """One FINUFFT call over a batch: type 1 (pts -> modes) or type 2 (modes -> pts)."""
    import finufft

    n_trans = data.shape[0]
    plan = finufft.Plan(kind, n_modes, n_trans=n_trans, eps=eps, isign=-1 if kind == 1 else 1, modeord=0)
    plan.setpts(*[np.ascontiguousarray(p) for p in pts])
    out = plan.execute(data[0] if n_trans == 1 else data)
    if kind == 1:
        return out.reshape((n_trans,) + tuple(n_modes))
    return out.reshape(n_trans, -1)


def _pack(c: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The d + 1 real columns c ⊙ [1, y] as ⌈(d+1)/2⌉ complex strength vectors."""
    cols = np.concatenate([c[None, :], c[None, :] * Y.T])
    if cols.shape[0] % 2:
        cols = np.concatenate([cols, np.zeros((1, cols.shape[1]))])
    return np.ascontiguousarray(cols[0::2] + 1j * cols[1::2])


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


@dataclass
class _Group:
    """Heads evaluated through one type-1 and one batched type-2 transform."""

    heads: list  # head indices
    route: str
    src: np.ndarray  # (n, r) source coordinates (angles for circle)
    tgt: np.ndarray  # (m, r)
    c: np.ndarray  # (n,) non-negative strengths shared by the heads
    offset: list  # per head, (m,) or float: log Z_i = offset + log T_i
    # per head, per axis: a function K -> (coefficients of modes -K..K)
    coef: list
    n_modes: tuple
    model_err: list  # per head: truncation + aliasing error per unit ‖c‖₁


def _groups(infos, targets, sources, w, tol_model):
    """Assemble the transform groups for the heads with a fast route."""
    groups = []
    wts = np.ones(sources.shape[0]) if w is None else w
    circle = [h for h, i in infos.items() if i.route == "circle"]
    if circle:
        th = np.arctan2(targets[:, 1], targets[:, 0])[:, None]
        ph = np.arctan2(sources[:, 1], sources[:, 0])[:, None]
        Ks, coefs, errs = [], [], []
        for h in circle:
            K, err = _truncate_bessel(infos[h].a, tol_model)
            Ks.append(K)
            errs.append(err)
        K = max(Ks)
        k = np.arange(-K, K + 1)
        for h in circle:
            a, alpha = infos[h].a, infos[h].alpha
            coefs.append([ive(np.abs(k), a) * np.exp(-1j * k * alpha)])
        groups.append(_Group(circle, "circle", ph, th, wts, [abs(infos[h].a) for h in circle], coefs,
                             (2 * K + 1,), errs))
    scalar = sorted((h for h, i in infos.items() if i.route == "scalar"), key=lambda h: abs(infos[h].a))
    # heads whose |a| differ by more than 4x would force the wide box of the smaller onto the larger
    batches, cur = [], []
    for h in scalar:
        if cur and abs(infos[h].a) > 4 * abs(infos[cur[0]].a):
            batches.append(cur)
            cur = []
        cur.append(h)
    if cur:
        batches.append(cur)
    for hs in batches:
        r = targets.shape[1]
        sig = [1.0 / np.sqrt(abs(infos[h].a)) for h in hs]
        groups.append(_gauss_group(hs, "scalar", targets, sources, wts, sig, [infos[h].a < 0 for h in hs],
                                   [abs(infos[h].a) for h in hs], tol_model, r, centre=np.zeros(r)))
    for h, i in infos.items():
        if i.route != "gauss":
            continue
        q = (targets @ i.U) * np.sqrt(i.s)
        kk = (sources @ i.Vt.T) * np.sqrt(i.s)
        k2 = 0.5 * np.einsum("ij,ij->i", kk, kk)
        kap = float(k2.max())
        c = wts * np.exp(k2 - kap)
        off = 0.5 * np.einsum("ij,ij->i", q, q) + kap
        lo = np.minimum(q.min(0), kk.min(0))
        hi = np.maximum(q.max(0), kk.max(0))
        g = _gauss_group([h], "gauss", q, kk, c, [1.0], [False], [off], tol_model, q.shape[1],
                         centre=0.5 * (lo + hi), extent=hi - lo)
        # the dropped singular values perturb every logit by at most their sum: e^{that} − 1 relative
        g.model_err[0] += float(np.expm1(i.dropped * _max_norm(targets) * _max_norm(sources)))
        groups.append(g)
    return groups


def _max_norm(X):
    return float(np.sqrt(np.max(np.einsum("ij,ij->i", X, X))))


def _gauss_group(heads, route, tgt, src, c, sigmas, flips, offsets, tol_model, r, centre, extent=None):
    """A periodised Gauss transform for heads of widths ``sigmas`` sharing points and strengths."""
    if extent is None:
        # scalar heads on the sphere: every point and its reflection lie in [-1, 1]^r
        extent = np.full(r, 2.0)
    smax = max(sigmas)
    # aliasing: the nearest periodic image of a difference is ≥ δσ_max away, e^{-δ²/2} ≤ budget
    delta = np.sqrt(2 * np.log(4.0 / tol_model))
    P = extent + delta * smax
    alias = float(2.02 * np.exp(-0.5 * delta**2))
    Ks = np.zeros((len(heads), r), dtype=int)
    errs = []
    for a_, s in enumerate(sigmas):
        tail = 0.0
        for ax in range(r):
            Ks[a_, ax], t = _truncate_gauss(s, P[ax], tol_model / (2 * r))
            tail += t
        errs.append(r * alias * (1 + alias) ** (r - 1) + tail * (1 + alias) ** (r - 1))
    K = Ks.max(axis=0)
    coefs = []
    for s, flip in zip(sigmas, flips):
        per_axis = []
        for ax in range(r):
            k = np.arange(-K[ax], K[ax] + 1)
            per_axis.append(np.sqrt(2 * np.pi) * s / P[ax] * np.exp(-0.5 * (2 * np.pi * k * s / P[ax]) ** 2))
        coefs.append((per_axis, flip))
    scale = 2 * np.pi / P
    t_pts = (tgt - centre) * scale
    s_pts = (src - centre) * scale
    return _Group(list(heads), route, s_pts, t_pts, c, list(offsets), coefs, tuple(int(2 * k + 1) for k in K), errs)


def _fine_grid(n_modes) -> int:
    return int(np.prod([2 * k for k in n_modes]))


def _run_group(g: _Group, Y: np.ndarray, eps: float) -> list[tuple[np.ndarray, float]]:
    """[T, S] (m, d+1) per head of the group and ‖c‖₁."""
    d = Y.shape[1]
    strengths = _pack(g.c, Y)
    nv = strengths.shape[0]
    src = [g.src[:, k] for k in range(g.src.shape[1])]
    tgt = [g.tgt[:, k] for k in range(g.tgt.shape[1])]
    F = _nufft(1, src, g.n_modes, strengths, eps)
    stack = []
    for co in g.coef:
        if g.route == "circle":
            stack.append(F * co[0][None, :])
            continue
        per_axis, flip = co
        G = F[(slice(None),) + (slice(None, None, -1),) * len(per_axis)] if flip else F
        # a reflected source -y_j has the modes of F at -k: the reversed array (modes are -K..K)
        prod = per_axis[0]
        for ax in range(1, len(per_axis)):
            prod = np.multiply.outer(prod, per_axis[ax])
        stack.append(G * prod[None])
    out = _nufft(2, tgt, g.n_modes, np.concatenate(stack), eps)
    return [_unpack(out[i * nv:(i + 1) * nv], d) for i in range(len(g.heads))]


def exp_sums(BM: np.ndarray, targets: np.ndarray, sources: np.ndarray, w: np.ndarray | None, *,
             summation: str = "auto", tol: float = DEFAULT_TOL, on_sphere: bool = True,
             block_elements: int = 2**18, same_points: bool = False, symmetric: bool = False) -> list[HeadSums]:
    r"""Exact or fast :math:`(\log Z_i, S_i/Z_i)` of every head (module docstring).

    Parameters
    ----------
    BM : ndarray of shape (H, d, d)
        Logit matrices: the logit of target i and source j under head h is
        :math:`\langle x_i, B_h y_j\rangle` with ``B_h = BM[h]`` (β M_h for a model's rows).
    targets : ndarray of shape (m, d)
    sources : ndarray of shape (n, d)
    w : ndarray of shape (n,) or None
        Non-negative source weights (None: all 1).
    summation : {"exact", "fast", "auto"}
    tol : float in (0, 1)
        Bound on the relative error of every :math:`Z_i` that a fast result must meet.
    on_sphere : bool
        Targets and sources are unit vectors (enables the circle and scalar routes).
    block_elements : int
        Tile size of the exact pass.
    same_points : bool
        ``targets is sources`` (particle flows).
    symmetric : bool
        Every B_h is symmetric (with ``same_points``, the exact pass does half the exps).

    Returns
    -------
    list of HeadSums, one per head
    """
    H = BM.shape[0]
    m, n = targets.shape[0], sources.shape[0]
    results: list[HeadSums | None] = [None] * H
    reasons = {}
    infos = {}
    for h in range(H):
        if summation == "exact":
            continue
        info = fast_route(BM[h], on_sphere)
        if info.route == "constant":
            results[h] = _constant_sums(targets.shape[0], sources, w)
            continue
        if info.route is None:
            reasons[h] = info.reason
            continue
        if summation == "auto" and m * n < AUTO_MIN_PAIRS:
            reasons[h] = f"m * n = {m * n} < {AUTO_MIN_PAIRS} target-source pairs: the exact pass is cheaper"
            continue
        if not fast_available():
            reasons[h] = "the finufft package is not installed (pip install finufft)"
            continue
        infos[h] = info
    if summation == "fast" and reasons:
        h, why = next(iter(reasons.items()))
        raise InvalidParameterError(
            f"summation='fast' cannot be used for head {h}: {why}. Use summation='auto' (fast where its bound "
            "holds, exact elsewhere) or summation='exact'."
        )

    def exact(h, rows=None):
        L = (targets if rows is None else targets[rows]) @ BM[h]
        return exact_exp_sums(L, sources, w, block_elements, symmetric=symmetric and same_points and rows is None)

    if infos:
        _fast(BM, targets, sources, w, infos, results, reasons, summation, tol, exact)
    for h in range(H):
        if results[h] is None:
            if np.max(np.abs(BM[h])) == 0.0:
                results[h] = _constant_sums(targets.shape[0], sources, w)
                continue
            if h in reasons and summation != "exact":
                logger.info("head %d: exact summation (%s)", h, reasons[h])
            res = exact(h)
            results[h] = HeadSums(res.mean, res.logz, reason=reasons.get(h, ""))
    return results


def _constant_sums(m: int, sources: np.ndarray, w: np.ndarray | None) -> HeadSums:
    """All logits 0: Z = Σ_j w_j and the mean is the weighted mean, the same for every row."""
    wts = np.ones(sources.shape[0]) if w is None else w
    z = float(wts.sum())
    mean = (wts @ sources) / z
    return HeadSums(np.tile(mean, (m, 1)), np.full(m, np.log(z)))


def _fast(BM, targets, sources, w, infos, results, reasons, summation, tol, exact):
    """Fill ``results`` for the heads in ``infos`` by their fast routes (module docstring)."""
    m = targets.shape[0]
    wts = np.ones(sources.shape[0]) if w is None else w
    # the ratio ‖c‖₁ / T_i that multiplies the kernel error, estimated exactly on a few rows
    probe = np.unique(np.linspace(0, m - 1, min(m, _N_PROBE)).astype(int))
    # it only sets FINUFFT's tolerance (the a-posteriori bound decides), so a strided subset
    # of the sources, reweighted, estimates T_i well enough at O(probe · 2^16) cost
    stride = max(1, sources.shape[0] // 2**16)
    sub, wsub = sources[::stride], wts[::stride]
    if wsub.sum() > 0:
        wsub = wsub * (wts.sum() / wsub.sum())
    else:
        sub, wsub = sources, wts
    ratio = {}
    for h in infos:
        pr = exact_exp_sums(targets[probe] @ BM[h], sub, wsub, 2**18)
        ratio[h] = _ratio_probe(h, infos[h], pr, targets[probe], sources, wts)
    for h in list(infos):
        eps_n = _nufft_eps(tol / ratio[h])
        if eps_n < _EPS_MIN:
            reasons[h] = (f"the bound needs FINUFFT eps = {eps_n:.1e} < {_EPS_MIN:g} (weight ratio "
                          f"||c||_1 / T_i ~ {ratio[h]:.2e} at tol = {tol:g})")
            del infos[h]
    if summation == "fast" and reasons:
        h, why = next(iter(reasons.items()))
        raise InvalidParameterError(f"summation='fast' cannot meet tol={tol:g} for head {h}: {why}. "
                                    "Raise tol, or use summation='auto' or 'exact'.")
    # every head of a group shares one FINUFFT tolerance: the strictest of its heads
    by_eps = {h: tol / ratio[h] for h in infos}
    if not infos:
        return
    # a quarter of the kernel error budget goes to truncation and aliasing, the rest to the NUFFTs
    # one retry: heads with too many rows over the bound get the kernel budget those rows need
    for attempt in range(2):
        retry = {}
        pending = {h: infos[h] for h in infos if results[h] is None and h not in reasons}
        if not pending:
            break
        for g in _groups(pending, targets, sources, w, min(by_eps[h] for h in pending) / 4):
            eps_n = max(_EPS_MIN, _nufft_eps(min(by_eps[h] for h in g.heads)))
            if _fine_grid(g.n_modes) * (len(g.heads) + 1) > _MAX_FINE_GRID:
                for h in g.heads:
                    reasons[h] = f"{g.n_modes} Fourier modes exceed the memory guard (beta ||M|| too large)"
                continue
            t_fast, t_exact = _cost(g, m, sources.shape[0], sources.shape[1], eps_n)
            if summation == "auto" and t_fast > t_exact:
                for h in g.heads:
                    reasons[h] = (f"the exact pass is cheaper here (estimated {t_exact:.2g} s against {t_fast:.2g} s "
                                  f"for {g.n_modes} Fourier modes)")
                continue
            norm_c = float(np.sum(g.c))
            for h, TS, off, merr in zip(g.heads, _run_group(g, sources, eps_n), g.offset, g.model_err):
                err = (merr + NUFFT_SAFETY * np.sqrt(2.0) * 2 * eps_n) * norm_c
                T = TS[:, 0]
                with np.errstate(divide="ignore", invalid="ignore"):
                    eta = np.where(T > err, err / (T - err), np.inf)
                bad = np.flatnonzero(~(eta <= tol))
                too_many = bad.size > MAX_EXACT_FRACTION * m
                # a few bad rows are fixed exactly, but at large n that fix can cost more than the
                # transforms: then a tighter budget (one more pass) is cheaper than the exact rows
                too_costly = _EXACT_PAIR_SECONDS * bad.size * sources.shape[0] > t_fast
                if attempt == 0 and (too_many or too_costly):
                    # too many: the budget that would leave half the allowed rows over the bound;
                    # too costly: the budget for every row with kernel mass above the error
                    # (rows with eta = inf have none: cap them before the quantile)
                    need = (float(np.quantile(np.minimum(eta, 1e300), 1 - MAX_EXACT_FRACTION / 2)) if too_many
                            else float(np.max(eta[np.isfinite(eta)], initial=0.0))) / tol
                    if 1.0 < need < 1e290 and _nufft_eps(by_eps[h] / (2 * need)) >= _EPS_MIN:
                        retry[h] = by_eps[h] / (2 * need)
                        continue
                if too_many:
                    why = (f"{bad.size} of {m} rows have an error bound above tol={tol:g} (max "
                           f"{float(np.max(eta)):.1e}): the dynamic range ||c||_1/T_i is too large")
                    if summation == "fast":
                        raise InvalidParameterError(f"summation='fast' cannot meet tol for head {h}: {why}. "
                                                    "Use summation='auto' or 'exact', or raise tol.")
                    reasons[h] = why
                    continue
                with np.errstate(divide="ignore", invalid="ignore"):
                    mean = TS[:, 1:] / T[:, None]
                    logz = off + np.log(T)
                if bad.size:
                    fix = exact(h, bad)
                    mean[bad] = fix.mean
                    logz[bad] = fix.logz
                    eta[bad] = 0.0
                results[h] = HeadSums(mean, logz, method=g.route, bound=float(eta.max()), n_exact=int(bad.size))
        if not retry:
            break
        by_eps.update(retry)


# cost model of "auto" (seconds, one core; fitted to benchmarks/bench_fastsum.py on a 2-core x86 machine)
_EXACT_PAIR_SECONDS = 7e-9  # one (target, source) pair of one head: GEMM share + exp
_POINT_SECONDS = 1.5e-7  # per non-uniform point and transform: sorting, bookkeeping
_KERNEL_SECONDS = 6e-10  # per point, transform and entry of the w^r spreading stencil
_FFT_SECONDS = 3e-8  # per fine-grid point and transform, FFT and deconvolution


def _cost(g: _Group, m: int, n: int, d: int, eps: float) -> tuple[float, float]:
    """Estimated seconds of the group's transforms and of the exact pass of its heads."""
    nv = (d + 2) // 2
    w = min(16, int(np.ceil(-np.log10(eps))) + 1)  # FINUFFT's kernel width for this tolerance
    r = len(g.n_modes)
    per_point = _POINT_SECONDS + _KERNEL_SECONDS * w**r
    t_fast = nv * (n + len(g.heads) * m) * per_point + nv * (1 + len(g.heads)) * _fine_grid(g.n_modes) * _FFT_SECONDS
    return t_fast, _EXACT_PAIR_SECONDS * m * n * len(g.heads)


def _nufft_eps(eps_kernel: float) -> float:
    """FINUFFT tolerance whose share of the kernel error, C √2 (ε₁ + ε₂) = ¾ ε_K, fits the budget."""
    return 0.75 * eps_kernel / (2 * NUFFT_SAFETY * np.sqrt(2.0))


def _ratio_probe(h, info, pr: HeadSums, tq, sources, wts) -> float:
    """‖c‖₁ / T_i = exp(log ‖c‖₁ + offset_i − log Z_i) on the probe rows: its upper quartile, times 2."""
    if info.route in ("circle", "scalar"):
        log_c = np.log(np.sum(wts))
        off = abs(info.a)
    else:
        kk = (sources @ info.Vt.T) * np.sqrt(info.s)
        k2 = 0.5 * np.einsum("ij,ij->i", kk, kk)
        kap = float(k2.max())
        log_c = np.log(np.sum(wts * np.exp(k2 - kap)))
        q = (tq @ info.U) * np.sqrt(info.s)
        off = 0.5 * np.einsum("ij,ij->i", q, q) + kap
    with np.errstate(over="ignore"):
        r = np.exp(np.clip(log_c + off - pr.logz, -700, 700))
    # the typical row sets the tolerance; outliers (isolated tokens) fail the a-posteriori
    # bound and are recomputed exactly, or, when they are many, the head falls back
    return float(2.0 * max(1.0, np.quantile(r, 0.75)))
